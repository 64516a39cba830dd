// The official TypeScript MCP SDK's client against countersign's MCP
// gateway, in front of the reference filesystem server
// (@modelcontextprotocol/server-filesystem), both at the versions
// package-lock.json pins. gateway_test.go serves countersign with the
// filesystem server as the upstream "fs" over DATA_DIR, and checks the
// files these tests leave.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const base = process.env.COUNTERSIGN_URL;
const data = process.env.DATA_DIR;
assert.ok(base && data, "COUNTERSIGN_URL and DATA_DIR are set by gateway_test.go");
const key = "key_alice";

// connect opens a session over streamable HTTP; answer, when given, makes
// the client support (form) elicitation and answers every request, which
// it records in asked.
async function connect(answer) {
  const asked = [];
  const client = new Client({ name: "countersign-mcp-test", version: "1.0.0" },
    answer ? { capabilities: { elicitation: { form: {} } } } : {});
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params);
      return answer(req.params);
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(base + "/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return { client, asked };
}

const textOf = (res) => res.content.filter((c) => c.type === "text").map((c) => c.text).join("");

test("the filesystem's tools are listed as fs__ actions; the denied one is not", async () => {
  const { client } = await connect();
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const want of ["fs__read_text_file", "fs__write_file", "fs__list_directory", "fs__edit_file"]) {
      assert.ok(names.includes(want), `${want} in ${names}`);
    }
    assert.ok(!names.includes("fs__move_file"), "the policy denies fs__move_file");
    assert.ok(names.every((n) => n.startsWith("fs__")), names.join(", "));
    const read = tools.find((t) => t.name === "fs__read_text_file");
    assert.equal(read.outputSchema, undefined, "the upstream's outputSchema is not re-exported");
    assert.equal(read.annotations.readOnlyHint, true);
    assert.equal(read.inputSchema.type, "object");
    assert.ok(read.inputSchema.properties.path, "the upstream's inputSchema");
  } finally {
    await client.close();
  }
});

test("a read the policy allows by a glob runs at once", async () => {
  const { client, asked } = await connect(() => ({ action: "accept", content: { approve: true } }));
  try {
    const res = await client.callTool({ name: "fs__read_text_file", arguments: { path: `${data}/hello.txt` } });
    assert.equal(res.isError ?? false, false, textOf(res));
    assert.equal(textOf(res), "hello from go");
    assert.equal(asked.length, 0, "an allowed read asks nobody");
  } finally {
    await client.close();
  }
});

test("a write approved in the client's elicitation runs once", async () => {
  const { client, asked } = await connect(() => ({ action: "accept", content: { approve: true, reason: "looks right" } }));
  try {
    const res = await client.callTool({ name: "fs__write_file", arguments: { path: `${data}/approved.txt`, content: "approved" } });
    assert.equal(res.isError ?? false, false, textOf(res));
    assert.equal(asked.length, 1);
    assert.match(asked[0].message, /fs__write_file/);
    assert.equal(asked[0].requestedSchema.properties.approve.type, "boolean");
  } finally {
    await client.close();
  }
});

test("a write declined in the client's elicitation never runs", async () => {
  const { client, asked } = await connect(() => ({ action: "decline" }));
  try {
    const res = await client.callTool({ name: "fs__write_file", arguments: { path: `${data}/declined.txt`, content: "no" } });
    assert.equal(res.isError, true);
    assert.equal(res.structuredContent.status, "rejected");
    assert.match(res.structuredContent.proposal_id, /^prp_/);
    assert.equal(asked.length, 1);
  } finally {
    await client.close();
  }
});

test("without elicitation a write is held, answered pending, approved over the API and run by the repeat", async () => {
  const { client } = await connect();
  try {
    const args = { path: `${data}/held.txt`, content: "held" };
    const res = await client.callTool({ name: "fs__write_file", arguments: args });
    assert.equal(res.isError, true);
    assert.equal(res.structuredContent.status, "pending");
    const id = res.structuredContent.proposal_id;
    assert.match(textOf(res), /same arguments/);
    const approve = await fetch(`${base}/v1/proposals/${id}/approve`, {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ reason: "approved in the test" }),
    });
    assert.equal(approve.status, 200);
    assert.equal((await approve.json()).status, "applied");
    const again = await client.callTool({ name: "fs__write_file", arguments: args });
    assert.equal(again.isError ?? false, false, textOf(again));
    const p = await (await fetch(`${base}/v1/proposals/${id}`, { headers: { Authorization: `Bearer ${key}` } })).json();
    assert.equal(p.status, "succeeded");
    assert.equal(p.action, "fs__write_file");
    assert.match(p.thread_id, /^mcp_/);
  } finally {
    await client.close();
  }
});

test("countersign mcp serves the same tools over stdio as the token's identity", async () => {
  const client = new Client({ name: "desktop", version: "1.0.0" });
  await client.connect(new StdioClientTransport({
    command: process.env.COUNTERSIGN_BIN,
    args: ["mcp", "--config", process.env.COUNTERSIGN_CONFIG, "--token", key],
    stderr: "ignore",
  }));
  try {
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "fs__read_text_file"));
    const res = await client.callTool({ name: "fs__read_text_file", arguments: { path: `${data}/hello.txt` } });
    assert.equal(textOf(res), "hello from go");
  } finally {
    await client.close();
  }
});
