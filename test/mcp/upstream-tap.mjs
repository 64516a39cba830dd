// upstream-tap.mjs LOG MODULE [ARG...] runs the MCP server MODULE (a node
// module) over stdio, as the gateway's upstream, and appends each
// tools/call the gateway sends it to LOG before passing it on: one JSON
// line, {"name", "arguments"}. The Go test counts these calls, so that
// every upstream call is seen, not only the ones that leave a trace in the
// server's own state. Everything else passes through unchanged, both ways.
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [log, module, ...args] = process.argv.slice(2);
if (!log || !module) {
  process.stderr.write("usage: node upstream-tap.mjs LOG MODULE [ARG...]\n");
  process.exit(2);
}

const child = spawn(process.execPath, [module, ...args], { stdio: ["pipe", "inherit", "inherit"] });
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => child.kill(sig));
}

// The stdio transport is one JSON-RPC message a line.
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    msg = undefined;
  }
  if (msg?.method === "tools/call") {
    // Written, synchronously, before the server sees the call.
    appendFileSync(log, JSON.stringify({ name: msg.params?.name, arguments: msg.params?.arguments }) + "\n");
  }
  child.stdin.write(line + "\n");
});
lines.on("close", () => child.stdin.end());
