// The MCP TypeScript SDK's client (v1, @modelcontextprotocol/sdk, which
// speaks the 2025 revisions), and the MCP inspector's CLI, against the
// gateway of the server the Go test started (COUNTERSIGN_URL), with the
// reference memory and filesystem servers behind it; the filesystem server
// serves COUNTERSIGN_FS_DIR, which holds keep.txt ("original").
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile, access } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { forgeState, recordSent, sentCall } from "./support.mjs";

const server = process.env.COUNTERSIGN_URL;
const fsDir = process.env.COUNTERSIGN_FS_DIR;
if (!server || !fsDir) {
  throw new Error("COUNTERSIGN_URL and COUNTERSIGN_FS_DIR must be set (the Go test sets them)");
}

// connect opens an MCP session as key's identity. With answer, the client
// declares elicitation and answers each request with it, counting them in
// the returned client's asked; client.sent keeps what it sends.
async function connect(key, answer) {
  const client = new Client({ name: "countersign-e2e", version: "1.0.0" }, { capabilities: answer ? { elicitation: {} } : {} });
  client.asked = [];
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      client.asked.push(req.params);
      return answer(req.params);
    });
  }
  const transport = new StreamableHTTPClientTransport(new URL(`${server}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  client.sent = recordSent(transport);
  await client.connect(transport);
  client.sessionId = transport.sessionId;
  return client;
}

const approve = () => ({ action: "accept", content: { approve: true } });
const decline = () => ({ action: "decline" });

async function api(method, path, { key = "key_alice", body } = {}) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`${server}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

// entities are the names in the memory server's graph, read through the
// gateway (a read the policy allows).
async function entities(client) {
  const res = await client.callTool({ name: "memory__read_graph", arguments: {} });
  assert.ok(!res.isError, JSON.stringify(res));
  const graph = JSON.parse(res.content[0].text);
  return graph.entities.map((e) => e.name);
}

function createEntity(name) {
  return { name: "memory__create_entities", arguments: { entities: [{ name, entityType: "test", observations: ["made by the e2e test"] }] } };
}

// threadProposals are the proposals of the session's thread.
async function threadProposals(client, key = "key_alice") {
  const { status, body } = await api("GET", `/v1/threads/mcp_${client.sessionId}/proposals`, { key });
  assert.equal(status, 200, JSON.stringify(body));
  return body.proposals ?? body;
}

test("the upstreams' tools are re-exported as <server>__<tool>, the denied ones hidden", async () => {
  const client = await connect("key_alice");
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const name of ["memory__create_entities", "memory__read_graph", "fs__write_file", "fs__read_text_file", "fs__list_directory"]) {
      assert.ok(names.includes(name), `${name} is not listed: ${names}`);
    }
    assert.deepEqual(names.filter((n) => n.startsWith("memory__delete_")), [], "a denied tool is listed");
    assert.ok(names.every((n) => /^(memory|fs)__/.test(n)), `a tool outside the namespaces: ${names}`);
    const create = tools.find((t) => t.name === "memory__create_entities");
    assert.equal(create.inputSchema.type, "object");
    assert.ok(create.inputSchema.properties.entities, "the upstream's schema is not kept");
    assert.equal(create.outputSchema, undefined, "the upstream's outputSchema is passed on");
  } finally {
    await client.close();
  }
});

test("approved by elicitation: the entity exists, made once", async () => {
  const client = await connect("key_alice", approve);
  try {
    const res = await client.callTool(createEntity("e_approved"));
    assert.ok(!res.isError, JSON.stringify(res));
    assert.equal(client.asked.length, 1, "the client was not asked, or asked twice");
    assert.ok((await entities(client)).includes("e_approved"));
    const proposals = await threadProposals(client);
    assert.equal(proposals.length, 1);
    assert.equal(proposals[0].status, "succeeded");
    assert.equal(proposals[0].decisions[0].via, "mcp");
  } finally {
    await client.close();
  }
});

test("declined by elicitation: the graph is unchanged", async () => {
  const client = await connect("key_alice", decline);
  try {
    const res = await client.callTool(createEntity("e_rejected"));
    assert.equal(res.isError, true, JSON.stringify(res));
    assert.equal(res.structuredContent?.status, "rejected", JSON.stringify(res));
    assert.ok(!(await entities(client)).includes("e_rejected"));
  } finally {
    await client.close();
  }
});

