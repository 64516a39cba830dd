// What the tests and their child process (child.ts) share: a scripted Model
// (no network), the gated refund tool and the agent, built the same way in
// every process so that RunState.fromString finds them.
import { Agent, Runner, ToolGuardrailFunctionOutputFactory, Usage, defineToolInputGuardrail, type FunctionTool, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { z } from "zod";
import { Countersign } from "@countersign/client";
import { execution, gated } from "../dist/index.js";

export type ToolCall = { name: string; args: Record<string, unknown>; callId: string };

/** A Model that answers from a script: the tool calls first, then, once every one has its output, "done: " and the outputs. */
export class ScriptedModel implements Model {
  calls = 0;
  /** The tool outputs the model was given, in its last turn. */
  seen: string[] = [];
  constructor(private readonly toolCalls: ToolCall[]) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.calls++;
    const items = typeof request.input === "string" ? [] : request.input;
    const outputs = items.filter((i) => i.type === "function_call_result") as { callId: string; output: unknown }[];
    if (outputs.length >= this.toolCalls.length) {
      this.seen = outputs.map((o) => text(o.output));
      return {
        usage: new Usage(),
        output: [
          {
            type: "message",
            role: "assistant",
            status: "completed",
            content: [{ type: "output_text", text: `done: ${this.seen.join(" | ")}` }],
          },
        ],
      };
    }
    return {
      usage: new Usage(),
      output: this.toolCalls.map((c) => ({
        type: "function_call" as const,
        callId: c.callId,
        name: c.name,
        arguments: JSON.stringify(c.args),
        status: "completed" as const,
      })),
    };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("ScriptedModel does not stream");
  }
}

function text(output: unknown): string {
  if (typeof output === "string") return output;
  const o = output as { type?: string; text?: string } | undefined;
  return o?.type === "text" && typeof o.text === "string" ? o.text : JSON.stringify(output);
}

/** A client as alice that keeps the status of every call's answer and every lease token it was given. */
export function recording(base: string, statuses: string[], tokens: string[]): Countersign {
  return new Countersign({
    baseUrl: base,
    token: "ck_ts_alice",
    fetch: async (input, init) => {
      const res = await fetch(input, init);
      if (new URL(input).pathname === "/v1/calls") {
        const body = (await res.clone().json()) as { status: string; lease?: { token: string } };
        statuses.push(body.status);
        if (body.lease) tokens.push(body.lease.token);
      }
      return res;
    },
  });
}

/** The side effects of one process: the operation id of each refund that ran. */
export const ran: { customer: string; operation_id: string }[] = [];

export function refundTool(client: Countersign, ms = 0) {
  return gated(
    {
      name: "refund",
      description: "Refund a payment",
      parameters: z.object({ amount: z.number(), customer: z.string() }),
      execute: async ({ amount, customer }, _ctx, details) => {
        ran.push({ customer, operation_id: execution(details)?.operation_id ?? "none" });
        if (ms) await new Promise((r) => setTimeout(r, ms));
        return `refunded ${amount} to ${customer}`;
      },
    },
    { client, action: "payments.refund", waitSeconds: 1 },
  );
}

export function mailTool(client: Countersign, guard?: "reject") {
  return gated(
    {
      name: "mail",
      inputGuardrails: guard
        ? [defineToolInputGuardrail({ name: "no_mail", run: async () => ToolGuardrailFunctionOutputFactory.rejectContent("no mail today") })]
        : undefined,
      description: "Send a mail",
      parameters: z.object({ to: z.string() }),
      execute: async ({ to }) => {
        ran.push({ customer: to, operation_id: "mail" });
        return { sent: to };
      },
    },
    { client, action: "mail.send", waitSeconds: 1 },
  );
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function agent(model: Model, tools: FunctionTool<any, any, any>[]) {
  return new Agent({ name: "refunds", instructions: "Refund what you are asked to.", model, tools });
}

/** A Runner that exports no traces (there is no network here). */
export function runner(): Runner {
  return new Runner({ tracingDisabled: true });
}
