// @countersign/openai-agents: a function tool of the OpenAI Agents SDK
// gated by Countersign. See README.md.
//
// gated(definition, options) builds the tool that tool(definition) would,
// with its needsApproval and its execution going through a Countersign call
// of a caller-executed action (execute: {by: caller}): thread = the run's
// thread id (options.thread, or the run context's thread_id), tool call id =
// the model's callId, input = the arguments.
//
// needsApproval makes the call, waiting a bounded time for a decision. An
// approved call's answer is the claim of a lease: no interruption, and the
// execution that follows runs under it. A pending one interrupts the run
// (true), and the run context records the proposal id, nothing else. On
// resume the SDK asks needsApproval again, which repeats the identical call:
// the proposal's decision, made in any channel, is the answer. Execution
// repeats it too when it holds no claim: the function runs at most once,
// under the lease, renewed while it runs and settled after; any later
// repeat (a second resume of the same state, in this process or another)
// answers the recorded outcome, or waits while another holder runs it.
//
// The SDK's own approve/reject are not the authority: an approval in the
// SDK with the proposal still pending runs nothing (the proposal is
// withdrawn and the model hears so); a rejection in the SDK is a local veto
// that Countersign does not see.

import { tool, type FunctionTool, type RunContext, type RunToolApprovalItem, type ToolInputParameters, type ToolOptions } from "@openai/agents";
import {
  CountersignError,
  GateError,
  InvalidInput,
  NotExecuted,
  OutcomeUnknown,
  gateError,
  leaseMillis,
  runUnderLease,
  transient,
  type CallExecute,
  type CallResponse,
  type Countersign,
  type Execution,
  type Proposal,
} from "@countersign/client";

// The claim and the errors are the client's (runUnderLease), re-exported.
export { Denied, Failed, GateError, InvalidInput, LeaseLost, NotApplied, NotExecuted, OutcomeUnknown } from "@countersign/client";
export type { Execution } from "@countersign/client";

/** Options of gated. */
export interface GatedOptions<Context = unknown> {
  /** The client, as the agent (the proposals' requester). */
  client: Countersign;
  /** The Countersign action; default the tool's name. */
  action?: string;
  /**
   * The Countersign thread: a string, or read from the run context. Default:
   * the run context's `thread_id` (`run(agent, input, {context: {thread_id}})`).
   */
  thread?: string | ((runContext: RunContext<Context>) => string | undefined);
  /** How long each call waits for a decision before interrupting, in seconds (0..60); default 10. */
  waitSeconds?: number;
  /** The longest wait for another holder of the lease, in seconds; default 120. */
  executingTimeoutSeconds?: number;
}

/** The key of the run context's member where gated tools record proposal ids. */
export const CONTEXT_KEY = "countersign";

/** What a gated tool records in the run context (a plain object): `context.countersign`. */
export interface ContextRecord {
  /** The proposal of each gated tool call, by the model's call id. */
  proposals: Record<string, string>;
}

type Details = Parameters<FunctionTool["invoke"]>[2];
type WithExecution = NonNullable<Details> & { countersign?: Execution };

/** execution reads the claim a gated function runs under from its third argument (details). */
export function execution(details: unknown): Execution | undefined {
  return (details as WithExecution | undefined)?.countersign;
}

/**
 * proposalId answers the proposal an interruption of a gated tool waits for,
 * from the run context the tool recorded it in (a RunState, a RunResult's
 * state or a RunContext), or undefined.
 */
export function proposalId(from: object, item: RunToolApprovalItem): string | undefined {
  const f = from as { state?: { _context?: RunContext<unknown> }; _context?: RunContext<unknown> };
  const ctx = f.state?._context ?? f._context ?? (from as RunContext<unknown>);
  const raw = item.rawItem as { callId?: string };
  const rec = (ctx?.context as Record<string, unknown> | undefined)?.[CONTEXT_KEY] as ContextRecord | undefined;
  return raw.callId ? rec?.proposals?.[raw.callId] : undefined;
}

const GENERIC_ERROR = "An error occurred while running the tool. Please try again.";

/** Claims answered to needsApproval, for the execution that follows it: by run context, then call id. */
const claims = new WeakMap<object, Map<string, { ex: CallExecute; timer: ReturnType<typeof setTimeout> }>>();

