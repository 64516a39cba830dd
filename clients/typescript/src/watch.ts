// watchProposals: a thread's proposals, polled while any is unsettled.

import { CountersignError } from "./errors.js";
import type { Message, Proposal, ThreadResponse } from "./types.js";

/** What the watcher reads through: a Countersign client, or a stand-in. */
export interface WatchSource {
  listThreadProposals(threadId: string): Promise<Proposal[]>;
  getThread(threadId: string): Promise<ThreadResponse>;
}

/** One read of the thread. */
export interface WatchSnapshot {
  /** The thread's proposals, newest first. */
  proposals: Proposal[];
  /** The thread's messages, oldest first. */
  messages: Message[];
  /** Whether any proposal is still unsettled (so the watcher keeps polling). */
  active: boolean;
}

/** Timers the watcher schedules with; tests pass a fake clock. */
export interface WatchTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The minimal event target the watcher listens on for focus and visibility. */
export interface FocusTarget {
  addEventListener(type: string, fn: () => void): void;
  removeEventListener(type: string, fn: () => void): void;
}

/** Options of watchProposals. */
export interface WatchOptions {
  /** The poll interval while a proposal is unsettled, in ms; default 1000. */
  intervalMs?: number;
  /** Called with each read that differs from the one before (the first read included). */
  onChange?: (snapshot: WatchSnapshot) => void;
  /**
   * Called once when reads start failing (again after a success), and once
   * with unsupported set when the server lacks the routes (404, 405, 501),
   * after which the watcher reads nothing more.
   */
  onError?: (error: unknown, info: { unsupported: boolean }) => void;
  /** Default setTimeout/clearTimeout. */
  timers?: WatchTimers;
  /** Where focus is heard; default globalThis.window when there is one. */
  window?: FocusTarget;
  /** Where visibility changes are heard; default globalThis.document when there is one. */
  document?: FocusTarget & { visibilityState?: string };
}

/** A running watcher: call it (or stop()) to stop; refresh() reads now. */
export interface Watch {
  (): void;
  stop(): void;
  /** Reads now, e.g. right after posting a message that may have made a proposal. */
  refresh(): void;
}

/** The longest wait between failing reads. */
export const MAX_BACKOFF_MS = 30_000;

/** Statuses in which a proposal is still moving toward its outcome. */
const LIVE: ReadonlySet<string> = new Set(["pending", "approved", "executing", "reconciling"]);

/**
 * unsettled says whether p is still to be watched: it is pending, approved
 * or executing (or reconciling), or it has an outcome that the thread does
 * not hold yet as a message (an independent call's outcome is admitted
 * after the fact, and waits while a run holds the thread).
 */
export function unsettled(p: Proposal, admitted: ReadonlySet<string>): boolean {
  return LIVE.has(p.status) || (p.outcome != null && !admitted.has(p.id));
}

/** unsupportedStatus: the answers that say the server has no such route. */
function unsupportedStatus(err: unknown): boolean {
  return err instanceof CountersignError && (err.status === 404 || err.status === 405 || err.status === 501);
}

/**
 * watchProposals reads a thread's proposals and messages now, then every
 * intervalMs while any proposal is unsettled, and again whenever the window
 * regains focus or becomes visible. Failing reads (5xx, the network) double
 * the wait up to 30 s, and a success returns it to intervalMs; the failure
 * is reported once. A 404, 405 or 501 marks the server unsupported: reported
 * once, and nothing is read again.
 */
export function watchProposals(source: WatchSource, threadId: string, options: WatchOptions = {}): Watch {
  const interval = options.intervalMs ?? 1000;
  if (!(interval > 0) || !Number.isFinite(interval)) {
    throw new TypeError("watchProposals: intervalMs must be a positive number");
  }
  const timers: WatchTimers = options.timers ?? {
    setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
    clearTimeout: (h) => globalThis.clearTimeout(h as ReturnType<typeof setTimeout>),
  };
  const g = globalThis as { window?: FocusTarget; document?: FocusTarget & { visibilityState?: string } };
  const win = options.window ?? (typeof g.window?.addEventListener === "function" ? g.window : undefined);
  const doc = options.document ?? (typeof g.document?.addEventListener === "function" ? g.document : undefined);

  let stopped = false;
  let inFlight = false;
  let again = false; // a refresh asked for while a read was in flight
  let timer: unknown;
  let failures = 0;
  let reported = false;
  let last = "";

  const schedule = (ms: number) => {
    if (timer !== undefined) timers.clearTimeout(timer);
    timer = timers.setTimeout(() => {
      timer = undefined;
      void poll();
    }, ms);
  };

  const poll = async (): Promise<void> => {
    if (stopped) return;
    if (inFlight) {
      again = true;
      return;
    }
    if (timer !== undefined) {
      timers.clearTimeout(timer);
      timer = undefined;
    }
    inFlight = true;
    let snapshot: WatchSnapshot | undefined;
    let failure: unknown;
    try {
      const [proposals, thread] = await Promise.all([source.listThreadProposals(threadId), source.getThread(threadId)]);
      const messages = thread.messages ?? [];
      const admitted = new Set<string>();
      for (const m of messages) if (m.outcome?.proposal_id) admitted.add(m.outcome.proposal_id);
      snapshot = { proposals, messages, active: proposals.some((p) => unsettled(p, admitted)) };
    } catch (err) {
      failure = err;
    } finally {
      inFlight = false;
    }
    if (stopped) return;
    if (failure !== undefined) {
      if (unsupportedStatus(failure)) {
        options.onError?.(failure, { unsupported: true });
        stop();
        return;
      }
      failures++;
      if (!reported) {
        reported = true;
        options.onError?.(failure, { unsupported: false });
      }
      if (again) {
        again = false;
      }
      schedule(Math.min(MAX_BACKOFF_MS, interval * 2 ** failures));
      return;
    }
    failures = 0;
    reported = false;
    const s = snapshot!;
    const sig = signature(s);
    if (sig !== last) {
      last = sig;
      options.onChange?.(s);
    }
    if (again) {
      again = false;
      void poll();
    } else if (s.active) {
      schedule(interval);
    }
  };

  const onFocus = () => {
    void poll();
  };
  const onVisibility = () => {
    if (!doc?.visibilityState || doc.visibilityState === "visible") void poll();
  };

  const stop = () => {
    if (stopped) return;
    stopped = true;
    if (timer !== undefined) timers.clearTimeout(timer);
    timer = undefined;
    win?.removeEventListener("focus", onFocus);
    doc?.removeEventListener("visibilitychange", onVisibility);
  };

  win?.addEventListener("focus", onFocus);
  doc?.addEventListener("visibilitychange", onVisibility);
  void poll();

  const watch = (() => stop()) as Watch;
  watch.stop = stop;
  watch.refresh = () => {
    void poll();
  };
  return watch;
}

/** signature is what onChange compares: each proposal's status and version, and the messages' ids. */
function signature(s: WatchSnapshot): string {
  return JSON.stringify([s.proposals.map((p) => [p.id, p.status, p.updated_at]), s.messages.map((m) => m.id)]);
}
