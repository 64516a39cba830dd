// Every documented request of the HTTP API, written as a TypeScript client
// writes it: through openapi-fetch, against the types openapi-typescript
// generates (with its default options) from the served /openapi.json into
// ./schema.d.ts. TestTypeScriptClient compiles this file with tsc --strict,
// so a change of the document that breaks such a client fails there.
// The @ts-expect-error lines are requests the types must refuse: if the
// generated types stop refusing them (a field turned any, a required field
// turned optional), tsc reports the unused directive.

import createClient from "openapi-fetch";
import type { components, paths } from "./schema";

type Schemas = components["schemas"];
export type Client = ReturnType<typeof createClient<paths>>;

export function connect(baseUrl: string, token: string): Client {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
}

// problems reads an error answer's details as a client does: the list of
// {path, message} for INVALID_BODY, INVALID_INPUT and CALL_MISMATCH, the
// proposal's status for INVALID_STATE, the page to give a passkey on for
// STEP_UP_REQUIRED.
export function problems(err: Schemas["Error"]): string[] {
  const details = err.error.details;
  if (details === undefined) return [`${err.error.code}: ${err.error.message}`];
  if (Array.isArray(details)) {
    return details.map((p: Schemas["Problem"]) => `${p.path}: ${p.message}`);
  }
  if ("url" in details) return [`a passkey is needed: ${details.url}`];
  const status: Schemas["Proposal"]["status"] = details.status;
  return [`the proposal is ${status}`];
}

// describe narrows a call's answer by its status, as agents do.
export function describe(res: Schemas["CallResponse"]): string {
  switch (res.status) {
    case "succeeded":
      return `ran: receipt ${res.receipt}`;
    case "failed":
      return `failed: ${res.error}`;
    case "pending":
      return `waits for a human: ${res.proposal_id}`;
    case "confirmation_required":
      return `confirm ${res.confirmation_id} before ${res.expires_at}: ${res.summary}`;
    case "confirmation_invalid":
      return `evidence refused: ${res.reason}`;
    case "denied":
      return `denied (${res.code}): ${res.reason}`;
    default:
      return `${res.status}`;
  }
}

export async function everyRequest(c: Client, proposalId: string, grantId: string): Promise<string[]> {
  const seen: string[] = [];

  // POST /v1/calls: the least a call needs (wait_seconds stays optional)…
  const minimal = await c.POST("/v1/calls", {
    body: { thread_id: "t1", tool_call_id: "call_1", action: "payments.refund", input: { amount: 40, customer: "c_9" } },
  });
  if (minimal.error) seen.push(...problems(minimal.error));
  else seen.push(describe(minimal.data));
  // …and every field it takes.
  const full = await c.POST("/v1/calls", {
    body: {
      thread_id: "t1",
      run_id: "r1",
      tool_call_id: "call_2",
      action: "payments.refund",
      input: { amount: 40, customer: "c_9" },
      mode: "two_phase",
      evidence: "cnf_1",
      wait_seconds: 5,
    },
  });
  if (full.data) seen.push(describe(full.data));

  // Reading proposals.
  const list = await c.GET("/v1/proposals", {
    params: { query: { status: "pending", action: "payments.refund", thread_id: "t1", limit: 10 } },
  });
  const next = list.response.headers.get("X-Action-Proposals-Next");
  if (next !== null) {
    await c.GET("/v1/proposals", { params: { query: { after: decodeURIComponent(next) } } });
  }
  for (const p of list.data?.proposals ?? []) seen.push(`${p.id} ${p.status} ${p.input_digest}`);
  const one = await c.GET("/v1/proposals/{id}", { params: { path: { id: proposalId }, query: { wait_seconds: 1 } } });
  if (one.data) seen.push(one.data.status);
  const trail = await c.GET("/v1/proposals/{id}/events", { params: { path: { id: proposalId } } });
  for (const e of trail.data?.events ?? []) seen.push(`${e.id} ${e.type}`);

  // Decisions: every body, and the headers they take.
  const approved = await c.POST("/v1/proposals/{id}/approve", {
    params: { path: { id: proposalId } },
    body: { reason: "looks right", remember: "thread" },
  });
  if (approved.data) seen.push(`${approved.data.status} ${approved.data.proposal.status}`);
  else if (approved.error) seen.push(...problems(approved.error));
  await c.POST("/v1/proposals/{id}/approve", { params: { path: { id: proposalId } }, body: {} });
  await c.POST("/v1/proposals/{id}/reject", {
    params: { path: { id: proposalId }, header: { "Countersign-Via": "cli" } },
    body: { reason: "not this one" },
  });
  const cancelled = await c.POST("/v1/proposals/{id}/cancel", { params: { path: { id: proposalId } }, body: { reason: "changed my mind" } });
  if (cancelled.error) seen.push(...problems(cancelled.error));
  const resolved = await c.POST("/v1/proposals/{id}/resolve", {
    params: { path: { id: proposalId } },
    body: { outcome: "succeeded", receipt: "rf_1", note: "the payment provider shows the refund" },
  });
  if (resolved.error) seen.push(...problems(resolved.error));

  // Threads, grants, operations.
  const thread = await c.GET("/v1/threads/{thread_id}", { params: { path: { thread_id: "t1" } } });
  for (const m of thread.data?.messages ?? []) seen.push(`${m.role}: ${m.text}`);
  await c.GET("/v1/threads/{thread_id}/proposals", { params: { path: { thread_id: "t1" }, query: { limit: 1 } } });
  const grants = await c.GET("/v1/grants", { params: { query: { thread_id: "t1" } } });
  for (const g of grants.data?.grants ?? []) seen.push(g.id);
  const revoked = await c.DELETE("/v1/grants/{id}", { params: { path: { id: grantId } } });
  if (revoked.data) seen.push(revoked.data.grant.id);
  await c.GET("/healthz");
  await c.GET("/readyz");

  return seen;
}

// refused holds requests the generated types must refuse.
export async function refused(c: Client, proposalId: string): Promise<void> {
  // @ts-expect-error wait_seconds is a number of seconds
  await c.POST("/v1/calls", { body: { thread_id: "t1", tool_call_id: "c", action: "a", input: {}, wait_seconds: "5" } });
  // @ts-expect-error a call needs its tool_call_id
  await c.POST("/v1/calls", { body: { thread_id: "t1", action: "a", input: {} } });
  // Request bodies are strict: no unknown field. (openapi-fetch infers its
  // init argument generically, which skips TypeScript's excess-property
  // check, so a client that wants it types the body itself.)
  const strict: Schemas["CallRequest"] = {
    thread_id: "t1",
    tool_call_id: "c",
    action: "a",
    input: {},
    // @ts-expect-error a body never chooses the tenant
    tenant: "globex",
  };
  await c.POST("/v1/calls", { body: strict });
  // @ts-expect-error remember is run or thread
  await c.POST("/v1/proposals/{id}/approve", { params: { path: { id: proposalId } }, body: { remember: "forever" } });
  // @ts-expect-error resolving needs a note
  await c.POST("/v1/proposals/{id}/resolve", { params: { path: { id: proposalId } }, body: { outcome: "failed" } });
  // @ts-expect-error there is no such route
  await c.GET("/v1/proposal/{id}", { params: { path: { id: proposalId } } });
  const res = await c.POST("/v1/calls", { body: { thread_id: "t1", tool_call_id: "c", action: "a", input: {} } });
  if (res.error) {
    const d = res.error.error.details;
    if (Array.isArray(d)) {
      // @ts-expect-error a problem has a path and a message, nothing else
      void d[0].field;
    }
  }
}
