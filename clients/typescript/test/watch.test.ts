// watchProposals' rules, through a fake fetch and a fake clock: what it
// schedules, what it reads and what it reports. Nothing here waits on the
// wall clock.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Countersign, CountersignError, type WatchTimers, type WatchSnapshot } from "../dist/index.js";

/** FakeClock records each timer and runs it when told. */
class FakeClock implements WatchTimers {
  private next = 1;
  timers = new Map<number, { fn: () => void; ms: number }>();
  scheduled: number[] = [];
  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.timers.set(id, { fn, ms });
    this.scheduled.push(ms);
    return id;
  }
  clearTimeout(h: unknown): void {
    this.timers.delete(h as number);
  }
  /** fire runs the one pending timer, and returns its delay. */
  fire(): number {
    assert.equal(this.timers.size, 1, "want exactly one pending timer");
    const [[id, t]] = [...this.timers];
    this.timers.delete(id!);
    t!.fn();
    return t!.ms;
  }
}

/** settle lets the watcher's promise chains run to their end. */
async function settle() {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

type Answer = { status: number; body?: unknown } | "network";

/** fakeServer answers GET /v1/threads/{id}/proposals and GET /v1/threads/{id} from a script. */
function fakeServer() {
  const state = {
    answer: { status: 200 } as Answer,
    proposals: [] as { id: string; status: string; outcome: unknown; updated_at: string }[],
    messages: [] as { id: string; outcome?: { proposal_id: string } }[],
    reads: 0,
  };
  const fetch = async (url: string): Promise<Response> => {
    state.reads++;
    const a = state.answer;
    if (a === "network") throw new TypeError("fetch failed");
    if (a.status !== 200) {
      return new Response(JSON.stringify({ error: { code: "X", message: `status ${a.status}` } }), { status: a.status });
    }
    const path = new URL(url).pathname;
    if (path.endsWith("/proposals")) return Response.json({ proposals: state.proposals });
    return Response.json({ thread: { id: "t", owner: "alice", created_at: "" }, messages: state.messages, runs: [] });
  };
  return { state, client: new Countersign({ baseUrl: "http://countersign.test", token: "t", fetch }) };
}

function proposal(id: string, status: string, outcome: unknown = null) {
  return { id, status, outcome, updated_at: status };
}

class FakeTarget {
  listeners = new Map<string, Set<() => void>>();
  visibilityState = "visible";
  addEventListener(type: string, fn: () => void) {
    if (!this.listeners.has(type)) this.listeners.set(type, new Set());
    this.listeners.get(type)!.add(fn);
  }
  removeEventListener(type: string, fn: () => void) {
    this.listeners.get(type)?.delete(fn);
  }
  emit(type: string) {
    for (const fn of this.listeners.get(type) ?? []) fn();
  }
  count() {
    let n = 0;
    for (const s of this.listeners.values()) n += s.size;
    return n;
  }
}

test("polls at the interval while a proposal is unsettled, and stops once its outcome is admitted", async () => {
  const { state, client } = fakeServer();
  const clock = new FakeClock();
  const changes: WatchSnapshot[] = [];
  state.proposals = [proposal("p1", "pending")];
  const stop = client.watchProposals("t", { intervalMs: 1000, timers: clock, onChange: (s) => changes.push(s) });
  await settle();
  assert.deepEqual(clock.scheduled, [1000]);
  assert.equal(changes.length, 1);
  assert.equal(changes[0]!.active, true);

  // Nothing changed: a poll, another timer, no onChange.
  clock.fire();
  await settle();
  assert.deepEqual(clock.scheduled, [1000, 1000]);
  assert.equal(changes.length, 1);

  // Approved, executing, then succeeded with its outcome not yet in the thread: still polling.
  for (const status of ["approved", "executing"]) {
    state.proposals = [proposal("p1", status)];
    clock.fire();
    await settle();
  }
  state.proposals = [proposal("p1", "succeeded", { proposal_id: "p1", status: "succeeded" })];
  clock.fire();
  await settle();
  assert.equal(clock.timers.size, 1, "an outcome not admitted yet keeps the watcher polling");
  assert.equal(changes.at(-1)!.active, true);

  // The outcome message arrives: the watcher reports it and goes idle.
  state.messages = [{ id: "msg_p1:succeeded", outcome: { proposal_id: "p1" } }];
  clock.fire();
  await settle();
  assert.equal(clock.timers.size, 0, "nothing unsettled: no timer");
  assert.equal(changes.at(-1)!.active, false);
  assert.equal(changes.length, 5); // pending, approved, executing, succeeded, admitted
  stop();
});

test("no unsettled proposal: one read, then nothing until focus, visibility or refresh", async () => {
  const { state, client } = fakeServer();
  const clock = new FakeClock();
  const win = new FakeTarget();
  const doc = new FakeTarget();
  state.proposals = [proposal("p0", "rejected")]; // no outcome: nothing to admit
  const w = client.watchProposals("t", { timers: clock, window: win, document: doc });
  await settle();
  assert.equal(state.reads, 2); // proposals and thread
  assert.equal(clock.timers.size, 0);

  win.emit("focus");
  await settle();
  assert.equal(state.reads, 4);

  doc.visibilityState = "hidden";
  doc.emit("visibilitychange");
  await settle();
  assert.equal(state.reads, 4, "hidden is not a reason to read");
  doc.visibilityState = "visible";
  doc.emit("visibilitychange");
  await settle();
  assert.equal(state.reads, 6);

  // Focus brings a new pending proposal: polling resumes.
  state.proposals = [proposal("p2", "pending"), ...state.proposals];
  w.refresh();
  await settle();
  assert.equal(clock.timers.size, 1);

  w();
  assert.equal(clock.timers.size, 0);
  assert.equal(win.count() + doc.count(), 0, "stop removes the listeners");
  win.emit("focus");
  await settle();
  assert.equal(state.reads, 8);
});

test("5xx and network failures double the wait up to 30 s, are reported once, and a success returns to the interval", async () => {
  const { state, client } = fakeServer();
  const clock = new FakeClock();
  const errors: unknown[] = [];
  state.proposals = [proposal("p1", "pending")];
  const stop = client.watchProposals("t", { intervalMs: 1000, timers: clock, onError: (e) => errors.push(e) });
  await settle();
  assert.deepEqual(clock.scheduled, [1000]);

  const failing: Answer[] = [{ status: 503 }, "network", { status: 500 }, { status: 502 }, "network", { status: 503 }, { status: 504 }];
  for (const a of failing) {
    state.answer = a;
    clock.fire();
    await settle();
  }
  assert.deepEqual(clock.scheduled, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  assert.equal(errors.length, 1, "one report for the whole outage");
  assert.ok(errors[0] instanceof CountersignError && errors[0].status === 503);

  state.answer = { status: 200 };
  clock.fire();
  await settle();
  assert.equal(clock.scheduled.at(-1), 1000);

  // A new outage after a success is reported again, once.
  state.answer = "network";
  clock.fire();
  await settle();
  clock.fire();
  await settle();
  assert.deepEqual(clock.scheduled.slice(-2), [2000, 4000]);
  assert.equal(errors.length, 2);
  assert.ok(errors[1] instanceof TypeError);
  stop();
});

for (const status of [404, 405, 501]) {
  test(`a ${status} marks the server unsupported once and stops every read`, async () => {
    const { state, client } = fakeServer();
    const clock = new FakeClock();
    const win = new FakeTarget();
    const reports: { error: unknown; unsupported: boolean }[] = [];
    state.proposals = [proposal("p1", "pending")];
    const w = client.watchProposals("t", {
      timers: clock,
      window: win,
      onError: (error, info) => reports.push({ error, ...info }),
    });
    await settle();
    state.answer = { status };
    clock.fire();
    await settle();
    assert.equal(reports.length, 1);
    assert.equal(reports[0]!.unsupported, true);
    assert.equal((reports[0]!.error as CountersignError).status, status);
    assert.equal(clock.timers.size, 0);
    assert.equal(win.count(), 0);
    const reads = state.reads;
    win.emit("focus");
    w.refresh();
    await settle();
    assert.equal(state.reads, reads, "nothing is read once unsupported");
    assert.equal(reports.length, 1);
  });
}

test("a refresh during a read reads once more after it, not twice at once", async () => {
  const { state, client } = fakeServer();
  const clock = new FakeClock();
  const w = client.watchProposals("t", { timers: clock });
  w.refresh();
  w.refresh();
  await settle();
  assert.equal(state.reads, 4); // the first read, then one more
  w();
});

test("intervalMs is checked", () => {
  const { client } = fakeServer();
  assert.throws(() => client.watchProposals("t", { intervalMs: 0 }), /intervalMs/);
});