test("without elicitation: the hold ends pending, an approval over the API, the same call again runs once", async () => {
  const client = await connect("key_alice");
  try {
    const first = await client.callTool(createEntity("e_hold"));
    assert.equal(first.isError, true, JSON.stringify(first));
    assert.equal(first.structuredContent?.status, "pending", JSON.stringify(first));
    const id = first.structuredContent.proposal_id;
    assert.match(id, /^prp_/);
    assert.ok(!(await entities(client)).includes("e_hold"), "it ran before anyone approved");
    const decided = await api("POST", `/v1/proposals/${id}/approve`, { body: { reason: "fine" } });
    assert.equal(decided.status, 200, JSON.stringify(decided.body));
    const again = await client.callTool(createEntity("e_hold"));
    assert.ok(!again.isError, JSON.stringify(again));
    assert.ok((await entities(client)).includes("e_hold"));
    const proposals = await threadProposals(client);
    assert.deepEqual(proposals.map((p) => [p.id, p.status]), [[id, "succeeded"]], "the repeat made a proposal of its own");
  } finally {
    await client.close();
  }
});

test("another tenant sees and decides nothing of alice's, and its own call is its own", async () => {
  const alice = await connect("key_alice");
  const eve = await connect("key_eve", decline);
  try {
    const held = await alice.callTool(createEntity("e_other_tenant"));
    const id = held.structuredContent?.proposal_id;
    assert.match(id, /^prp_/, JSON.stringify(held));
    for (const [method, path] of [["GET", `/v1/proposals/${id}`], ["POST", `/v1/proposals/${id}/approve`], ["POST", `/v1/proposals/${id}/reject`]]) {
      const res = await api(method, path, { key: "key_eve", body: method === "POST" ? {} : undefined });
      assert.ok(res.status === 403 || res.status === 404, `${method} ${path} as eve: ${res.status}`);
    }
    const thread = await api("GET", `/v1/threads/mcp_${alice.sessionId}/proposals`, { key: "key_eve" });
    assert.ok(thread.status === 403 || thread.status === 404, `eve read alice's thread: ${thread.status}`);
    // alice's session is alice's: eve's token on it is refused.
    const hijack = await fetch(`${server}/mcp`, {
      method: "POST",
      headers: { Authorization: "Bearer key_eve", "Mcp-Session-Id": alice.sessionId, "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    assert.ok(hijack.status === 403 || hijack.status === 404, `eve on alice's session: ${hijack.status}`);
    // eve's identical call is a proposal of eve's own, which alice's
    // pending one does not continue; eve declines it.
    const res = await eve.callTool(createEntity("e_other_tenant"));
    assert.equal(res.structuredContent?.status, "rejected", JSON.stringify(res));
    assert.notEqual(res.structuredContent?.proposal_id, id);
    const { status, body } = await api("GET", `/v1/proposals/${id}`);
    assert.equal(status, 200);
    assert.equal(body.status, "pending", "eve's session changed alice's proposal");
    assert.deepEqual(body.decisions, []);
    // Withdrawn, so that it never runs.
    assert.equal((await api("POST", `/v1/proposals/${id}/cancel`, { body: {} })).status, 200);
  } finally {
    await alice.close();
    await eve.close();
  }
});

test("the filesystem: a write approved exists, a write declined changes nothing, a read allowed by a glob runs at once", async () => {
  const yes = await connect("key_alice", approve);
  const no = await connect("key_alice", decline);
  try {
    const wrote = await yes.callTool({ name: "fs__write_file", arguments: { path: join(fsDir, "approved.txt"), content: "approved\n" } });
    assert.ok(!wrote.isError, JSON.stringify(wrote));
    assert.equal(await readFile(join(fsDir, "approved.txt"), "utf8"), "approved\n");
    const refused = await no.callTool({ name: "fs__write_file", arguments: { path: join(fsDir, "keep.txt"), content: "changed\n" } });
    assert.equal(refused.isError, true, JSON.stringify(refused));
    assert.equal(await readFile(join(fsDir, "keep.txt"), "utf8"), "original\n");
    const declinedNew = await no.callTool({ name: "fs__write_file", arguments: { path: join(fsDir, "never.txt"), content: "x" } });
    assert.equal(declinedNew.isError, true);
    await assert.rejects(access(join(fsDir, "never.txt")), "a declined write made the file");
    // A read: no question, no proposal.
    const before = yes.asked.length;
    const read = await yes.callTool({ name: "fs__read_text_file", arguments: { path: join(fsDir, "keep.txt") } });
    assert.ok(!read.isError, JSON.stringify(read));
    assert.match(read.content[0].text, /original/);
    assert.equal(yes.asked.length, before, "a read the policy allows asked the client");
    const proposals = await threadProposals(yes);
    assert.deepEqual(proposals.map((p) => p.action), ["fs__write_file"], "the read made a proposal");
  } finally {
    await yes.close();
    await no.close();
  }
});

test("a tool is a read only when the file says so: a server's readOnlyHint alone, or a schema its pin does not match, makes a write, held for a human", async () => {
  const client = await connect("key_alice");
  try {
    // memory annotates open_nodes readOnlyHint; the file does not list it.
    const open = await client.callTool({ name: "memory__open_nodes", arguments: { names: ["e_approved"] } });
    assert.equal(open.isError, true, JSON.stringify(open));
    assert.equal(open.structuredContent?.status, "pending", JSON.stringify(open));
    // The file pins get_file_info to a schema the server does not list.
    const info = await client.callTool({ name: "fs__get_file_info", arguments: { path: join(fsDir, "keep.txt") } });
    assert.equal(info.structuredContent?.status, "pending", JSON.stringify(info));
    // list_directory is listed, read_text_file listed with its schema's
    // pin: reads, run at once, storing nothing.
    const listed = await client.callTool({ name: "fs__list_directory", arguments: { path: fsDir } });
    assert.ok(!listed.isError, JSON.stringify(listed));
    assert.match(listed.content[0].text, /keep\.txt/);
    const read = await client.callTool({ name: "fs__read_text_file", arguments: { path: join(fsDir, "keep.txt") } });
    assert.ok(!read.isError, JSON.stringify(read));
    const proposals = await threadProposals(client);
    assert.deepEqual(proposals.map((p) => [p.action, p.status]).sort(),
      [["fs__get_file_info", "pending"], ["memory__open_nodes", "pending"]], "what was stored");
    // Withdrawn, so that they never run.
    for (const p of proposals) {
      assert.equal((await api("POST", `/v1/proposals/${p.id}/cancel`, { body: {} })).status, 200);
    }
  } finally {
    await client.close();
  }
});

// inspector runs the MCP inspector's CLI against the gateway over
// streamable HTTP and returns its JSON answer.
async function inspector(...args) {
  const bin = join(import.meta.dirname, "node_modules", ".bin", "mcp-inspector");
  const { stdout } = await promisify(execFile)(bin, [
    "--cli", `${server}/mcp`, "--transport", "http", ...args, "--header", "Authorization: Bearer key_alice",
  ], { timeout: 60_000 });
  return JSON.parse(stdout.slice(stdout.indexOf("{")));
}

test("the MCP inspector's CLI lists the tools, runs an allowed read at once, and a call without elicitation holds", async () => {
  const listed = await inspector("--method", "tools/list");
  const names = listed.tools.map((t) => t.name);
  assert.ok(names.includes("memory__create_entities") && names.includes("fs__read_text_file"), `${names}`);
  const read = await inspector("--method", "tools/call", "--tool-name", "memory__read_graph");
  assert.ok(!read.isError, JSON.stringify(read));
  const held = await inspector("--method", "tools/call", "--tool-name", "memory__create_entities",
    "--tool-arg", `entities=${JSON.stringify([{ name: "e_inspector", entityType: "test", observations: [] }])}`);
  assert.equal(held.isError, true, JSON.stringify(held));
  const id = held.structuredContent?.proposal_id;
  assert.match(id ?? "", /^prp_/, JSON.stringify(held));
  // Each inspector run is a session of its own, so nothing would call
  // this again: withdrawn, it never runs.
  assert.equal((await api("POST", `/v1/proposals/${id}/cancel`, { body: {} })).status, 200);
  const { body } = await api("GET", `/v1/proposals/${id}`);
  assert.equal(body.status, "cancelled", JSON.stringify(body));
});

// stdio starts countersign mcp as a desktop client does, as key's holder
// (with the environment, which holds the secret of the request states),
// and connects a client to it; answer is as connect's.
async function stdio(answer, key = "key_alice") {
  const client = new Client({ name: "desktop", version: "1.0.0" }, { capabilities: answer ? { elicitation: {} } : {} });
  client.asked = [];
  if (answer) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      client.asked.push(req.params);
      return answer(req.params);
    });
  }
  const transport = new StdioClientTransport({
    command: process.env.COUNTERSIGN_BIN,
    args: ["mcp", "--config", process.env.COUNTERSIGN_CONFIG, "--token", key],
    stderr: "ignore",
    env: { ...process.env },
  });
  client.sent = recordSent(transport);
  await client.connect(transport);
  return client;
}

