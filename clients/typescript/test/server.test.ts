// The client against a real `countersign serve` (the demo: ck_dev_alice an
// agent, ck_dev_bob finance; payments.refund independent, run by the
// worker). The Go test in this folder starts it and sets COUNTERSIGN_URL;
// without it these tests skip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Countersign, CountersignError, type Fetch, type ProposalEvent, type WatchSnapshot } from "../dist/index.js";

const url = process.env.COUNTERSIGN_URL;
const skip = url ? false : "COUNTERSIGN_URL is not set (the Go test in clients/typescript starts a server and sets it)";
const base = url ?? "http://127.0.0.1:1";
const run = Math.random().toString(36).slice(2, 8); // threads and customers of this run
const alice = new Countersign({ baseUrl: base, token: "ck_dev_alice" });
const bob = new Countersign({ baseUrl: base, token: "ck_dev_bob" });

/** guard aborts after a long while, so that a broken stream fails instead of hanging; nothing is timed. */
const guard = () => AbortSignal.timeout(60_000);

async function refund(thread: string, n: number, customer = `c_${run}_${thread}_${n}`): Promise<string> {
  const res = await alice.call({ thread_id: thread, tool_call_id: `call_${n}`, action: "payments.refund", input: { amount: 10 + n, customer } });
  assert.equal(res.status, "pending");
  return (res as { proposal_id: string }).proposal_id;
}

test("call → pending → approve → waitForProposal → succeeded", { skip }, async () => {
  const thread = `ts_call_${run}`;
  const id = await refund(thread, 1);
  const p = await bob.getProposal(id);
  assert.equal(p.status, "pending");
  assert.deepEqual(p.approvers, ["role:finance"]);
  const d = await bob.approve(id, { reason: "ok" });
  assert.equal(d.status, "applied");
  const again = await bob.approve(id, { reason: "ok" });
  assert.equal(again.status, "unchanged");
  const done = await alice.waitForProposal(id, { timeoutSeconds: 60, signal: guard() });
  assert.equal(done.status, "succeeded");
  assert.match(done.outcome?.receipt ?? "", /^rf_/);
  assert.equal(done.decisions[0]?.via, "api");

  // Error answers, typed.
  const cancelled = await alice.cancel(id).catch((e: unknown) => e);
  assert.ok(cancelled instanceof CountersignError);
  assert.equal(cancelled.status, 409);
  assert.equal(cancelled.code, "INVALID_STATE");
  assert.deepEqual(cancelled.details, { status: "succeeded" });
  const missing = await bob.approve("prp_nope").catch((e: unknown) => e);
  assert.ok(missing instanceof CountersignError);
  assert.equal(missing.status, 404);
  assert.equal(missing.code, "NOT_FOUND");
  const bad = await alice
    .call({ thread_id: thread, tool_call_id: "call_bad", action: "payments.refund", input: { amount: -1, customer: "c" } })
    .catch((e: unknown) => e);
  assert.ok(bad instanceof CountersignError);
  assert.equal(bad.code, "INVALID_INPUT");
  assert.ok(Array.isArray(bad.details) && bad.details.length > 0);
});

test("listProposals follows every page (limit 2)", { skip }, async () => {
  const thread = `ts_list_${run}`;
  const ids: string[] = [];
  for (let n = 1; n <= 5; n++) ids.push(await refund(thread, n));
  let pages = 0;
  const counting: Fetch = (input, init) => {
    if (new URL(input).pathname.endsWith("proposals")) pages++;
    return fetch(input, init);
  };
  const c = new Countersign({ baseUrl: base, token: "ck_dev_alice", fetch: counting });
  const listed = await c.listProposals({ thread_id: thread, limit: 2 });
  assert.deepEqual(listed.map((p) => p.id).sort(), [...ids].sort());
  assert.ok(pages >= 3, `read ${pages} pages`);
  const byThread = await c.listThreadProposals(thread, { limit: 2 });
  assert.deepEqual(byThread.map((p) => p.id), listed.map((p) => p.id));
  const pending = await bob.listProposals({ status: "pending", thread_id: thread, limit: 2 });
  assert.equal(pending.length, 5);
});