/**
 * gated builds a function tool from the definition tool() takes, whose
 * approval and execution go through Countersign (see the file's comment).
 * The definition's execute runs at most once per tool call, with
 * `execution(details)` its claim; the definition may not have a
 * needsApproval of its own.
 */
export function gated<TParameters extends ToolInputParameters = undefined, Context = unknown, Result = string>(
  definition: ToolOptions<TParameters, Context>,
  options: GatedOptions<Context>,
): FunctionTool<Context, TParameters, Result> {
  const client = options?.client;
  if (!client) throw new TypeError("gated: options.client is required");
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const def = definition as any;
  if (def.needsApproval !== undefined) {
    throw new TypeError("gated: the definition has a needsApproval: Countersign's policy decides which calls need approval");
  }
  if (typeof def.execute !== "function") throw new TypeError("gated: the definition has no execute");
  const name: string | undefined = def.name ?? def.execute.name;
  const action = options.action ?? name;
  if (!action) throw new TypeError("gated: name the tool or pass options.action");
  const waitSeconds = Math.min(60, Math.max(0, options.waitSeconds ?? 10));
  const executingTimeout = (options.executingTimeoutSeconds ?? 120) * 1000;

  const threadOf = (runContext: RunContext<Context>): string => {
    const t =
      typeof options.thread === "function"
        ? options.thread(runContext)
        : (options.thread ?? (runContext?.context as { thread_id?: unknown } | undefined)?.thread_id);
    if (typeof t !== "string" || t === "") {
      throw new TypeError(`gated ${action}: no thread: pass options.thread or a context with thread_id`);
    }
    return t;
  };
  const request = (runContext: RunContext<Context>, callId: string | undefined, input: unknown) => {
    if (typeof callId !== "string" || callId === "") throw new TypeError(`gated ${action}: no tool call id`);
    return { thread_id: threadOf(runContext), tool_call_id: callId, action, input: plain(input), wait_seconds: waitSeconds };
  };

  const needsApproval = async (runContext: RunContext<Context>, input: unknown, callId?: string): Promise<boolean> => {
    const body = request(runContext, callId, input);
    let a: Answer;
    try {
      a = (await ask(client, body)) as Answer;
    } catch (e) {
      if (e instanceof CountersignError && e.code === "INVALID_INPUT") return false; // execution tells the model
      throw e;
    }
    if (a.proposal_id) record(runContext, body.tool_call_id, a.proposal_id);
    switch (a.status) {
      case "pending":
        return true; // the SDK interrupts; a resume asks again
      case "execute":
        stash(client, action, runContext, body.tool_call_id, a as unknown as CallExecute);
        return false;
      default:
        // decided, executing, settled, denied: execution repeats the call
        // and answers what it says (never runs a rejected one).
        return false;
    }
  };

  const execute = async (input: unknown, runContext: RunContext<Context>, details?: Details): Promise<unknown> => {
    const callId = details?.toolCall?.callId;
    const held = take(runContext, callId);
    if (held) return run(client, def.execute, action, held, input, runContext, details);
    const body = request(runContext, callId, input);
    const executingSince = Date.now();
    for (;;) {
      let a: Answer;
      try {
        a = (await ask(client, body)) as Answer;
      } catch (e) {
        if (e instanceof CountersignError && e.code === "INVALID_INPUT") {
          throw new InvalidInput(`${action}: invalid input: ${e.message}${e.details ? ` ${JSON.stringify(e.details)}` : ""}`, {
            status: "invalid_input",
            details: e.details,
          });
        }
        throw e;
      }
      if (a.proposal_id) record(runContext, body.tool_call_id, a.proposal_id);
      switch (a.status) {
        case "execute":
          return run(client, def.execute, action, a as unknown as CallExecute, input, runContext, details);
        case "succeeded":
          return a.result;
        case "executing": {
          // Someone holds the lease (a concurrent resume, here or in another
          // process): wait for it to settle or lapse.
          if (Date.now() - executingSince > executingTimeout) {
            throw new OutcomeUnknown(`${action}: still executing under another lease`, a);
          }
          await client.waitForProposal(a.proposal_id!, { timeoutSeconds: 2 }).catch(() => sleep(500));
          continue;
        }
        case "pending": {
          // Approved in the SDK (state.approve), not in Countersign: that is
          // no decision. Withdraw the proposal, so that no later approval
          // runs it behind the run's back; if it was decided meanwhile, the
          // next call says how.
          const pendingText = `${action}: not executed: the proposal ${a.proposal_id} was still pending in Countersign (an approval in the agent is not a Countersign decision)`;
          let c;
          try {
            c = await client.cancel(a.proposal_id!, { reason: "approved in the agent, not in Countersign" });
          } catch (e) {
            throw new NotExecuted(`${pendingText}; it could not be withdrawn: ${(e as Error).message}`, a);
          }
          if (c.status === "applied") {
            throw new NotExecuted(`${pendingText}; it has been withdrawn`, { ...a, status: "cancelled", proposal: c.proposal });
          }
          continue; // decided meanwhile: the next call says how
        }
        default:
          throw gateError(action, a);
      }
    }
  };

  return tool({
    ...def,
    needsApproval,
    execute,
    // A Countersign outcome is worth telling the model as it is (the SDK's
    // default says "please try again", which is wrong for a rejection or an
    // unknown outcome). With an output schema the definition decides.
    ...(def.errorFunction === undefined && def.outputSchema === undefined
      ? { errorFunction: (_ctx: unknown, e: unknown) => (e instanceof GateError ? e.message : GENERIC_ERROR) }
      : {}),
  }) as unknown as FunctionTool<Context, TParameters, Result>;
}

