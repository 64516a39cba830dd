// gated inside a LangGraph graph against a real `countersign serve` with
// ../testdata/caller.yaml (caller-executed actions, a 2s lease): a scripted
// chat model (no network) calls the tools, LangGraph's MemorySaver keeps the
// checkpoints, ck_ts_bob decides. The Go test in this folder starts the
// server and sets COUNTERSIGN_CALLER_URL; without it these tests skip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { Command, END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import { Countersign } from "@countersign/client";
import { gated, type ApprovalRequest, type Execution } from "../dist/index.js";

const url = process.env.COUNTERSIGN_CALLER_URL;
const skip = url ? false : "COUNTERSIGN_CALLER_URL is not set (TestLangGraph in clients/typescript starts a server and sets it)";
const base = url ?? "http://127.0.0.1:1";
const run = Math.random().toString(36).slice(2, 8);
const alice = new Countersign({ baseUrl: base, token: "ck_ts_alice" });
const bob = new Countersign({ baseUrl: base, token: "ck_ts_bob" });

type ToolCall = { name: string; args: Record<string, unknown>; id: string };

/** A chat model that answers from a script: the tool calls first, then, once every one has its result, "done". */
class ScriptedChatModel extends BaseChatModel {
  calls = 0;
  constructor(private readonly toolCalls: ToolCall[]) {
    super({});
  }
  _llmType(): string {
    return "scripted";
  }
  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    this.calls++;
    const answered = messages.some((m) => ToolMessage.isInstance(m));
    const message = answered
      ? new AIMessage("done")
      : new AIMessage({ content: "", tool_calls: this.toolCalls.map((c) => ({ ...c, type: "tool_call" as const })) });
    return { generations: [{ text: typeof message.content === "string" ? message.content : "", message }] };
  }
}

/** The side effects, counted per customer or recipient: what ran, and under which operation ids. */
const ran = new Map<string, string[]>();
const refundTool = (ms = 0) =>
  tool(
    async ({ amount, customer }: { amount: number; customer: string }, config) => {
      const ex = (config?.configurable as { countersign?: Execution } | undefined)?.countersign;
      ran.set(customer, [...(ran.get(customer) ?? []), ex?.operation_id ?? "none"]);
      if (ms) await new Promise((r) => setTimeout(r, ms));
      return `refunded ${amount} to ${customer}`;
    },
    {
      name: "refund",
      description: "Refund a payment",
      schema: z.object({ amount: z.number(), customer: z.string() }),
    },
  );
const mailTool = () =>
  tool(
    async ({ to }: { to: string }) => {
      ran.set(to, [...(ran.get(to) ?? []), "mail"]);
      return { sent: to };
    },
    { name: "mail", description: "Send a mail", schema: z.object({ to: z.string() }) },
  );

function graph(toolCalls: ToolCall[], tools: ReturnType<typeof gated>[], checkpointer = new MemorySaver()) {
  const model = new ScriptedChatModel(toolCalls);
  const g = new StateGraph(MessagesAnnotation)
    .addNode("agent", async (state) => ({ messages: [await model.invoke(state.messages)] }))
    .addNode("tools", new ToolNode(tools))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", (state) => {
      const last = state.messages[state.messages.length - 1] as AIMessage;
      return last.tool_calls?.length ? "tools" : END;
    })
    .addEdge("tools", "agent")
    .compile({ checkpointer });
  return { g, model, checkpointer };
}

const refund = (ms = 0, client = alice) => gated(refundTool(ms), { client, action: "payments.refund", waitSeconds: 1 });

/** A client as alice that keeps the status of every call's answer. */
function recording(statuses: string[]): Countersign {
  return new Countersign({
    baseUrl: base,
    token: "ck_ts_alice",
    fetch: async (input, init) => {
      const res = await fetch(input, init);
      if (new URL(input).pathname === "/v1/calls") statuses.push(((await res.clone().json()) as { status: string }).status);
      return res;
    },
  });
}
const mail = () => gated(mailTool(), { client: alice, action: "mail.send", waitSeconds: 1 });

/** interrupted reads the approval request a run stopped at. */
async function interrupted(g: ReturnType<typeof graph>["g"], config: { configurable: { thread_id: string } }): Promise<ApprovalRequest> {
  const state = await g.getState(config);
  const value = state.tasks.flatMap((t) => t.interrupts).map((i) => i.value as ApprovalRequest)[0];
  assert.ok(value, `no interrupt: ${JSON.stringify(state.tasks)}`);
  return value;
}

function toolMessages(out: { messages: BaseMessage[] }): ToolMessage[] {
  return out.messages.filter((m): m is ToolMessage => ToolMessage.isInstance(m));
}

