// gated inside the OpenAI Agents SDK against a real `countersign serve` with
// ../testdata/caller.yaml (caller-executed actions, a 2s lease): a scripted
// Model (no network) calls the tools, ck_ts_bob decides over HTTP (another
// channel than the run), and resumes run in this process or in child
// processes (child.ts) from RunState.toString(). The Go test in the parent
// folder starts the server and sets COUNTERSIGN_CALLER_URL; without it these
// tests skip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { RunState, type RunResult } from "@openai/agents";
import { Countersign } from "@countersign/client";
import { proposalId } from "../dist/index.js";
import { ScriptedModel, agent, mailTool, ran, recording, refundTool, runner } from "./fixture.js";

const url = process.env.COUNTERSIGN_CALLER_URL;
const skip = url ? false : "COUNTERSIGN_CALLER_URL is not set (TestOpenAIAgents in clients/typescript starts a server and sets it)";
const base = url ?? "http://127.0.0.1:1";
const run = Math.random().toString(36).slice(2, 8);
const alice = new Countersign({ baseUrl: base, token: "ck_ts_alice" });
const bob = new Countersign({ baseUrl: base, token: "ck_ts_bob" });

function refundAgent(customer: string, amount: number, client = alice, ms = 0) {
  const model = new ScriptedModel([{ name: "refund", args: { amount, customer }, callId: "call_1" }]);
  return { a: agent(model, [refundTool(client, ms)]), model };
}
const ranFor = (customer: string) => ran.filter((r) => r.customer === customer);

/** start runs the refund agent until it stops at the approval, and answers the interruption's proposal. */
async function start(customer: string, amount: number) {
  const { a, model } = refundAgent(customer, amount);
  const result = await runner().run(a, `refund ${amount} to ${customer}`, { context: { thread_id: `oa_${customer}` } });
  assert.equal(result.interruptions.length, 1, "the run stops at the approval");
  const item = result.interruptions[0]!;
  const id = proposalId(result, item);
  assert.ok(id, "the run context records the proposal id");
  return { result, item, id, a, model };
}

type Child = { final: string | null; interruptions: number; ran: typeof ran; statuses: string[]; tokens: string[]; state: string };
/** resumeElsewhere resumes a serialized state in a new process. */
function resumeElsewhere(state: string, customer: string, amount: number, ms = 0): Promise<Child> {
  const child = spawn(process.execPath, [fileURLToPath(new URL("./child.js", import.meta.url))], { stdio: ["pipe", "pipe", "inherit"] });
  child.stdin.end(JSON.stringify({ url: base, state, customer, amount, ms }));
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  return new Promise((resolve, reject) =>
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out) as Child) : reject(new Error(`child exited ${code}: ${out}`)))),
  );
}

function final(r: RunResult<unknown, never> | { finalOutput?: unknown }): string {
  return String(r.finalOutput ?? "");
}

test("approve in another channel → the resumed run executes the tool once; resuming the old state again does not", { skip }, async () => {
  const customer = `c_${run}_approve`;
  const { result, item, id } = await start(customer, 12);
  assert.equal(item.name, "refund");
  assert.equal((await alice.getProposal(id)).status, "pending");
  assert.equal(ranFor(customer).length, 0, "nothing ran before the decision");
  const serialized = result.state.toString();

  // Resumed before anyone decided: interrupted again, on the same proposal.
  const early = refundAgent(customer, 12).a;
  const again = await runner().run(early, await RunState.fromString(early, serialized));
  assert.equal(again.interruptions.length, 1);
  assert.equal(proposalId(again, again.interruptions[0]!), id);
  assert.equal(ranFor(customer).length, 0);

  assert.equal((await bob.approve(id)).status, "applied");
  const { a, model } = refundAgent(customer, 12);
  const done = await runner().run(a, await RunState.fromString(a, serialized)); // no state.approve: the proposal decides
  assert.equal(done.interruptions.length, 0);
  assert.equal(final(done), `done: refunded 12 to ${customer}`);
  assert.deepEqual(model.seen, [`refunded 12 to ${customer}`]);
  const p = await alice.getProposal(id);
  assert.equal(p.status, "succeeded");
  assert.deepEqual(
    ranFor(customer).map((r) => r.operation_id),
    [p.operation_id],
    "it ran once, with the operation id as its idempotency key",
  );

  // The state from before the decision, resumed once more: the recorded outcome.
  const replay = refundAgent(customer, 12);
  const r3 = await runner().run(replay.a, await RunState.fromString(replay.a, serialized));
  assert.equal(final(r3), `done: refunded 12 to ${customer}`);
  assert.equal(ranFor(customer).length, 1, "the replay did not run the tool again");
});

