// Running work under a caller-executed action's lease (docs/api.md,
// "Caller-executed actions"): the answer `execute` is the claim; the work
// runs under it once, the lease renewed while it runs and the outcome
// settled after, through the fence. The agent-framework packages
// (@countersign/langgraph, @countersign/openai-agents) gate their tools
// with it; an agent of its own can too.

import type { Countersign } from "./client.js";
import { CountersignError } from "./errors.js";
import type { CallExecute, Proposal } from "./types.js";

/** The claim the work runs under. */
export interface Execution {
  proposal_id: string;
  /** The idempotency key of this proposal's execution: the same on every attempt. */
  operation_id: string;
  attempt: number;
  /** Aborted once a renewal was refused: the lease is someone else's now. */
  signal: AbortSignal;
}

/** An answer of a call or a settlement, as the gate errors carry it. */
export type GateAnswer = { status?: string; proposal?: Proposal | null } & Record<string, unknown>;

/** A gated call that did not come to a result; answer is the call's (or the settlement's) body. */
export class GateError extends Error {
  readonly status: string | undefined;
  constructor(
    message: string,
    readonly answer: GateAnswer,
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
/** It ran and failed (the work threw NotApplied), or a check before it failed. */
export class Failed extends GateError {}
/** Nobody knows whether it was applied (unknown, reconciling): do not retry automatically. */
export class OutcomeUnknown extends GateError {}
/** The work ran, but the lease was lost before its outcome could be settled. */
export class LeaseLost extends GateError {}
/** The server refused the input (the action's input_schema): nothing was stored, nothing ran. */
export class InvalidInput extends GateError {}

/**
 * Throw NotApplied from the work when the change certainly did not happen:
 * the call is settled failed. Any other error leaves the outcome uncertain:
 * nothing is settled and the lease lapses, for the server to reconcile,
 * release (idempotent actions) or record as unknown.
 */
export class NotApplied extends Error {
  constructor(message = "not applied") {
    super(message);
    this.name = "NotApplied";
  }
}

const TRANSIENT = new Set([408, 425, 429, 500, 502, 503, 504]);

/** transient reports whether a request's error is worth repeating: the network (fetch's TypeError), a 5xx, 408, 425 or 429. */
export function transient(e: unknown): boolean {
  return e instanceof CountersignError ? TRANSIENT.has(e.status) : e instanceof TypeError;
}

/** leaseMillis is the claim's lease length on the server's clock: from the claim's stamp to its expiry (at least 1 s). */
export function leaseMillis(claim: CallExecute): number {
  const claimed = Date.parse(claim.proposal.updated_at ?? "") || Date.now();
  return Math.max(1000, Date.parse(claim.lease.expires_at) - claimed);
}

/**
 * runUnderLease runs work once under claim's lease: renewed every third of
 * the lease while it runs (a refused renewal aborts execution.signal), then
 * settled succeeded with work's result as JSON (retrying transient failures
 * while the lease may still be held). It returns the result as recorded. A
 * NotApplied from work is settled failed and thrown as Failed; any other
 * error is thrown as it is and nothing is settled (the outcome is uncertain:
 * the lease lapses). A settlement the fence refuses throws LeaseLost.
 */
export async function runUnderLease(
  client: Countersign,
  action: string,
  claim: CallExecute,
  work: (execution: Execution) => unknown,
): Promise<unknown> {
  const id = claim.proposal_id;
  const token = claim.lease.token;
  const lost = new AbortController();
  const leaseMs = leaseMillis(claim);
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
  const expired = () => Date.now() >= until;

  let out: unknown;
  try {
    out = await work({ proposal_id: id, operation_id: claim.operation_id, attempt: claim.lease.attempt, signal: lost.signal });
  } catch (e) {
    stop();
    if (e instanceof NotApplied) {
      const r = await settle(client, id, { lease_token: token, outcome: "failed", error: e.message }, expired);
      throw r.status === "applied" ? new Failed(`${action}: ${e.message}`, r) : new LeaseLost(`${action}: the lease was lost`, r);
    }
    throw e; // uncertain: the lease lapses
  }
  stop();
  const result = out === undefined ? null : JSON.parse(JSON.stringify(out));
  const r = await settle(client, id, { lease_token: token, outcome: "succeeded", result }, expired);
  if (r.status !== "applied") throw new LeaseLost(`${action}: the lease was lost; the outcome was not recorded`, r);
  return (r.proposal.outcome as { result?: unknown } | undefined)?.result ?? result;
}

/**
 * settle records the work's outcome while the lease may still be held,
 * retrying failures that are not verdicts; the fence decides.
 */
export async function settle(
  client: Countersign,
  id: string,
  body: Parameters<Countersign["settle"]>[1],
  expired: () => boolean,
) {
  for (let failures = 1; ; failures++) {
    try {
      return await client.settle(id, body);
    } catch (e) {
      if (!transient(e) || expired()) throw e;
      await sleep(Math.min(2000, 100 * 2 ** failures));
    }
  }
}

/** gateError is the error a call's answer other than a result stands for. */
export function gateError(action: string, a: GateAnswer): GateError {
  switch (a.status) {
    case "denied":
      return new Denied(`${action}: denied: ${String(a.reason ?? "")}`, a);
    case "failed":
      return new Failed(`${action}: failed: ${String(a.error ?? "")}`, a);
    case "unknown":
    case "reconciling":
      return new OutcomeUnknown(`${action}: outcome ${a.status}; do not retry it`, a);
    case "rejected": {
      const d = a.proposal?.decisions?.find((x) => x.decision === "rejected");
      const by = d ? ` by ${d.actor}${d.reason ? ` (${d.reason})` : ""}` : "";
      return new NotExecuted(`${action}: rejected${by}; it was not executed`, a);
    }
    case "expired":
    case "superseded":
    case "cancelled":
      return new NotExecuted(`${action}: ${a.status}; it was not executed`, a);
    default:
      return new GateError(`${action}: unexpected answer ${a.status}`, a);
  }
}

/** sleep resolves after ms. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
