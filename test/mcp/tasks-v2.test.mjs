// MCP Tasks (io.modelcontextprotocol/tasks) with the TypeScript SDK v2
// client and the extension's official requester package,
// @modelcontextprotocol/ext-tasks (both as package-lock.json pins them).
// ext-tasks drives a task of a 2026-07-28 server through a request path of
// the host's own (rawDispatch): the SDK client's codec takes no
// resultType "task", and ext-tasks says so and asks the host for it. Here
// that path is one HTTP POST a request to /mcp, with the headers a
// 2026-07-28 client sends; ext-tasks frames each request's _meta itself
// (declaring the extension). The server the Go test started serves the
// tasks of its tests; the restart test serves one of its own
// (COUNTERSIGN_RESTART_CONFIG, another store), which it stops and starts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { once } from "node:events";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { createTaskSessionFromClient, DispatchError } from "@modelcontextprotocol/ext-tasks/client";
import {
  bin, config, createEntity, decide, fingerprint, observe, outcome, proposal, restartConfig, server,
} from "./support.mjs";

const tasksExtension = "io.modelcontextprotocol/tasks";
const clientInfo = { name: "countersign-e2e-tasks", version: "1.0.0" };
const capabilities = { extensions: { [tasksExtension]: {} } };

// anyJSON is a result schema (Standard Schema) that takes any JSON: the
// SDK client's request() takes one for a method it does not know.
const anyJSON = { "~standard": { version: 1, vendor: "countersign-e2e", validate: (value) => ({ value }) } };

// httpDispatch is the host's request path ext-tasks asks for: it posts one
// JSON-RPC request to base's /mcp as key's holder and answers its response.
// Every exchange is kept in wire, as the server sent it.
function httpDispatch(base, key, wire) {
  let id = 0;
  return async (request, options = {}) => {
    const body = { jsonrpc: "2.0", id: `e2e-${++id}`, ...request };
    const headers = {
      "Content-Type": "application/json", Accept: "application/json, text/event-stream", Authorization: `Bearer ${key}`,
      "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": request.method, ...options.context?.headers,
    };
    if (request.method === "tools/call") headers["Mcp-Name"] = request.params.name;
    let res;
    try {
      res = await fetch(`${base}/mcp`, { method: "POST", headers, body: JSON.stringify(body), signal: options.signal });
    } catch (err) {
      throw new DispatchError(`POST ${base}/mcp: ${err.message}`, false, { cause: err });
    }
    const text = await res.text();
    const data = res.headers.get("content-type")?.startsWith("text/event-stream")
      ? text.split("\n").find((line) => line.startsWith("data: "))?.slice("data: ".length)
      : text;
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      throw new DispatchError(`POST ${base}/mcp ${request.method}: HTTP ${res.status}, not a JSON-RPC response: ${text}`);
    }
    wire.push({ request: body, response: msg });
    return msg.error ? { kind: "error", error: msg.error } : { kind: "result", result: msg.result };
  };
}

