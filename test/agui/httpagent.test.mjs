// @ag-ui/client's HttpAgent, unmodified, against POST /v1/agui of the
// server the Go test started (COUNTERSIGN_URL), with its refund backend at
// COUNTERSIGN_BACKEND_URL (GET /count?customer=… is how often it executed
// that customer's refund). Every event is checked twice: by the client
// itself (runAgent enforces the schemas and verifies the event order, and
// rejects when a stream breaks them) and against @ag-ui/core's
// EventSchemas as it came off the wire. Any "[ag-ui]" warning (an unknown
// property stripped, a stream transformed) is a failure too.
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

// The client's warnings, collected per test.
let warnings = [];
const warn = console.warn;
beforeEach(() => {
  warnings = [];
  console.warn = (...args) => warnings.push(args.map(String).join(" "));
});
afterEach(() => {
  console.warn = warn;
});

// agent is an HttpAgent on the thread as alice, its first message text,
// with a middleware (the client's own hook) recording in wire the events
// as they came off the wire, before the client's checks.
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

// run runs the agent and returns the events as the server sent them,
// each checked against EventSchemas; the client's own checks are
// runAgent's.
async function run(a, params) {
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
  assert.ok(wire.length >= 2, "a run has at least RUN_STARTED and RUN_FINISHED");
  assert.equal(wire[0].type, EventType.RUN_STARTED);
  assert.equal(wire[0].threadId, a.threadId);
  assert.equal(wire[0].runId, params.runId);
  const last = wire.at(-1);
  assert.equal(last.type, EventType.RUN_FINISHED, `the run ended with ${JSON.stringify(last)}`);
  assert.equal(last.threadId, a.threadId);
  assert.equal(last.runId, params.runId);
  return wire;
}

async function executions(customer) {
  const res = await fetch(`${backend}/count?customer=${customer}`);
  assert.equal(res.status, 200);
  return (await res.json()).executions;
}

// interrupted runs a refund to customer on a new thread and returns the
// agent, its interrupt and the call's toolCallId.
async function interrupted(threadId, customer) {
  const a = agent(threadId, `refund 40 EUR to ${customer}`);
  const events = await run(a, { runId: `${threadId}_r1` });
  const start = events.find((e) => e.type === EventType.TOOL_CALL_START);
  assert.ok(start, "no TOOL_CALL_START");
  assert.equal(start.toolCallName, "payments.refund");
  const outcome = events.at(-1).outcome;
  assert.equal(outcome?.type, "interrupt", `outcome ${JSON.stringify(outcome)}`);
  assert.equal(outcome.interrupts.length, 1);
  const [interrupt] = outcome.interrupts;
  assert.match(interrupt.id, /^prp_/);
  assert.equal(interrupt.toolCallId, start.toolCallId);
  assert.deepEqual(a.pendingInterrupts.map((i) => i.id), [interrupt.id], "the client does not hold the interrupt");
  assert.equal(events.some((e) => e.type === EventType.TOOL_CALL_RESULT), false, "a result before the decision");
  assert.equal(await executions(customer), 0);
  return { a, interrupt, toolCallId: start.toolCallId };
}

// resumed resumes the interrupt and checks the continuation: the result
// on the original call first, a successful end.
async function resumed(a, interrupt, toolCallId, entry) {
  const events = await run(a, { runId: `${a.threadId}_r2`, resume: [{ interruptId: interrupt.id, ...entry }] });
  assert.equal(events[1].type, EventType.TOOL_CALL_RESULT, `the continuation starts with ${JSON.stringify(events[1])}`);
  assert.equal(events[1].toolCallId, toolCallId);
  assert.equal(events.at(-1).outcome?.type ?? "success", "success");
  assert.deepEqual(a.pendingInterrupts, []);
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
  // The first front end resumes: the decision that stands is the "yes",
  // and its stream carries the continuation, which executed once.
  await resumed(a, interrupt, toolCallId, { status: "resolved", payload: { approved: true } });
  assert.equal(await executions("c_yes"), 1);
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