test("reject → the tool never runs, and the model hears it was rejected", { skip }, async () => {
  const customer = `c_${run}_reject`;
  const { result, id } = await start(customer, 7);
  assert.equal((await bob.reject(id, { reason: "no" })).status, "applied");
  const { a, model } = refundAgent(customer, 7);
  const done = await runner().run(a, await RunState.fromString(a, result.state.toString()));
  assert.equal(done.interruptions.length, 0);
  assert.deepEqual(model.seen, ["payments.refund: rejected by bob (no); it was not executed"]);
  assert.equal(ranFor(customer).length, 0);
  assert.equal((await alice.getProposal(id)).status, "rejected");
});

test("the SDK's approval is not Countersign's: approved in the SDK while pending → not run, withdrawn; approved in both → runs once", { skip }, async () => {
  const customer = `c_${run}_sdk`;
  const { result, item, id, a, model } = await start(customer, 5);
  result.state.approve(item);
  const done = await runner().run(a, result.state); // the same run, resumed in place
  assert.equal(ranFor(customer).length, 0, "an approval in the SDK alone runs nothing");
  assert.match(model.seen[0] ?? "", /not executed: the proposal .* was still pending in Countersign/);
  assert.equal((await alice.getProposal(id)).status, "cancelled", "withdrawn, so that no later approval runs it unseen");
  assert.equal(done.interruptions.length, 0);

  const customer2 = `c_${run}_both`;
  const s2 = await start(customer2, 6);
  assert.equal((await bob.approve(s2.id)).status, "applied");
  s2.result.state.approve(s2.item); // agreeing with Countersign: harmless
  const d2 = await runner().run(s2.a, s2.result.state);
  assert.equal(final(d2), `done: refunded 6 to ${customer2}`);
  assert.equal(ranFor(customer2).length, 1);
});

test("a serialized RunState resumed in another process runs the tool once; the state holds the proposal id and no secret", { skip }, async () => {
  const customer = `c_${run}_process`;
  const { result, id } = await start(customer, 8);
  const serialized = result.state.toString();
  assert.ok(serialized.includes(id), "the state carries the proposal id");
  assert.ok(!serialized.includes("ck_ts_"), "no API key in the state");
  assert.equal((await bob.approve(id)).status, "applied");

  const child = await resumeElsewhere(serialized, customer, 8);
  assert.equal(child.final, `done: refunded 8 to ${customer}`);
  assert.equal(child.interruptions, 0);
  const p = await alice.getProposal(id);
  assert.equal(p.status, "succeeded");
  assert.deepEqual(child.ran.map((r) => r.operation_id), [p.operation_id], "the child ran it once");
  assert.equal(ranFor(customer).length, 0, "this process did not run it");
  // The state after the execution: the proposal id, never the lease's token or a key.
  assert.equal(child.tokens.length, 1, child.statuses.join(" "));
  assert.ok(child.state.includes(id));
  for (const secret of [...child.tokens, "ck_ts_alice", "ck_ts_bob"]) {
    assert.ok(!child.state.includes(secret), `the state holds ${secret}`);
  }
  // And the pre-decision state resumed here afterwards: the recorded outcome.
  const { a } = refundAgent(customer, 8);
  const here = await runner().run(a, await RunState.fromString(a, serialized));
  assert.equal(final(here), `done: refunded 8 to ${customer}`);
  assert.equal(ranFor(customer).length, 0);
});

test("two processes resume the same serialized state at once: the tool runs once, both get its result", { skip }, async () => {
  const customer = `c_${run}_race`;
  const { result, id } = await start(customer, 9);
  const serialized = result.state.toString();
  assert.equal((await bob.approve(id)).status, "applied");
  // The function takes longer than the 2s lease: it runs under renewals, and
  // the other process finds the proposal executing and waits for the outcome.
  const [x, y] = await Promise.all([resumeElsewhere(serialized, customer, 9, 2500), resumeElsewhere(serialized, customer, 9, 2500)]);
  for (const c of [x, y]) assert.equal(c.final, `done: refunded 9 to ${customer}`);
  assert.equal(x.ran.length + y.ran.length, 1, `ran ${JSON.stringify([x.ran, y.ran])}`);
  const statuses = [...x.statuses, ...y.statuses];
  assert.equal(statuses.filter((s) => s === "execute").length, 1, statuses.join(" "));
  assert.ok(statuses.includes("executing"), statuses.join(" "));
  assert.equal((await alice.getProposal(id)).status, "succeeded", "the renewed lease was never lost");
});