test("approve → interrupt with the proposal, resume → the tool ran once; resuming again does not run it", { skip }, async () => {
  const customer = `c_${run}_approve`;
  const thread = `lg_approve_${run}`;
  const config = { configurable: { thread_id: thread } };
  const { g } = graph([{ name: "refund", args: { amount: 12, customer }, id: "call_1" }], [refund()]);
  const first = await g.invoke({ messages: [{ role: "user", content: "refund" }] }, config);
  assert.ok("__interrupt__" in first, "the run stops at the approval");
  const req = await interrupted(g, config);
  assert.equal(req.type, "countersign.approval");
  assert.equal(req.action, "payments.refund");
  assert.equal(req.thread_id, thread);
  assert.equal(req.tool_call_id, "call_1");
  assert.deepEqual(req.input, { amount: 12, customer });
  assert.equal(req.proposal?.status, "pending");
  assert.equal(ran.get(customer), undefined, "nothing ran before the decision");

  assert.equal((await bob.approve(req.proposal_id)).status, "applied");
  const done = await g.invoke(new Command({ resume: "decided" }), config);
  const tm = toolMessages(done);
  assert.equal(tm.length, 1);
  assert.equal(tm[0]!.content, `refunded 12 to ${customer}`);
  assert.equal(done.messages[done.messages.length - 1]!.content, "done");
  const p = await alice.getProposal(req.proposal_id);
  assert.equal(p.status, "succeeded");
  assert.equal(ran.get(customer)?.length, 1);
  assert.deepEqual(ran.get(customer), [p.operation_id], "it ran with the operation id as its idempotency key");

  // The same tool call replayed from the first checkpoint (time travel): the recorded outcome, no second run.
  const history = [];
  for await (const s of g.getStateHistory(config)) history.push(s);
  const atTools = history.find((s) => s.next.includes("tools"));
  assert.ok(atTools, "a checkpoint before the tools node");
  const replay = await g.invoke(new Command({ resume: "again" }), atTools.config);
  assert.equal(toolMessages(replay)[0]!.content, `refunded 12 to ${customer}`);
  assert.equal(ran.get(customer)?.length, 1, "replaying the node did not run the tool again");
});

test("reject → the tool never runs, and the model hears it was not executed", { skip }, async () => {
  const customer = `c_${run}_reject`;
  const config = { configurable: { thread_id: `lg_reject_${run}` } };
  const { g } = graph([{ name: "refund", args: { amount: 7, customer }, id: "call_1" }], [refund()]);
  await g.invoke({ messages: [{ role: "user", content: "refund" }] }, config);
  const req = await interrupted(g, config);
  assert.equal((await bob.reject(req.proposal_id, { reason: "no" })).status, "applied");
  const done = await g.invoke(new Command({ resume: "decided" }), config);
  const tm = toolMessages(done);
  assert.equal(tm.length, 1);
  assert.equal(tm[0]!.status, "error");
  assert.match(String(tm[0]!.content), /rejected by bob \(no\); it was not executed/);
  assert.equal(ran.get(customer), undefined);
  // Resumed again: still never.
  await g.invoke(new Command({ resume: "again" }), config).catch(() => undefined);
  assert.equal(ran.get(customer), undefined);
  assert.equal((await alice.getProposal(req.proposal_id)).status, "rejected");
});

test("the node re-run by a resume: the allowed tool call beside the interrupted one runs once", { skip }, async () => {
  // One model turn, two tool calls in one ToolNode: mail.send is allowed and
  // runs at once; payments.refund interrupts the node. The resume runs the
  // whole node again, mail.send's call included (langgraph #7780).
  const customer = `c_${run}_rerun`;
  const to = `to_${run}_rerun@example.com`;
  const config = { configurable: { thread_id: `lg_rerun_${run}` } };
  const { g } = graph(
    [
      { name: "mail", args: { to }, id: "call_mail" },
      { name: "refund", args: { amount: 3, customer }, id: "call_refund" },
    ],
    [mail(), refund()],
  );
  await g.invoke({ messages: [{ role: "user", content: "both" }] }, config);
  const req = await interrupted(g, config);
  // mail ran once already (the node's first run)
  await waitFor(() => ran.get(to)?.length === 1);
  assert.equal((await bob.approve(req.proposal_id)).status, "applied");
  const done = await g.invoke(new Command({ resume: "decided" }), config);
  const tm = toolMessages(done);
  assert.deepEqual(tm.map((m) => m.tool_call_id).sort(), ["call_mail", "call_refund"]);
  assert.equal(tm.find((m) => m.tool_call_id === "call_mail")!.content, JSON.stringify({ sent: to }));
  assert.deepEqual(ran.get(to), ["mail"], "the re-run node did not send the mail again");
  assert.equal(ran.get(customer)?.length, 1);
});

test("two concurrent resumes of one thread: the tool runs once, both see its result", { skip }, async () => {
  const customer = `c_${run}_race`;
  const config = { configurable: { thread_id: `lg_race_${run}` } };
  const checkpointer = new MemorySaver();
  // The tool takes longer than the 2s lease: it runs under renewals, and the
  // second resume finds the proposal executing and waits for the outcome.
  const statuses: string[] = [];
  const a = graph([{ name: "refund", args: { amount: 9, customer }, id: "call_1" }], [refund(2500, recording(statuses))], checkpointer);
  const b = graph([{ name: "refund", args: { amount: 9, customer }, id: "call_1" }], [refund(2500, recording(statuses))], checkpointer);
  await a.g.invoke({ messages: [{ role: "user", content: "refund" }] }, config);
  const req = await interrupted(a.g, config);
  assert.equal((await bob.approve(req.proposal_id)).status, "applied");
  const [ra, rb] = await Promise.all([
    a.g.invoke(new Command({ resume: "a" }), config),
    b.g.invoke(new Command({ resume: "b" }), config),
  ]);
  for (const r of [ra, rb]) {
    assert.equal(toolMessages(r)[0]!.content, `refunded 9 to ${customer}`);
  }
  assert.equal(ran.get(customer)?.length, 1, `ran ${JSON.stringify(ran.get(customer))}`);
  // Both resumes asked: one got the lease, the other found it held and waited.
  assert.equal(statuses.filter((s) => s === "execute").length, 1, statuses.join(" "));
  assert.ok(statuses.includes("executing"), statuses.join(" "));
  const p = await alice.getProposal(req.proposal_id);
  assert.equal(p.status, "succeeded", "the renewed lease was never lost");
});

async function waitFor(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
  assert.ok(ok());
}