test("countersign mcp serves the same tools over stdio, as the token's identity", async () => {
  const client = await stdio();
  try {
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "fs__read_text_file") && tools.some((t) => t.name === "memory__create_entities"));
    const res = await client.callTool({ name: "fs__read_text_file", arguments: { path: join(fsDir, "keep.txt") } });
    assert.ok(!res.isError, JSON.stringify(res));
    assert.match(res.content[0].text, /original/);
  } finally {
    await client.close();
  }
});

test("over stdio: approved by elicitation, made once; held without it, approved over the API, collected by the repeat, once", async () => {
  const asking = await stdio(approve);
  const plain = await stdio();
  try {
    const res = await asking.callTool(createEntity("e_stdio_approved"));
    assert.ok(!res.isError, JSON.stringify(res));
    assert.equal(asking.asked.length, 1, "the client was not asked, or asked twice");
    const first = await plain.callTool(createEntity("e_stdio_held"));
    assert.equal(first.structuredContent?.status, "pending", JSON.stringify(first));
    const id = first.structuredContent.proposal_id;
    assert.ok(!(await entities(plain)).includes("e_stdio_held"), "it ran before anyone approved");
    const decided = await api("POST", `/v1/proposals/${id}/approve`, { body: { reason: "fine" } });
    assert.equal(decided.status, 200, JSON.stringify(decided.body));
    const again = await plain.callTool(createEntity("e_stdio_held"));
    assert.ok(!again.isError, JSON.stringify(again));
    const names = await entities(plain);
    assert.ok(names.includes("e_stdio_approved") && names.includes("e_stdio_held"), `${names}`);
    const { body } = await api("GET", `/v1/proposals/${id}`);
    assert.equal(body.status, "succeeded", JSON.stringify(body));
  } finally {
    await asking.close();
    await plain.close();
  }
});

test("a requestState the gateway never issued decides nothing, over HTTP and over stdio: the call holds", async () => {
  const http = await connect("key_alice");
  const local = await stdio();
  try {
    for (const [client, name] of [[http, "e_forged_http"], [local, "e_forged_stdio"]]) {
      const held = await client.callTool(createEntity(name));
      const id = held.structuredContent?.proposal_id;
      assert.match(id ?? "", /^prp_/, JSON.stringify(held));
      const forged = forgeState((await api("GET", `/v1/proposals/${id}`)).body);
      const again = await client.callTool({ ...createEntity(name), inputResponses: { "countersign.approval": { action: "accept", content: { approve: true } } }, requestState: forged });
      assert.ok(sentCall(client.sent, forged), `${name}: the state was not sent`);
      assert.deepEqual([again.structuredContent?.proposal_id, again.structuredContent?.status], [id, "pending"], JSON.stringify(again));
      const { body } = await api("GET", `/v1/proposals/${id}`);
      assert.deepEqual([body.status, body.decisions], ["pending", []], `${name}: the forged state decided it`);
      assert.equal((await api("POST", `/v1/proposals/${id}/cancel`, { body: {} })).status, 200);
    }
  } finally {
    await http.close();
    await local.close();
  }
});