test("two resumes of one state in one process at once: once", { skip }, async () => {
  const customer = `c_${run}_race1`;
  const { result, id } = await start(customer, 4);
  const serialized = result.state.toString();
  assert.equal((await bob.approve(id)).status, "applied");
  const statuses: string[] = [];
  const tokens: string[] = [];
  const one = refundAgent(customer, 4, recording(base, statuses, tokens), 2500);
  const two = refundAgent(customer, 4, recording(base, statuses, tokens), 2500);
  const [r1, r2] = await Promise.all([
    runner().run(one.a, await RunState.fromString(one.a, serialized)),
    runner().run(two.a, await RunState.fromString(two.a, serialized)),
  ]);
  for (const r of [r1, r2]) assert.equal(final(r), `done: refunded 4 to ${customer}`);
  assert.equal(ranFor(customer).length, 1);
  assert.equal(statuses.filter((s) => s === "execute").length, 1, statuses.join(" "));
});

test("allowed by the policy → no interruption, runs once", { skip }, async () => {
  const to = `to_${run}@example.com`;
  const model = new ScriptedModel([{ name: "mail", args: { to }, callId: "call_mail" }]);
  const a = agent(model, [mailTool(alice)]);
  const done = await runner().run(a, "mail", { context: { thread_id: `oa_mail_${run}` } });
  assert.equal(done.interruptions.length, 0);
  assert.equal(final(done), `done: ${JSON.stringify({ sent: to })}`);
  assert.equal(ranFor(to).length, 1);
});

test("one turn, an allowed call beside a pending one: the allowed one runs at once, the resume runs the other, each once", { skip }, async () => {
  const customer = `c_${run}_mixed`;
  const to = `to_${run}_mixed@example.com`;
  const calls = [
    { name: "mail", args: { to }, callId: "call_mail" },
    { name: "refund", args: { amount: 3, customer }, callId: "call_refund" },
  ];
  const build = () => {
    const model = new ScriptedModel(calls);
    return { a: agent(model, [mailTool(alice), refundTool(alice)]), model };
  };
  const first = build();
  const result = await runner().run(first.a, "both", { context: { thread_id: `oa_mixed_${run}` } });
  assert.deepEqual(result.interruptions.map((i) => i.name), ["refund"]);
  assert.equal(ranFor(to).length, 1, "the allowed mail ran in the first turn");
  const id = proposalId(result, result.interruptions[0]!);
  assert.ok(id);
  assert.equal((await bob.approve(id)).status, "applied");
  const serialized = result.state.toString();
  for (let i = 0; i < 2; i++) {
    const next = build();
    const done = await runner().run(next.a, await RunState.fromString(next.a, serialized));
    assert.deepEqual(next.model.seen, [JSON.stringify({ sent: to }), `refunded 3 to ${customer}`]);
    assert.equal(done.interruptions.length, 0);
  }
  assert.equal(ranFor(to).length, 1, "the mail never ran again");
  assert.equal(ranFor(customer).length, 1);
});

test("an approved call the SDK never executes (a tool input guardrail said no) is settled failed, not left to lapse", { skip }, async () => {
  const to = `to_${run}_guard@example.com`;
  const model = new ScriptedModel([{ name: "mail", args: { to }, callId: "call_guard" }]);
  const a = agent(model, [mailTool(alice, "reject")]);
  const context: { thread_id: string; countersign?: { proposals: Record<string, string> } } = { thread_id: `oa_guard_${run}` };
  const done = await runner().run(a, "mail", { context });
  assert.equal(done.interruptions.length, 0);
  assert.deepEqual(model.seen, ["no mail today"]);
  assert.equal(ranFor(to).length, 0);
  const id = context.countersign?.proposals["call_guard"];
  assert.ok(id, "the allowed call's record is in the context");
  // The claim's lease is 2s; it is settled at half of it, before it could lapse.
  const p = await alice.waitForProposal(id, { timeoutSeconds: 20 });
  assert.equal(p.status, "failed");
  assert.match(String(p.outcome?.error ?? ""), /did not execute/);
});

test("input the server's schema refuses → no interruption, nothing stored or run, the model hears why", { skip }, async () => {
  const customer = `c_${run}_invalid`;
  const { a, model } = refundAgent(customer, -1); // zod takes any number; the action wants amount > 0
  const done = await runner().run(a, "refund", { context: { thread_id: `oa_invalid_${run}` } });
  assert.equal(done.interruptions.length, 0);
  assert.match(model.seen[0] ?? "", /^payments\.refund: invalid input: /);
  assert.equal(ranFor(customer).length, 0);
  assert.equal((await alice.listThreadProposals(`oa_invalid_${run}`).catch(() => [])).length, 0);
});
