// @ag-ui/client's HttpAgent, unmodified, against POST /v1/agui of the
// server the Go test started (COUNTERSIGN_URL), with its refund backend at
// COUNTERSIGN_BACKEND_URL (GET /count?customer=… is how often it executed
// that customer's refund); the same server's HTTP API decides proposals
// elsewhere and shows proposals and runs. Every event is checked twice,
// RUN_ERROR streams included: by the client itself (runAgent enforces the
// schemas and verifies the event order, and rejects when a stream breaks
// them) and against @ag-ui/core's EventSchemas as it came off the wire.
// Any "[ag-ui]" warning (an unknown property stripped, a stream
// transformed) is a failure too.
import { test, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { HttpAgent } from "@ag-ui/client";
import { EventType } from "@ag-ui/core";
import { EventSchemas } from "@ag-ui/core/schemas";
import { tap } from "rxjs";

const server = process.env.COUNTERSIGN_URL;
const backend = process.env.COUNTERSIGN_BACKEND_URL;
if (!server || !backend) {
  throw new Error("COUNTERSIGN_URL and COUNTERSIGN_BACKEND_URL must be set (the Go test sets them)");
}

// The client's warnings, collected per test and subtest.
let warnings = [];
const warn = console.warn;
beforeEach(() => {
  warnings = [];
  console.warn = (...args) => warnings.push(args.map(String).join(" "));
});
afterEach(() => {
  console.warn = warn;
});

// agent is an HttpAgent on the thread as alice (unless config's headers
// name another key), its first message text (none when text is
// undefined), with a middleware (the client's own hook) recording in wire
// the events as they came off the wire, before the client's checks.
function agent(threadId, text, config = {}) {
  const a = new HttpAgent({
    url: `${server}/v1/agui`,
    headers: { Authorization: "Bearer key_alice" },
    threadId,
    initialMessages: text === undefined ? [] : [{ id: `msg_${threadId}_${text}`, role: "user", content: text }],
    ...config,
  });
  a.wire = [];
  a.use((input, next) => next.run(input).pipe(tap((e) => a.wire.push(e))));
  return a;
}

// capture runs the agent and returns the events as the server sent them,
// each checked against EventSchemas, after the checks every stream gets:
// the client passed on what it received, did not warn, and the stream
// starts with a RUN_STARTED echoing the thread and run. The client's own
// checks are runAgent's.
async function capture(a, params) {
  const seen = [];
  a.wire = [];
  await a.runAgent(params, { onEvent: ({ event }) => void seen.push(event) });
  const wire = a.wire;
  for (const [i, e] of wire.entries()) {
    const r = EventSchemas.safeParse(e);
    assert.ok(r.success, `event ${i} (${e.type}) is not an AG-UI event: ${r.error?.message}\n${JSON.stringify(e)}`);
  }
  assert.deepEqual(seen.map((e) => e.type), wire.map((e) => e.type), "the client passed on other events than it received");
  assert.deepEqual(warnings, [], "the client warned about the stream");
  assert.ok(wire.length >= 2, "a run has at least RUN_STARTED and its end");
  assert.equal(wire[0].type, EventType.RUN_STARTED);
  assert.equal(wire[0].threadId, a.threadId);
  assert.equal(wire[0].runId, params.runId);
  return wire;
}

// run is capture for a run that ends with RUN_FINISHED.
async function run(a, params) {
  const wire = await capture(a, params);
  const last = wire.at(-1);
  assert.equal(last.type, EventType.RUN_FINISHED, `the run ended with ${JSON.stringify(last)}`);
  assert.equal(last.threadId, a.threadId);
  assert.equal(last.runId, params.runId);
  return wire;
}

// refused is capture for a run the server refuses once the stream is
// open: RUN_STARTED, then RUN_ERROR with code, and nothing else. runAgent
// resolves on a RUN_ERROR (it is an event, not a failure of the stream),
// and the client keeps the interrupts it held.
async function refused(a, params, code) {
  const held = a.pendingInterrupts.map((i) => i.id);
  const wire = await capture(a, params);
  assert.deepEqual(wire.map((e) => e.type), [EventType.RUN_STARTED, EventType.RUN_ERROR], JSON.stringify(wire));
  assert.equal(wire[1].code, code, `RUN_ERROR ${JSON.stringify(wire[1])}`);
  assert.ok(wire[1].message, "a RUN_ERROR says why");
  assert.deepEqual(a.pendingInterrupts.map((i) => i.id), held, "the client dropped or gained interrupts on a RUN_ERROR");
  return wire[1];
}

async function executions(customer) {
  const res = await fetch(`${backend}/count?customer=${customer}`);
  assert.equal(res.status, 200);
  return (await res.json()).executions;
}

// api calls the HTTP API as the key's actor and returns the status and the
// parsed body.
async function api(method, path, { key = "key_alice", body } = {}) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(`${server}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

async function proposal(id) {
  const { status, body } = await api("GET", `/v1/proposals/${id}`);
  assert.equal(status, 200, JSON.stringify(body));
  return body;
}

// until calls poll until it answers something truthy, and returns that.
// It sets no deadline: the Go test bounds the whole npm test, so a state
// that never comes fails there rather than as a timed assertion here.
async function until(poll) {
  for (;;) {
    const v = await poll();
    if (v) return v;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// runOf is the run a proposal was made in, as GET
// /v1/threads/{id}/runs/{run_id} shows it.
async function runOf(p) {
  const { status, body } = await api("GET", `/v1/threads/${p.thread_id}/runs/${p.run_id}`);
  assert.equal(status, 200, JSON.stringify(body));
  return body.run;
}

// sameToolCall checks the one tool-call identity (docs/agui.md): the
// proposal the interrupt names, fetched over the HTTP API, carries
// toolCallId as its tool_call_id; the thread's messages hold the call
// under that id, and once answered (answered true) its result too; and the
// client's own transcript holds the call, and its result, under it.
async function sameToolCall(a, interruptId, toolCallId, { answered = false } = {}) {
  const p = await proposal(interruptId);
  assert.equal(p.tool_call_id, toolCallId, "the proposal's tool_call_id is not the stream's toolCallId");
  const { status, body } = await api("GET", `/v1/threads/${p.thread_id}`);
  assert.equal(status, 200, JSON.stringify(body));
  const calls = body.messages.filter((m) => (m.tool_calls ?? []).some((c) => c.id === toolCallId));
  assert.equal(calls.length, 1, `the thread's messages hold the call ${toolCallId} ${calls.length} times: ${JSON.stringify(body.messages)}`);
  assert.equal(calls[0].role, "assistant");
  const results = body.messages.filter((m) => m.role === "tool" && m.tool_call_id === toolCallId);
  assert.equal(results.length, answered ? 1 : 0, `the thread's results for ${toolCallId}: ${JSON.stringify(results)}`);
  const mine = a.messages.filter((m) => (m.toolCalls ?? []).some((c) => c.id === toolCallId));
  assert.equal(mine.length, 1, `the client's transcript lacks the call ${toolCallId}: ${JSON.stringify(a.messages)}`);
  const myResults = a.messages.filter((m) => m.role === "tool" && m.toolCallId === toolCallId);
  assert.equal(myResults.length, answered ? 1 : 0, `the client's results for ${toolCallId}: ${JSON.stringify(myResults)}`);
  return p;
}

// interrupted runs text on a new thread, a refund of customer by action,
// and returns the agent, its interrupt and the call's toolCallId.
async function interrupted(threadId, customer, { action = "payments.refund", text = `refund 40 EUR to ${customer}` } = {}) {
  const a = agent(threadId, text);
  const events = await run(a, { runId: `${threadId}_r1` });
  const start = events.find((e) => e.type === EventType.TOOL_CALL_START);
  assert.ok(start, "no TOOL_CALL_START");
  assert.equal(start.toolCallName, action);
  // The model's own id (the scripted model mints call_ and 96 random
  // bits), on every event of the call.
  assert.match(start.toolCallId, /^call_[0-9a-f]{24}$/);
  for (const e of events.filter((e) => e.type.startsWith("TOOL_CALL_"))) {
    assert.equal(e.toolCallId, start.toolCallId, `${e.type} names another call`);
  }
  const outcome = events.at(-1).outcome;
  assert.equal(outcome?.type, "interrupt", `outcome ${JSON.stringify(outcome)}`);
  assert.equal(outcome.interrupts.length, 1);
  const [interrupt] = outcome.interrupts;
  assert.match(interrupt.id, /^prp_/);
  assert.equal(interrupt.toolCallId, start.toolCallId);
  assert.equal(interrupt.metadata?.proposal?.action, action);
  assert.equal(interrupt.metadata.proposal.tool_call_id, start.toolCallId);
  assert.equal(interrupt.metadata.proposal.status, "pending");
  assert.equal(Date.parse(interrupt.expiresAt), Date.parse(interrupt.metadata.proposal.expires_at));
  assert.deepEqual(a.pendingInterrupts.map((i) => i.id), [interrupt.id], "the client does not hold the interrupt");
  assert.equal(events.some((e) => e.type === EventType.TOOL_CALL_RESULT), false, "a result before the decision");
  assert.equal(await executions(customer), 0);
  await sameToolCall(a, interrupt.id, start.toolCallId);
  return { a, interrupt, toolCallId: start.toolCallId };
}

// resumed resumes the interrupt and checks the continuation: the result
// on the original call first, a successful end.
async function resumed(a, interrupt, toolCallId, entry, runId = `${a.threadId}_r2`) {
  const events = await run(a, { runId, resume: [{ interruptId: interrupt.id, ...entry }] });
  assert.equal(events[1].type, EventType.TOOL_CALL_RESULT, `the continuation starts with ${JSON.stringify(events[1])}`);
  assert.equal(events[1].toolCallId, toolCallId);
  assert.equal(events.at(-1).outcome?.type ?? "success", "success");
  assert.deepEqual(a.pendingInterrupts, []);
  await sameToolCall(a, interrupt.id, toolCallId, { answered: true });
  return events;
}

function text(events) {
  return events.filter((e) => e.type === EventType.TEXT_MESSAGE_CONTENT).map((e) => e.delta).join("");
}

test("an interrupt resumed approved executes once and the run finishes", async () => {
  const { a, interrupt, toolCallId } = await interrupted("th_approved", "c_approved");
  const events = await resumed(a, interrupt, toolCallId, { status: "resolved", payload: { approved: true } });
  assert.match(text(events), /^Done: /);
  assert.equal(await executions("c_approved"), 1);
});

test("an interrupt resumed rejected, or cancelled, executes nothing", async () => {
  for (const [threadId, customer, entry] of [
    ["th_rejected", "c_rejected", { status: "resolved", payload: { approved: false, reason: "not today" } }],
    ["th_cancelled", "c_cancelled", { status: "cancelled" }],
  ]) {
    const { a, interrupt, toolCallId } = await interrupted(threadId, customer);
    await resumed(a, interrupt, toolCallId, entry);
    assert.equal(await executions(customer), 0, customer);
  }
});

test("a text decision is a short run with the decision as a CUSTOM event", async () => {
  const { a, interrupt, toolCallId } = await interrupted("th_yes", "c_yes");
  // Another front end on the thread answers in text (this agent holds no
  // interrupt, so the client lets it run without a resume).
  const other = agent("th_yes", "yes");
  const events = await run(other, { runId: "th_yes_decision" });
  assert.deepEqual(
    events.map((e) => e.type),
    [EventType.RUN_STARTED, EventType.CUSTOM, EventType.TEXT_MESSAGE_START, EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END, EventType.RUN_FINISHED],
  );
  const custom = events[1];
  assert.equal(custom.name, "countersign.action-proposal-decision");
  assert.equal(custom.value.threadId, "th_yes");
  assert.equal(custom.value.proposalDecision?.status, "applied", JSON.stringify(custom.value));
  assert.equal(custom.value.proposalDecision.proposal.id, interrupt.id);
  assert.equal(custom.value.proposalDecision.proposal.tool_call_id, toolCallId);
  // The first front end resumes: the decision that stands is the "yes",
  // and its stream carries the continuation, which executed once.
  await resumed(a, interrupt, toolCallId, { status: "resolved", payload: { approved: true } });
  assert.equal(await executions("c_yes"), 1);
});

// The decided-elsewhere cases: the proposal is approved or rejected over
// the HTTP API while the client holds its interrupt; the client resumes
// with the same verdict or the opposite one, once the run went on after
// the API's decision, or at once. The decision that stands is the API's.
const decidedElsewhere = [];
for (const verdict of ["approve", "reject"]) {
  for (const when of ["went", "now"]) {
    for (const resume of ["same", "opp"]) decidedElsewhere.push({ verdict, when, resume });
  }
}

test("a proposal decided over the API meanwhile: the resume carries the decision that stands", async (t) => {
  for (const { verdict, when, resume } of decidedElsewhere) {
    const approved = verdict === "approve";
    const name = [
      approved ? "approved over the API" : "rejected over the API",
      resume === "same" ? "resumed the same way" : "resumed the other way",
      when === "went" ? "after the run went on" : "at once",
    ].join(", ");
    await t.test(name, async () => {
      const threadId = `th_api_${verdict}_${when}_${resume}`;
      const customer = `c_api_${verdict}_${when}_${resume}`;
      const { a, interrupt, toolCallId } = await interrupted(threadId, customer);
      const d = await api("POST", `/v1/proposals/${interrupt.id}/${verdict}`, { body: { reason: "decided in the API" } });
      assert.equal(d.status, 200, JSON.stringify(d.body));
      assert.equal(d.body.status, "applied");
      const p = interrupt.metadata.proposal;
      if (when === "went") {
        // The parked run resumed on the decision, without the client.
        await until(async () => (await runOf(p)).status === "finished");
        assert.equal(await executions(customer), approved ? 1 : 0);
      }
      const payload = { approved: resume === "same" ? approved : !approved, reason: "from the front end" };
      const events = await resumed(a, interrupt, toolCallId, { status: "resolved", payload });
      const result = JSON.parse(events[1].content);
      assert.equal(result.proposal_id, interrupt.id);
      assert.equal(result.status, approved ? "succeeded" : "rejected", events[1].content);
      assert.equal(result.executed, approved);
      assert.match(text(events), /^Done: /);
      const after = await proposal(interrupt.id);
      assert.equal(after.status, approved ? "succeeded" : "rejected");
      assert.deepEqual(
        after.decisions.map((x) => [x.actor, x.decision, x.via]),
        [["alice", approved ? "approved" : "rejected", "api"]],
        "the resume's verdict was recorded as well",
      );
      const r = await runOf(p);
      assert.equal(r.status, "finished");
      assert.deepEqual(r.proposal_ids, [interrupt.id]);
      assert.equal(await executions(customer), approved ? 1 : 0);
    });
  }
});

test("an expired interrupt: a resolved resume is RUN_ERROR INTERRUPT_EXPIRED, a cancelled one goes on", async () => {
  const { a, interrupt, toolCallId } = await interrupted("th_expired", "c_expired", {
    action: "payments.quickrefund",
    text: "quick refund 40 EUR to c_expired",
  });
  // The quick refund's rule has a two-second ttl: wait for its expiry.
  await until(async () => {
    const { status, body } = await api("GET", `/v1/proposals/${interrupt.id}?wait_seconds=10`);
    assert.equal(status, 200, JSON.stringify(body));
    return body.status === "expired";
  });
  const resolved = (approved) => ({ interruptId: interrupt.id, status: "resolved", payload: { approved } });
  // The client that holds the interrupt knows its expiresAt and refuses a
  // resolved resume itself, sending nothing.
  a.wire = [];
  await assert.rejects(a.runAgent({ runId: "th_expired_r2", resume: [resolved(true)] }), /expired at .* can no longer be answered/);
  assert.deepEqual(a.wire, [], "the client sent the resume of an expired interrupt");
  assert.deepEqual(warnings, []);
  // Another front end on the thread, which does not hold it, sends it:
  // the server refuses it, approval or rejection.
  const other = agent("th_expired");
  await refused(other, { runId: "th_expired_r3", resume: [resolved(true)] }, "INTERRUPT_EXPIRED");
  await refused(other, { runId: "th_expired_r4", resume: [resolved(false)] }, "INTERRUPT_EXPIRED");
  // A cancelled resume is taken: the continuation says it expired.
  const events = await resumed(a, interrupt, toolCallId, { status: "cancelled" }, "th_expired_r5");
  const result = JSON.parse(events[1].content);
  assert.equal(result.status, "expired", events[1].content);
  assert.equal(result.executed, false);
  const after = await proposal(interrupt.id);
  assert.equal(after.status, "expired");
  assert.deepEqual(after.decisions, []);
  assert.equal(await executions("c_expired"), 0);
});

test("a resume by an owner who may not decide, or by another actor, is RUN_ERROR FORBIDDEN and decides nothing", async () => {
  const { a, interrupt } = await interrupted("th_finance", "c_finance", {
    action: "payments.bigrefund",
    text: "big refund 40 EUR to c_finance",
  });
  assert.deepEqual(interrupt.metadata.proposal.approvers, ["role:finance"]);
  // alice owns the thread but is not in finance: no verdict of hers is
  // taken, a cancellation (a rejection) neither.
  for (const [i, entry] of [
    { status: "resolved", payload: { approved: true } },
    { status: "resolved", payload: { approved: false, reason: "not mine to decide" } },
    { status: "cancelled" },
  ].entries()) {
    await refused(a, { runId: `th_finance_r${i + 2}`, resume: [{ interruptId: interrupt.id, ...entry }] }, "FORBIDDEN");
  }
  // bob is in finance and may decide the proposal, but the thread is
  // alice's: only its owner runs on it, resumes included.
  const bob = agent("th_finance", undefined, { headers: { Authorization: "Bearer key_bob" } });
  const resume = [{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }];
  await refused(bob, { runId: "th_finance_bob", resume }, "FORBIDDEN");
  const after = await proposal(interrupt.id);
  assert.equal(after.status, "pending");
  assert.deepEqual(after.decisions, []);
  const r = await runOf(after);
  assert.equal(r.status, "parked");
  assert.deepEqual(r.proposal_ids, [interrupt.id]);
  assert.equal(await executions("c_finance"), 0);
});

test("a resume with a bad payload, or of an interrupt not the thread's, is RUN_ERROR INVALID_RESUME and decides nothing", async () => {
  const { a, interrupt, toolCallId } = await interrupted("th_invalid", "c_invalid");
  const elsewhere = (await interrupted("th_invalid_other", "c_invalid_other")).interrupt;
  const bad = {
    "no payload": {},
    "a null payload": { payload: null },
    "a payload that is not an object": { payload: true },
    "no approved": { payload: { reason: "ok" } },
    "approved not a boolean": { payload: { approved: "yes" } },
    "a remember scope that does not exist": { payload: { approved: true, remember: "forever" } },
    "a field outside the responseSchema": { payload: { approved: true, tip: 5 } },
  };
  for (const [i, [name, entry]] of Object.entries(bad).entries()) {
    const resume = [{ interruptId: interrupt.id, status: "resolved", ...entry }];
    const e = await refused(a, { runId: `th_invalid_bad${i}`, resume }, "INVALID_RESUME");
    assert.match(e.message, /payload/, name);
  }
  // Another front end on the thread (it holds no interrupt, so the
  // client sends what it is given) resumes an interrupt that does not
  // exist, and one of another thread of alice's.
  const other = agent("th_invalid");
  for (const [i, id] of ["prp_00000000000000000000000000000000", elsewhere.id].entries()) {
    const resume = [{ interruptId: id, status: "resolved", payload: { approved: true } }];
    const e = await refused(other, { runId: `th_invalid_foreign${i}`, resume }, "INVALID_RESUME");
    assert.match(e.message, /not one of this thread's/);
  }
  for (const id of [interrupt.id, elsewhere.id]) {
    const p = await proposal(id);
    assert.equal(p.status, "pending", id);
    assert.deepEqual(p.decisions, [], id);
  }
  assert.equal(await executions("c_invalid"), 0);
  // The interrupt still takes a good resume.
  await resumed(a, interrupt, toolCallId, { status: "resolved", payload: { approved: true } }, "th_invalid_good");
  assert.equal(await executions("c_invalid"), 1);
  assert.equal(await executions("c_invalid_other"), 0);
});

test("a client tool: its call ends the run pending, and its result starts the next run", async () => {
  const tools = [{
    name: "get_weather",
    description: "The weather in a city, from the browser.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  }];
  const a = agent("th_client_tool", "weather in Lisbon");
  const first = await run(a, { runId: "th_client_tool_r1", tools });
  const start = first.find((e) => e.type === EventType.TOOL_CALL_START);
  assert.ok(start, "no TOOL_CALL_START");
  assert.equal(start.toolCallName, "get_weather");
  const args = first.filter((e) => e.type === EventType.TOOL_CALL_ARGS && e.toolCallId === start.toolCallId).map((e) => e.delta).join("");
  assert.deepEqual(JSON.parse(args), { city: "Lisbon" });
  assert.equal(first.some((e) => e.type === EventType.TOOL_CALL_RESULT), false, "the server made the client's call");
  assert.deepEqual(first.at(-1).outcome, { type: "success", pendingToolCallIds: [start.toolCallId] });
  // The client holds the assistant's call in its history, and runs it.
  const call = a.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === start.toolCallId);
  assert.ok(call, `the client's history lacks the call: ${JSON.stringify(a.messages)}`);
  a.addMessage({ id: "msg_th_client_tool_result", role: "tool", toolCallId: start.toolCallId, content: "sunny, 21 °C" });
  const second = await run(a, { runId: "th_client_tool_r2", tools });
  assert.equal(text(second), "Done: sunny, 21 °C");
  assert.deepEqual(second.at(-1).outcome ?? { type: "success" }, { type: "success" });
  // The thread holds the result, as alice's.
  const thread = await api("GET", "/v1/threads/th_client_tool");
  assert.equal(thread.status, 200);
  const stored = thread.body.messages.find((m) => m.id === "msg_th_client_tool_result");
  assert.ok(stored, `the thread lacks the result: ${JSON.stringify(thread.body.messages)}`);
  // Sending the same history again brings nothing new.
  await refused(a, { runId: "th_client_tool_r3", tools }, "INVALID_INPUT");
});

// sse is a fetch answering with the given events as an SSE stream.
function sse(events) {
  return async () =>
    new Response(events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join(""), {
      status: 200,
      headers: { "Content-Type": "text/event-stream" },
    });
}

test("a stream breaking AG-UI's rules makes runAgent throw (the client's checks are on)", async () => {
  const started = { type: EventType.RUN_STARTED, threadId: "th_bad", runId: "r_bad" };
  const finished = { type: EventType.RUN_FINISHED, threadId: "th_bad", runId: "r_bad" };
  const cases = {
    "content of a message never started": [
      [started, { type: EventType.TEXT_MESSAGE_CONTENT, messageId: "m1", delta: "hi" }, finished],
      /No active text message found with ID 'm1'/,
    ],
    "an event after RUN_FINISHED": [
      [started, finished, { type: EventType.TEXT_MESSAGE_START, messageId: "m2", role: "assistant" }],
      /The run has already finished/,
    ],
    "RUN_FINISHED without its threadId": [[started, { type: EventType.RUN_FINISHED, runId: "r_bad" }], /threadId/],
    "no RUN_STARTED": [[{ type: EventType.TEXT_MESSAGE_START, messageId: "m3", role: "assistant" }, finished], /First event must be 'RUN_STARTED'/],
  };
  const error = console.error;
  console.error = () => {}; // runAgent logs the failure it rethrows
  try {
    for (const [name, [events, reason]] of Object.entries(cases)) {
      const a = agent("th_bad", "hello", { fetch: sse(events) });
      await assert.rejects(a.runAgent({ runId: "r_bad" }), reason, name);
    }
    // The same client accepts a well-formed stream, so the rejections
    // are the stream's.
    const a = agent("th_bad", "hello", { fetch: sse([started, finished]) });
    await a.runAgent({ runId: "r_bad" });
  } finally {
    console.error = error;
  }
});
