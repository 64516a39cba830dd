// What the node tests share: the server the Go test started
// (COUNTERSIGN_URL), its HTTP API, the gateway's thread and state formats
// (docs/mcp.md), and reading a proposal's outcome.
import assert from "node:assert/strict";
import { createHash, createHmac, randomBytes } from "node:crypto";

export const server = process.env.COUNTERSIGN_URL;
export const fsDir = process.env.COUNTERSIGN_FS_DIR;
if (!server || !fsDir) {
  throw new Error("COUNTERSIGN_URL and COUNTERSIGN_FS_DIR must be set (the Go test sets them)");
}

// The countersign binary, its configuration, and the configuration of the
// server the Tasks test restarts; the environment, which holds the secret of
// the request states, is passed on to every process the tests start.
export const bin = process.env.COUNTERSIGN_BIN;
export const config = process.env.COUNTERSIGN_CONFIG;
export const restartConfig = process.env.COUNTERSIGN_RESTART_CONFIG;

// api calls the HTTP API of base as key's holder; it answers the status and
// the JSON body.
export async function api(method, path, { key = "key_alice", body, base = server } = {}) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

// proposal reads a proposal over the API.
export async function proposal(id, { key = "key_alice", base = server } = {}) {
  const { status, body } = await api("GET", `/v1/proposals/${id}`, { key, base });
  assert.equal(status, 200, `GET /v1/proposals/${id}: ${JSON.stringify(body)}`);
  return body;
}

// decide approves or rejects a proposal over the API, as the caller's own
// approver (the policy's default), or withdraws it (cancel).
export async function decide(id, verdict, { key = "key_alice", base = server, reason = "decided by the e2e test" } = {}) {
  const { status, body } = await api("POST", `/v1/proposals/${id}/${verdict}`, { key, base, body: { reason } });
  assert.equal(status, 200, `${verdict} ${id}: ${JSON.stringify(body)}`);
  return body;
}

// proposalsOf are the caller's proposals of memory__create_entities that
// create the entity name, newest first, whatever thread they are in.
export async function proposalsOf(name, { key = "key_alice" } = {}) {
  const { status, body } = await api("GET", "/v1/proposals?action=memory__create_entities&limit=1000", { key });
  assert.equal(status, 200, JSON.stringify(body));
  return body.proposals.filter((p) => p.input?.entities?.some((e) => e.name === name));
}

// createEntity is the memory server's call that creates the entity name: a
// write, asked of its requester.
export function createEntity(name) {
  return { name: "memory__create_entities", arguments: { entities: [{ name, entityType: "test", observations: ["made by the e2e test"] }] } };
}

// observe is a call of memory__add_observations, a write whose proposals
// the configuration lets expire a second after they are made.
export function observe(name) {
  return { name: "memory__add_observations", arguments: { observations: [{ entityName: name, contents: ["never stored"] }] } };
}

// outcome reads the Countersign answer of a call that did not run:
// {proposal_id, status}.
export function outcome(res) {
  assert.equal(res.isError, true, `not an error result: ${JSON.stringify(res)}`);
  assert.match(res.structuredContent?.proposal_id ?? "", /^prp_/, JSON.stringify(res));
  return res.structuredContent;
}

// createdName is the entity name the memory server's create_entities
// result names: what the upstream itself answered.
export function createdName(res) {
  assert.ok(!res.isError, JSON.stringify(res));
  const text = res.content?.find((c) => c.type === "text")?.text;
  const created = JSON.parse(text);
  assert.equal(created.length, 1, text);
  return created[0].name;
}

// fingerprint is a key's credential fingerprint: the first 16 hex digits
// of the SHA-256 of the API key. Its 2026-07-28 calls belong to the thread
// mcp:<fingerprint>.
export function fingerprint(key) {
  return createHash("sha256").update(key).digest("hex").slice(0, 16);
}

// forgeState makes what a forger would present as the requestState of the
// gateway's approval form for p: the gateway's format, every field right
// for alice's key and the proposal (a fresh nonce, the proposal's
// deadline), signed with a secret that is not the gateway's.
export function forgeState(p, { key = "key_alice" } = {}) {
  const payload = Buffer.from(JSON.stringify({
    tn: p.tenant, ac: p.requester, kd: p.requester_kind ?? "human", cf: fingerprint(key), pr: p.id, tl: p.action,
    dg: p.input_digest, nc: randomBytes(16).toString("hex"), dl: Date.parse(p.expires_at),
  })).toString("base64url");
  const mac = createHmac("sha256", "a secret of the forger's, not the gateway's").update("countersign/mcp-request-state/v1\0").update(payload).digest("base64url");
  return `v1.${payload}.${mac}`;
}

// The approval form's answers, as the gateway's input request asks them.
export const approval = "countersign.approval";
export const accept = { action: "accept", content: { approve: true } };
export const decline = { action: "decline" };
export const dismiss = { action: "cancel" };

// recordSent makes transport keep, in the returned list, every message its
// client sends, so that a test can see what went on the wire.
export function recordSent(transport) {
  const sent = [];
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    sent.push(structuredClone(message));
    return send(message, options);
  };
  return sent;
}

// sentCall is the tools/call the client sent with requestState state.
export function sentCall(sent, state) {
  return sent.find((m) => m.method === "tools/call" && m.params?.requestState === state);
}
