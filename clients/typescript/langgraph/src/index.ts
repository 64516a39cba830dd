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
  OutcomeUnknown,
  gateError,
  runUnderLease,
  transient,
  type CallExecute,
  type CallResponse,
  type Countersign,
  type Proposal,
} from "@countersign/client";

// The claim and the errors are the client's (runUnderLease), re-exported.
export { Denied, Failed, GateError, LeaseLost, NotApplied, NotExecuted, OutcomeUnknown } from "@countersign/client";
export type { Execution } from "@countersign/client";

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
          if (!transient(e)) throw e;
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
            throw gateError(action, a);
        }
      }
    },
  });
}

/** run runs the tool once under the claim's lease; it reads the claim at config.configurable.countersign. */
function run(
  client: Countersign,
  tool: StructuredToolInterface,
  action: string,
  ex: CallExecute,
  config: (RunnableConfig & { toolCall?: unknown; toolCallId?: unknown }) | undefined,
): Promise<unknown> {
  const { toolCall: _tc, toolCallId: _tci, ...rest } = config ?? {};
  void _tc;
  void _tci;
  return runUnderLease(client, action, ex, async (execution) => {
    const child: RunnableConfig = { ...rest, configurable: { ...rest.configurable, countersign: execution } };
    const out = await tool.invoke(ex.input as never, child);
    return isBaseMessage(out) ? out.content : out;
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