test("events() resumes with Last-Event-ID across a dropped connection, each event once", { skip }, async () => {
  const thread = `ts_events_${run}`;
  const p0 = await refund(thread, 0);
  const trail = async (id: string) => {
    const res = await bob.request("GET", `/v1/proposals/${id}/events`);
    return ((await res.json()) as { events: { id: number; type: string }[] }).events;
  };
  const start = (await trail(p0))[0]!.id;
  const p1 = await refund(thread, 1);
  const p2 = await refund(thread, 2);
  await bob.approve(p1);
  await bob.reject(p2);
  assert.equal((await bob.waitForProposal(p1, { timeoutSeconds: 60, signal: guard() })).status, "succeeded");

  // The first connection breaks in the middle of its third event.
  const sent: (string | null)[] = [];
  const cutting: Fetch = async (input, init) => {
    sent.push(new Headers(init.headers).get("Last-Event-ID"));
    const res = await fetch(input, init);
    if (sent.length > 1 || !res.body) return res;
    let text = "";
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    const cut = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, ctl) {
        const before = text.length;
        text += decoder.decode(chunk, { stream: true });
        const frames = [...text.matchAll(/id: \d+\n[^]*?\n\n/g)];
        if (frames.length < 3) {
          ctl.enqueue(encoder.encode(text.slice(before)));
          return;
        }
        const end = frames[1]!.index! + frames[1]![0].length + 12; // into the third frame
        ctl.enqueue(encoder.encode(text.slice(before, Math.max(before, end))));
        ctl.error(new TypeError("connection reset"));
      },
    });
    return new Response(res.body.pipeThrough(cut), { status: res.status, headers: res.headers });
  };
  const c = new Countersign({ baseUrl: base, token: "ck_dev_bob", fetch: cutting });
  const ours = new Set([p0, p1, p2]);
  const want: string[] = [];
  const streamed = (t: string) => (t === "proposal.cancelled" || t === "proposal.resolved" ? "proposal.settled" : t);
  const names = new Set(["proposal.created", "proposal.decided", "proposal.settled", "proposal.expired", "proposal.superseded", "proposal.cancelled", "proposal.resolved"]);
  for (const id of ours) {
    for (const e of await trail(id)) if (e.id > start && names.has(e.type)) want.push(`${e.id} ${streamed(e.type)} ${id}`);
  }
  want.sort((a, b) => parseInt(a) - parseInt(b));

  const heard: ProposalEvent[] = [];
  const ctl = new AbortController();
  const timeout = guard();
  timeout.addEventListener("abort", () => ctl.abort());
  let p3: string | undefined;
  for await (const ev of c.events({ after: start, signal: ctl.signal, reconnectDelayMs: 10 })) {
    heard.push(ev);
    if (ours.has(ev.proposal.id) && heard.filter((e) => ours.has(e.proposal.id)).length === want.length && !p3) {
      // Replayed in full: one more, live.
      p3 = await refund(thread, 3);
      ours.add(p3);
    }
    if (p3 && ev.proposal.id === p3) break;
  }
  assert.ok(p3, "the stream ended before replaying every event");
  assert.ok(sent.length >= 2, "the stream reconnected");
  assert.equal(sent[0], String(start));
  const ids = heard.map((e) => Number(e.id));
  assert.equal(new Set(ids).size, ids.length, "no event twice");
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b), "in order");
  assert.equal(sent[1], heard[1]!.id, "the second connection resumed after the last event heard");
  const got = heard.filter((e) => ours.has(e.proposal.id)).map((e) => `${e.id} ${e.type} ${e.proposal.id}`);
  assert.deepEqual(got.slice(0, want.length), want);
  assert.equal(got.length, want.length + 1);
  assert.match(got.at(-1)!, new RegExp(`proposal.created ${p3}$`));
});

test("postMessage, a text decision by bob, getRun and watchProposals", { skip }, async () => {
  const thread = `ts_chat_${run}`;
  const changes: WatchSnapshot[] = [];
  let resolveDone: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const errors: unknown[] = [];
  // The thread exists once its first message is in: an unknown thread is a 404, which the watcher takes for a server without the routes.
  const res = await alice.postMessage(thread, { text: "refund 40 EUR to c_9" });
  const w = alice.watchProposals(thread, {
    intervalMs: 50,
    onError: (e) => errors.push(e),
    onChange: (s) => {
      changes.push(s);
      if (s.proposals.length > 0 && !s.active) resolveDone();
    },
  });
  // Keeps the event loop alive while the test waits on the watcher (AbortSignal.timeout does not).
  const keepAlive = setInterval(() => {}, 1000);
  try {
    assert.equal(res.thread_id, thread);
    const r = res.run!;
    assert.ok(r, "a run");
    assert.equal(r.proposal_ids.length, 1);
    const id = r.proposal_ids[0]!;
    assert.equal(res.messages?.[0]?.role, "user");
    const got = await alice.getRun(thread, r.id);
    assert.equal(got.id, r.id);
    const yes = await bob.postMessage(thread, { text: "yes" });
    assert.equal(yes.proposal_decision?.status, "applied");
    assert.equal(yes.proposal_decision?.proposal.id, id);
    const p = await alice.waitForProposal(id, { timeoutSeconds: 60, signal: guard() });
    assert.equal(p.status, "succeeded");
    assert.equal(p.decisions[0]?.via, "text");

    await Promise.race([done, new Promise((_, rej) => guard().addEventListener("abort", () => rej(new Error("watch never settled"))))]);
    const last = changes.at(-1)!;
    assert.equal(last.proposals[0]!.status, "succeeded");
    assert.ok(last.messages.some((m) => m.outcome?.proposal_id === id), "the outcome message is in the thread");
    assert.ok(changes.some((s) => s.active), "the watcher saw the proposal unsettled first");
    assert.deepEqual(errors, []);

    const busy = await alice.cancelRun(thread, "run_nope").catch((e: unknown) => e);
    assert.ok(busy instanceof CountersignError && busy.status === 404);
  } finally {
    w();
    clearInterval(keepAlive);
  }
});
