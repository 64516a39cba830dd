// settle and renew against a real `countersign serve` with
// testdata/caller.yaml (caller-executed actions, a 2s lease). The Go test
// in this folder starts it and sets COUNTERSIGN_CALLER_URL; without it
// these tests skip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Countersign, CountersignError, type CallExecute } from "../dist/index.js";

const url = process.env.COUNTERSIGN_CALLER_URL;
const skip = url ? false : "COUNTERSIGN_CALLER_URL is not set (the Go test in clients/typescript starts a server and sets it)";
const base = url ?? "http://127.0.0.1:1";
const run = Math.random().toString(36).slice(2, 8);
const alice = new Countersign({ baseUrl: base, token: "ck_ts_alice" });
const bob = new Countersign({ baseUrl: base, token: "ck_ts_bob" });

test("an allowed caller-executed call is the claim: renew, a stale token's conflict, settle once", { skip }, async () => {
  const call = { thread_id: `ts_caller_${run}`, tool_call_id: "call_1", action: "mail.send", input: { to: "x@example.com" } };
  const res = await alice.call(call);
  assert.equal(res.status, "execute");
  const ex = res as CallExecute;
  assert.match(ex.operation_id, /.+/);
  assert.deepEqual(ex.input, { to: "x@example.com" });
  assert.equal(ex.lease.attempt, 1);
  assert.equal(ex.proposal.status, "executing");

  // The same call again while the lease is live: executing, no second lease.
  const again = await alice.call(call);
  assert.equal(again.status, "executing");
  assert.equal((again as { lease?: unknown }).lease, undefined);

  await new Promise((r) => setTimeout(r, 50));
  const renewed = await alice.renew(ex.proposal_id, { lease_token: ex.lease.token });
  assert.equal(renewed.status, "applied");
  assert.equal(renewed.lease?.token, ex.lease.token);
  assert.ok(Date.parse(renewed.lease!.expires_at) > Date.parse(ex.lease.expires_at), "renew moves expires_at later");

  const stale = await alice.settle(ex.proposal_id, { lease_token: "not-the-token", outcome: "succeeded" });
  assert.equal(stale.status, "conflict");
  assert.equal(stale.proposal.status, "executing");
  const staleRenew = await alice.renew(ex.proposal_id, { lease_token: "not-the-token" });
  assert.equal(staleRenew.status, "conflict");

  const settled = await alice.settle(ex.proposal_id, {
    lease_token: ex.lease.token,
    outcome: "succeeded",
    receipt: "msg_1",
    result: { sent: true },
  });
  assert.equal(settled.status, "applied");
  assert.equal(settled.proposal.status, "succeeded");
  assert.equal(settled.proposal.outcome?.receipt, "msg_1");
  // A settlement repeated after its answer was lost: applied, nothing new.
  const repeated = await alice.settle(ex.proposal_id, { lease_token: ex.lease.token, outcome: "succeeded", receipt: "msg_1", result: { sent: true } });
  assert.equal(repeated.status, "applied");
  // The lease is spent: renewing it now is a conflict.
  assert.equal((await alice.renew(ex.proposal_id, { lease_token: ex.lease.token })).status, "conflict");
  // And the call repeated answers the outcome, not a lease.
  const after = await alice.call(call);
  assert.equal(after.status, "succeeded");
});

test("an approved call answers execute; a failed settlement is recorded; others may not settle", { skip }, async () => {
  const call = { thread_id: `ts_caller_ask_${run}`, tool_call_id: "call_1", action: "payments.refund", input: { amount: 5, customer: "c_1" } };
  const pending = await alice.call(call);
  assert.equal(pending.status, "pending");
  const id = (pending as { proposal_id: string }).proposal_id;
  assert.equal((await bob.approve(id)).status, "applied");
  const res = await alice.call(call);
  assert.equal(res.status, "execute");
  const ex = res as CallExecute;
  assert.equal(ex.proposal_id, id);
  // Only the requester holds or settles a caller's lease.
  const foreign = await bob.settle(id, { lease_token: ex.lease.token, outcome: "succeeded" }).catch((e: unknown) => e);
  assert.ok(foreign instanceof CountersignError, `bob's settle answered ${JSON.stringify(foreign)}`);
  assert.equal(foreign.status, 403);
  const failed = await alice.settle(id, { lease_token: ex.lease.token, outcome: "failed", error: "card declined" });
  assert.equal(failed.status, "applied");
  assert.equal(failed.proposal.status, "failed");
  const missing = await alice.settle("prp_nope", { lease_token: "t", outcome: "succeeded" }).catch((e: unknown) => e);
  assert.ok(missing instanceof CountersignError);
  assert.equal(missing.status, 404);
});
