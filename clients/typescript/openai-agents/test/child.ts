// A process that resumes a serialized RunState: a new Runner, a new agent,
// a new client, RunState.fromString. It reads {url, state, amount,
// customer, ms} on stdin and writes what happened as JSON on stdout.
import { RunState } from "@openai/agents";
import { ScriptedModel, agent, ran, recording, refundTool, runner } from "./fixture.js";

const chunks: Buffer[] = [];
for await (const c of process.stdin) chunks.push(c as Buffer);
const job = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
  url: string;
  state: string;
  amount: number;
  customer: string;
  ms?: number;
};
const statuses: string[] = [];
const tokens: string[] = [];
const model = new ScriptedModel([{ name: "refund", args: { amount: job.amount, customer: job.customer }, callId: "call_1" }]);
const a = agent(model, [refundTool(recording(job.url, statuses, tokens), job.ms ?? 0)]);
const state = await RunState.fromString(a, job.state);
const result = await runner().run(a, state);
process.stdout.write(
  JSON.stringify({
    final: result.finalOutput ?? null,
    interruptions: result.interruptions.length,
    ran,
    statuses,
    tokens,
    state: result.state.toString(),
  }),
);
