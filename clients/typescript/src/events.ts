// events: GET /v1/events as an async iterator that reconnects with
// Last-Event-ID and never yields an event twice.

import { CountersignError } from "./errors.js";
import { SSEParser } from "./sse.js";
import type { EventName, Proposal } from "./types.js";

/** One event of the stream. */
export interface ProposalEvent {
  /** The event's id: resume after it with events({after: id}). */
  id: string;
  /** What happened. */
  type: EventName;
  /** The proposal as it stands when the event is delivered. */
  proposal: Proposal;
}

/** Options of events(). */
export interface EventsOptions {
  /**
   * Resume after this event id (Last-Event-ID of the first connection).
   * Without it the stream starts from now; a connection that drops before
   * its first event then resumes from now again.
   */
  after?: string | number;
  /** Closes the stream; the iterator then ends without an error. */
  signal?: AbortSignal;
  /** Wait before reconnecting, in ms; default the server's retry field (2000), else 2000. */
  reconnectDelayMs?: number;
  /** Called when a connection ends and the iterator reconnects. */
  onReconnect?: (info: { error: unknown; lastEventId: string | undefined }) => void;
}

const DEFAULT_RETRY_MS = 2000;

/** connect opens one connection with the given headers and signal. */
type Connect = (init: { headers: Record<string, string>; signal: AbortSignal }) => Promise<Response>;

/**
 * streamEvents yields the events of successive connections. An error
 * answer the server gives for good (401, 403, 400 INVALID_CURSOR, …) ends
 * the iterator with that CountersignError; 429, 5xx, a network failure or
 * a stream that ends are followed by a reconnect after the delay.
 */
export async function* streamEvents(connect: Connect, options: EventsOptions): AsyncGenerator<ProposalEvent, void, undefined> {
  let lastId = options.after === undefined ? undefined : String(options.after);
  let lastNum = toNumber(lastId);
  let serverRetry: number | undefined;
  const outer = options.signal;
  while (!outer?.aborted) {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(outer?.reason);
    outer?.addEventListener("abort", onAbort, { once: true });
    let failure: unknown;
    let retryAfterMs: number | undefined;
    try {
      const headers: Record<string, string> = { Accept: "text/event-stream", "Cache-Control": "no-store" };
      if (lastId !== undefined) headers["Last-Event-ID"] = lastId;
      const res = await connect({ headers, signal: ctl.signal });
      if (!res.ok) {
        const err = await CountersignError.fromResponse(res);
        if (res.status !== 429 && res.status < 500) throw err;
        failure = err;
        if (err.retryAfter !== undefined) retryAfterMs = err.retryAfter * 1000;
      } else if (!res.body) {
        failure = new CountersignError(res.status, "INVALID_RESPONSE", "the event stream has no body");
      } else {
        const parser = new SSEParser();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            for (const frame of parser.push(value)) {
              if (parser.retry !== undefined) serverRetry = parser.retry;
              if (frame.id === undefined || frame.id === "") continue; // the API's events all carry ids
              const n = toNumber(frame.id);
              // Ids grow: one at or before the last yielded was heard already.
              if (n !== undefined && lastNum !== undefined && n <= lastNum) continue;
              let proposal: Proposal;
              try {
                proposal = JSON.parse(frame.data) as Proposal;
              } catch {
                continue; // not an event of this API
              }
              lastId = frame.id;
              lastNum = n;
              yield { id: frame.id, type: frame.event as EventName, proposal };
            }
            if (parser.retry !== undefined) serverRetry = parser.retry;
          }
        } finally {
          reader.cancel().catch(() => {});
        }
      }
    } catch (err) {
      if (outer?.aborted) return;
      if (err instanceof CountersignError) throw err;
      failure = err;
    } finally {
      outer?.removeEventListener("abort", onAbort);
      ctl.abort();
    }
    if (outer?.aborted) return;
    options.onReconnect?.({ error: failure, lastEventId: lastId });
    const delay = retryAfterMs ?? options.reconnectDelayMs ?? serverRetry ?? DEFAULT_RETRY_MS;
    await sleep(delay, outer);
  }
}

function toNumber(id: string | undefined): number | undefined {
  if (id === undefined || !/^\d{1,15}$/.test(id)) return undefined;
  return Number(id);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