// tasksClient connects a 2026-07-28 client that declares the extension to
// base over HTTP as key's holder, and makes its ext-tasks session.
async function tasksClient(base = server, key = "key_alice") {
  const client = new Client(clientInfo, { capabilities, versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
  const wire = [];
  const session = createTaskSessionFromClient(client, {
    endpointId: `countersign-e2e ${base}`,
    rawDispatch: httpDispatch(base, key, wire),
    v2RequestFraming: { protocolVersion: "2026-07-28", clientInfo, clientCapabilities: capabilities },
  });
  return { client, session, wire, close: async () => { await session.close(); await client.close(); } };
}

// call makes a tools/call through session: a task, or the answer at once.
function call(session, { name, arguments: args }) {
  return session.callTool(name, args);
}

// createdTask checks the wire answer of the call that made task id: a
// CreateTaskResult, working, whose id is its proposal's, durable before
// it was answered (tasks/get finds it), and made to be run by the workers
// (independent mode) in the credential's thread.
async function createdTask(wire, id) {
  const made = wire.find((x) => x.request.method === "tools/call" && x.response.result?.taskId === id)?.response.result;
  assert.ok(made, `no tools/call answered task ${id}: ${JSON.stringify(wire)}`);
  assert.equal(made.resultType, "task");
  assert.equal(made.status, "working");
  assert.equal(made.content, undefined, "a CreateTaskResult carries content");
  assert.match(id, /^prp_/);
  const p = await proposal(id);
  assert.equal(p.status, "pending");
  assert.equal(p.mode, "independent");
  assert.equal(p.thread_id, `mcp:${fingerprint("key_alice")}`);
  assert.equal(Date.parse(made.createdAt) + made.ttlMs, Date.parse(p.expires_at), "createdAt + ttlMs is not the proposal's expiry");
  return p;
}

// lastGet is the last tasks/get answer for id on the wire.
function lastGet(wire, id) {
  const got = wire.filter((x) => x.request.method === "tasks/get" && x.request.params.taskId === id).at(-1)?.response;
  assert.ok(got, `task ${id} was never polled`);
  assert.equal(got.error, undefined, JSON.stringify(got));
  assert.equal(got.result.resultType, "complete");
  return got.result;
}

// createdEntity is the entity a completed task's result names: the memory
// server's own answer.
function createdEntity(result) {
  assert.ok(!result.isError, JSON.stringify(result));
  return JSON.parse(result.content.find((c) => c.type === "text").text)[0].name;
}

test("Tasks: a gated call answers a task, its id the proposal's; tasks/get polls it to completed with the upstream's result, run once", async () => {
  const { client, session, wire, close } = await tasksClient();
  try {
    assert.equal(session.capabilities.execution, true, "the server's tasks extension was not seen");
    const name = "v2_2026_http_task";
    const execution = await call(session, createEntity(name));
    assert.equal(execution.kind, "task");
    const id = execution.handle.taskId;
    await createdTask(wire, id);
    assert.equal((await session.task(id).snapshot()).status, "working");
    // The SDK client's own custom request reaches tasks/get too: it
    // declares the extension in every request's _meta.
    const viaSDK = await client.request({ method: "tasks/get", params: { taskId: id } }, anyJSON);
    assert.deepEqual([viaSDK.taskId, viaSDK.status], [id, "working"]);
    await decide(id, "approve");
    const { outcome: settled, lastTask } = await execution.settle();
    assert.equal(lastTask?.status, "completed");
    const done = lastGet(wire, id);
    assert.equal(done.status, "completed");
    assert.equal(createdEntity(done.result), name);
    assert.equal((await proposal(id)).status, "succeeded");
    // The completed task's result is the call's CallToolResult, so a 2026-07-28
    // one (resultType "complete", as the Tasks extension's "The structure
    // matches the result type of the original request" makes it), and
    // ext-tasks settles the call with it.
    assert.equal(settled.status, "completed",
      `ext-tasks did not take the completed task's result (${settled.error?.message}): its result is ${JSON.stringify(done.result)}`);
    assert.equal(createdEntity(settled.result), name);
  } finally {
    await close();
  }
});

test("Tasks: rejected over the API, the task fails naming the reason; expired (a one-second rule), it fails expired; cancelled by its requester; -32021 undeclared", async () => {
  const { session, wire, close } = await tasksClient();
  try {
    const rejected = await call(session, createEntity("v2_2026_http_task_rejected"));
    const expired = await call(session, observe("v2_2026_http_task_expired"));
    const cancelled = await call(session, createEntity("v2_2026_http_task_cancelled"));
    for (const e of [rejected, expired, cancelled]) {
      assert.equal(e.kind, "task");
      await createdTask(wire, e.handle.taskId);
    }
    await decide(rejected.handle.taskId, "reject", { reason: "not this entity" });
    await cancelled.cancel();

    const r = (await rejected.settle()).outcome;
    assert.equal(r.status, "failed");
    assert.equal(r.error.code, -32031);
    assert.equal(r.error.data.reason, "rejected");
    assert.match(r.error.message, /not this entity/);
    const x = (await expired.settle()).outcome;
    assert.equal(x.status, "failed");
    assert.equal(x.error.data.reason, "expired");
    assert.equal((await cancelled.settle()).outcome.status, "cancelled");
    assert.deepEqual(
      await Promise.all([rejected, expired, cancelled].map(async (e) => (await proposal(e.handle.taskId)).status)),
      ["rejected", "expired", "cancelled"]);

    // A client that does not declare the extension is refused tasks/get
    // (-32021), even for its own task.
    const plain = new Client(clientInfo, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await plain.connect(new StreamableHTTPClientTransport(new URL(`${server}/mcp`), { requestInit: { headers: { Authorization: "Bearer key_alice" } } }));
    try {
      await assert.rejects(plain.request({ method: "tasks/get", params: { taskId: rejected.handle.taskId } }, anyJSON), { code: -32021 });
    } finally {
      await plain.close();
    }
  } finally {
    await close();
  }
});

test("Tasks are offered only where they are served: a legacy (2025) session and countersign mcp over stdio answer the call held, pending", async () => {
  const legacy = new Client(clientInfo, { capabilities });
  await legacy.connect(new StreamableHTTPClientTransport(new URL(`${server}/mcp`), { requestInit: { headers: { Authorization: "Bearer key_alice" } } }));
  const stdio = new Client(clientInfo, { capabilities, versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await stdio.connect(new StdioClientTransport({ command: bin, args: ["mcp", "--config", config, "--token", "key_alice"], stderr: "ignore", env: { ...process.env } }));
  try {
    // countersign mcp runs no worker, so it offers no tasks.
    assert.equal(stdio.getServerCapabilities()?.extensions?.[tasksExtension], undefined);
    for (const [client, name] of [[legacy, "v2_legacy_http_task"], [stdio, "v2_2026_stdio_task"]]) {
      const session = createTaskSessionFromClient(client, { endpointId: `countersign-e2e ${name}` });
      try {
        assert.equal(session.capabilities.execution, false, name);
        const execution = await call(session, createEntity(name));
        assert.equal(execution.kind, "immediate", name);
        const { outcome: o } = await execution.settle();
        assert.equal(o.status, "completed");
        const held = outcome(o.result);
        assert.equal(held.status, "pending", name);
        assert.equal((await proposal(held.proposal_id)).mode, "wait");
        await decide(held.proposal_id, "cancel");
      } finally {
        await session.close();
      }
    }
  } finally {
    await legacy.close();
    await stdio.close();
  }
});

// freePort is a port nothing listens on now.
async function freePort() {
  const srv = createServer().listen(0, "127.0.0.1");
  await once(srv, "listening");
  const { port } = srv.address();
  srv.close();
  await once(srv, "close");
  return port;
}

// serve starts countersign serve with the restart configuration on port
// and answers once /readyz says its upstreams are connected.
async function serve(port) {
  const proc = spawn(bin, ["serve", "--config", restartConfig, "--listen", `127.0.0.1:${port}`], { env: { ...process.env }, stdio: ["ignore", "pipe", "pipe"] });
  proc.logs = "";
  proc.stdout.on("data", (d) => { proc.logs += d; });
  proc.stderr.on("data", (d) => { proc.logs += d; });
  proc.exited = once(proc, "exit");
  const base = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 60_000; ;) {
    if (proc.exitCode !== null) throw new Error(`countersign serve exited (${proc.exitCode}):\n${proc.logs}`);
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) return proc;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`countersign serve was not ready in a minute:\n${proc.logs}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// stop ends the server as an operator does (SIGTERM) and waits until it
// exited.
async function stop(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill("SIGTERM");
  await proc.exited;
}

test("Tasks: a task is polled to completion across a server restart, by the same client, with the upstream's result", async () => {
  assert.ok(restartConfig, "COUNTERSIGN_RESTART_CONFIG must be set (the Go test sets it)");
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let proc = await serve(port);
  let tasks;
  try {
    tasks = await tasksClient(base);
    const { session, wire } = tasks;
    const name = "v2_task_restart";
    const execution = await call(session, createEntity(name));
    assert.equal(execution.kind, "task");
    const id = execution.handle.taskId;
    const reference = execution.serializeReference();
    assert.equal((await session.task(id).snapshot()).status, "working");
    // The client stops driving while the server is away, and keeps the
    // task's reference.
    await execution.detach();

    await stop(proc);
    assert.equal(proc.exitCode, 0, `countersign serve did not stop cleanly:\n${proc.logs}`);
    proc = await serve(port);

    // The server started again on the same store answers for the task.
    assert.equal((await session.task(id).snapshot()).status, "working");
    await decide(id, "approve", { base });
    const resumed = await session.resumeTask(reference);
    assert.equal(resumed.kind, "task");
    const { lastTask } = await resumed.settle();
    assert.equal(lastTask?.status, "completed");
    const done = lastGet(wire, id);
    assert.equal(done.status, "completed");
    assert.equal(createdEntity(done.result), name);
    assert.equal((await proposal(id, { base })).status, "succeeded");
  } catch (err) {
    err.message += `\ncountersign serve (the restarted one):\n${proc.logs}`;
    throw err;
  } finally {
    await tasks?.close();
    await stop(proc);
  }
});