type Answer = { status: string; proposal_id?: string; proposal?: Proposal | null; result?: unknown } & Record<string, unknown>;

/** ask makes the call, retrying what is not an answer (the network, 5xx, 429). */
async function ask(client: Countersign, body: Parameters<Countersign["call"]>[0]): Promise<CallResponse> {
  for (let failures = 1; ; failures++) {
    try {
      return await client.call(body);
    } catch (e) {
      if (!transient(e) || failures >= 8) throw e;
      await sleep(Math.min(30_000, 250 * 2 ** failures));
    }
  }
}

function record(runContext: RunContext<unknown>, callId: string, id: string): void {
  const c = runContext?.context as Record<string, unknown> | undefined;
  if (!c || typeof c !== "object" || Array.isArray(c)) return; // the call id alone finds it again
  const rec = (c[CONTEXT_KEY] ??= { proposals: {} }) as ContextRecord;
  rec.proposals ??= {};
  rec.proposals[callId] = id;
}

function stash(client: Countersign, action: string, runContext: object, callId: string, ex: CallExecute): void {
  let m = claims.get(runContext);
  if (!m) claims.set(runContext, (m = new Map()));
  const before = m.get(callId);
  if (before) clearTimeout(before.timer);
  // The SDK executes an approved call right after asking: if it does not
  // (a guardrail tripped, the run was cancelled), the function certainly
  // did not run, and the claim is settled so, before the lease lapses into
  // an uncertain outcome.
  const timer = setTimeout(() => {
    if (m.get(callId)?.ex !== ex) return;
    m.delete(callId);
    void client
      .settle(ex.proposal_id, { lease_token: ex.lease.token, outcome: "failed", error: `${action}: the agent did not execute the approved call` })
      .catch(() => undefined);
  }, leaseMillis(ex) / 2);
  timer.unref?.();
  m.set(callId, { ex, timer });
}

function take(runContext: object, callId: string | undefined): CallExecute | undefined {
  const m = claims.get(runContext);
  const held = callId ? m?.get(callId) : undefined;
  if (!held) return undefined;
  clearTimeout(held.timer);
  m!.delete(callId!);
  return held.ex;
}

/** run runs the function once under the claim's lease, handing it the claim in its details (execution(details)). */
function run(
  client: Countersign,
  fn: (input: unknown, runContext: unknown, details?: unknown) => unknown,
  action: string,
  ex: CallExecute,
  input: unknown,
  runContext: unknown,
  details: Details,
): Promise<unknown> {
  // The SDK's parsed input: the call's input, as the identical call checked.
  return runUnderLease(client, action, ex, (claim) => fn(input, runContext, { ...(details ?? {}), countersign: claim } as WithExecution));
}

/** plain is value as JSON (what the server stores). */
function plain(value: unknown): unknown {
  return value === undefined ? null : JSON.parse(JSON.stringify(value));
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
