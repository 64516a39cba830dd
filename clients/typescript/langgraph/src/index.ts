// @countersign/langgraph: a LangChain tool gated by Countersign inside a
// LangGraph graph. See README.md.
//
// gated(tool, options) returns a tool of the same name, description and
// schema whose every invocation is a Countersign call of a caller-executed
// action (execute: {by: caller}): thread = the graph's thread_id, tool call
// id = the model's. The call waits a bounded time for a decision; while a
// human decides it raises LangGraph's interrupt() with the proposal. On
// resume LangGraph runs the node again, and the same call (same thread,
// same tool call id) is made again: approved, its answer is the claim of a
// lease, and the wrapped tool runs under it once, renewed while it runs and
// settled after; any later repeat (a node re-run, a second resume of the
// same thread) answers the recorded outcome, or waits while another
// process holds the lease. The tool never runs twice.

import { isBaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import { DynamicStructuredTool, type StructuredToolInterface } from "@langchain/core/tools";
import { interrupt } from "@langchain/langgraph";
import {
  CountersignError,
  type CallExecute,
  type CallResponse,
  type Countersign,
  type Proposal,
} from "@countersign/client";

/** Options of gated. */
export interface GatedOptions {
  /** The client, as the agent (the proposals' requester). */
  client: Countersign;
  /** The Countersign action; default the tool's name. */
  action?: string;
  /** How long each call waits for a decision before interrupting, in seconds (0..60); default 10. */
  waitSeconds?: number;
  /** The longest wait for another holder of the lease, in seconds; default 120. */
  executingTimeoutSeconds?: number;
}

/** What interrupt() is raised with while a human decides. */
export interface ApprovalRequest {
  type: "countersign.approval";
  action: string;
  thread_id: string;
  tool_call_id: string;
  proposal_id: string;
  input: unknown;
  /** The proposal as it stood (its approvers, confirmation, deadline). */
  proposal: Proposal | null;
}

/** The claim the wrapped tool runs under, at config.configurable.countersign. */
export interface Execution {
  proposal_id: string;
  /** The idempotency key of this proposal's execution: the same on every attempt. */
  operation_id: string;
  attempt: number;
  /** Aborted once a renewal was refused: the lease is someone else's now. */
  signal: AbortSignal;
}

/** A gated call that did not come to a result; answer is the call's (or the settlement's) body. */
export class GateError extends Error {
  readonly status: string | undefined;
  constructor(
    message: string,
    readonly answer: { status?: string; proposal?: Proposal | null } & Record<string, unknown>,
  ) {
    super(message);
    this.name = new.target.name;
    this.status = answer.status;
  }
}
/** The policy, authorization or preflight said no. */
export class Denied extends GateError {}
/** A human rejected it, nobody decided in time, or it was replaced or withdrawn: it did not run. */
export class NotExecuted extends GateError {}
/** It ran and failed (the tool threw NotApplied), or a check before it failed. */
export class Failed extends GateError {}
/** Nobody knows whether it was applied (unknown, reconciling): do not retry automatically. */
export class OutcomeUnknown extends GateError {}
/** The tool ran, but the lease was lost before its outcome could be settled. */
export class LeaseLost extends GateError {}

/**
 * Throw NotApplied from the wrapped tool when the change certainly did not
 * happen: the call is settled failed. Any other error leaves the outcome
 * uncertain: nothing is settled and the lease lapses, for the server to
 * reconcile, release (idempotent actions) or record as unknown.
 */
export class NotApplied extends Error {
  constructor(message = "not applied") {
    super(message);
    this.name = "NotApplied";
  }
}

const TRANSIENT = new Set([408, 425, 429, 500, 502, 503, 504]);

/** gated wraps tool so that each invocation goes through Countersign (see the file's comment). */
export function gated<T extends StructuredToolInterface>(tool: T, options: GatedOptions): DynamicStructuredTool {
  const client = options.client;
  if (!client) throw new TypeError("gated: options.client is required");
  const action = options.action ?? tool.name;
  const waitSeconds = Math.min(60, Math.max(0, options.waitSeconds ?? 10));
  const executingTimeout = (options.executingTimeoutSeconds ?? 120) * 1000;

  return new DynamicStructuredTool({
    name: tool.name,
    description: tool.description,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    schema: tool.schema as any,
    func: async (input: unknown, _runManager, config?: RunnableConfig & { toolCall?: { id?: string } }) => {
      const thread = config?.configurable?.thread_id;
      const toolCallId = config?.toolCall?.id;
      if (typeof thread !== "string" || thread === "") {
        throw new TypeError(`gated ${action}: no thread_id in the config's configurable`);
      }
      if (typeof toolCallId !== "string" || toolCallId === "") {
        throw new TypeError(`gated ${action}: no tool call id: invoke it with the model's tool call (a ToolNode does)`);
      }
      const body = { thread_id: thread, tool_call_id: toolCallId, action, input, wait_seconds: waitSeconds };
      const executingSince = Date.now();
      let failures = 0;
      for (;;) {
        let ans: CallResponse;
        try {
          ans = await client.call(body);
        } catch (e) {
          if (e instanceof CountersignError && !TRANSIENT.has(e.status)) throw e;
          if (!(e instanceof CountersignError) && !(e instanceof TypeError)) throw e; // fetch's network errors are TypeErrors
          failures++;
          await sleep(Math.min(30_000, 250 * 2 ** failures));
          continue;
        }
        failures = 0;
        const a = ans as { status: string; proposal_id?: string; proposal?: Proposal | null; result?: unknown } & Record<string, unknown>;
        switch (a.status) {
          case "execute":
            return run(client, tool, action, ans as CallExecute, config);
          case "succeeded":
            return a.result;
          case "executing": {
            // Someone holds the lease (a concurrent resume, or this
            // process's earlier attempt): wait for it to settle or lapse.
            if (Date.now() - executingSince > executingTimeout) {
              throw new OutcomeUnknown(`${action}: still executing under another lease`, a);
            }
            await client.waitForProposal(a.proposal_id!, { timeoutSeconds: 2 }).catch(() => sleep(500));
            continue;
          }
          case "pending": {
            const request: ApprovalRequest = {
              type: "countersign.approval",
              action,
              thread_id: thread,
              tool_call_id: toolCallId,
              proposal_id: a.proposal_id!,
              input: (a.proposal as { input?: unknown } | null | undefined)?.input ?? input,
              proposal: a.proposal ?? null,
            };
            // The first time, this throws: the graph stops here until it is
            // resumed. On resume it returns, and the call is made again.
            interrupt(request);
            continue;
          }
          default:
            throw error(action, a);
        }
      }
    },
  });
}

async function run(
  client: Countersign,
  tool: StructuredToolInterface,
  action: string,
  ex: CallExecute,
  config: (RunnableConfig & { toolCall?: unknown; toolCallId?: unknown }) | undefined,
): Promise<unknown> {
  const id = ex.proposal_id;
  const token = ex.lease.token;
  const lost = new AbortController();
  // The lease's length on the server's clock: from the claim's stamp to its expiry.
  const claimed = Date.parse(ex.proposal.updated_at ?? "") || Date.now();
  const leaseMs = Math.max(1000, Date.parse(ex.lease.expires_at) - claimed);
  let until = Date.now() + leaseMs;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const schedule = (ms: number) => {
    timer = setTimeout(async () => {
      const asked = Date.now();
      try {
        const r = await client.renew(id, { lease_token: token });
        if (r.status !== "applied") {
          lost.abort(new LeaseLost(`${action}: the lease was lost`, r));
          return;
        }
        until = asked + leaseMs;
        if (!stopped) schedule(leaseMs / 3);
      } catch {
        if (!stopped) schedule(leaseMs / 10); // not a verdict: try again soon
      }
    }, ms);
  };
  schedule(leaseMs / 3);
  const stop = () => {
    stopped = true;
    clearTimeout(timer);
  };

  const execution: Execution = { proposal_id: id, operation_id: ex.operation_id, attempt: ex.lease.attempt, signal: lost.signal };
  const { toolCall: _tc, toolCallId: _tci, ...rest } = config ?? {};
  void _tc;
  void _tci;
  const child: RunnableConfig = { ...rest, configurable: { ...rest.configurable, countersign: execution } };
  let out: unknown;
  try {
    out = await tool.invoke(ex.input as never, child);
  } catch (e) {
    stop();
    if (e instanceof NotApplied) {
      const r = await settle(client, id, { lease_token: token, outcome: "failed", error: e.message }, () => Date.now() >= until);
      throw r.status === "applied" ? new Failed(`${action}: ${e.message}`, r) : new LeaseLost(`${action}: the lease was lost`, r);
    }
    throw e; // uncertain: the lease lapses
  }
  stop();
  const result = isBaseMessage(out) ? out.content : out;
  const r = await settle(
    client,
    id,
    { lease_token: token, outcome: "succeeded", result: JSON.parse(JSON.stringify(result ?? null)) },
    () => Date.now() >= until,
  );
  if (r.status !== "applied") throw new LeaseLost(`${action}: the lease was lost; the outcome was not recorded`, r);
  return (r.proposal.outcome as { result?: unknown } | undefined)?.result ?? result;
}

async function settle(
  client: Countersign,
  id: string,
  body: Parameters<Countersign["settle"]>[1],
  expired: () => boolean,
) {
  // The work is done: record it while the lease may still be held,
  // retrying failures that are not verdicts. The fence decides.
  for (let failures = 1; ; failures++) {
    try {
      return await client.settle(id, body);
    } catch (e) {
      const transient = e instanceof CountersignError ? TRANSIENT.has(e.status) : e instanceof TypeError;
      if (!transient || expired()) throw e;
      await sleep(Math.min(2000, 100 * 2 ** failures));
    }
  }
}

function error(action: string, a: { status: string } & Record<string, unknown>): GateError {
  switch (a.status) {
    case "denied":
      return new Denied(`${action}: denied: ${String(a.reason ?? "")}`, a);
    case "failed":
      return new Failed(`${action}: failed: ${String(a.error ?? "")}`, a);
    case "unknown":
    case "reconciling":
      return new OutcomeUnknown(`${action}: outcome ${a.status}`, a);
    case "rejected":
    case "expired":
    case "superseded":
    case "cancelled":
      return new NotExecuted(`${action}: ${a.status}; it was not executed`, a);
    default:
      return new GateError(`${action}: unexpected answer ${a.status}`, a);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
