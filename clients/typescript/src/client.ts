// Countersign: the client of the HTTP API, one method per route.

import { CountersignError } from "./errors.js";
import { streamEvents, type EventsOptions, type ProposalEvent } from "./events.js";
import type {
  ApproveRequest,
  CallRequest,
  CallResponse,
  DecisionResponse,
  MessageRequest,
  MessageResponse,
  Proposal,
  ProposalStatus,
  LeaseResponse,
  ReasonRequest,
  RenewRequest,
  ResolveRequest,
  Run,
  SettleRequest,
  ThreadResponse,
} from "./types.js";
import { watchProposals, type WatchOptions, type Watch } from "./watch.js";

/** The fetch the client calls: the global one, or any with its signature. */
export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

/** How to reach a server. */
export interface ClientOptions {
  /** The server's base URL, e.g. http://127.0.0.1:8080 (a trailing slash is fine). */
  baseUrl: string;
  /** The bearer token: an API key or a JWT. */
  token: string;
  /** The fetch to use; default globalThis.fetch (Node 20, browsers). */
  fetch?: Fetch;
}

/** Options every call accepts. */
export interface RequestOptions {
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** The filters of listProposals; limit is the page size (1..1000), not a total. */
export interface ListProposalsParams {
  status?: ProposalStatus | ProposalStatus[];
  action?: string;
  thread_id?: string;
  limit?: number;
}

/** Options of waitForProposal. */
export interface WaitOptions extends RequestOptions {
  /** How long to wait in all, in seconds; default 25. Each long-poll waits at most 60. */
  timeoutSeconds?: number;
}

/** The header that carries a listing's next cursor, escaped like encodeURIComponent. */
export const NEXT_HEADER = "X-Action-Proposals-Next";

/** The longest wait_seconds the server takes. */
const MAX_WAIT_SECONDS = 60;

/** Statuses a long-poll returns at: terminal, or reconciling (which only an operator moves on). */
const SETTLED: ReadonlySet<string> = new Set([
  "succeeded",
  "failed",
  "reconciling",
  "unknown",
  "rejected",
  "expired",
  "superseded",
  "cancelled",
]);

/** A query's values; undefined ones are left out. */
type Query = Record<string, string | number | undefined>;

/**
 * Countersign is a client of one server as one token's holder. Every
 * method resolves with the answer's body and rejects with a
 * CountersignError for an error answer (or the fetch's own error when the
 * server could not be reached).
 */
export class Countersign {
  readonly baseUrl: string;
  private readonly token: string;
  private readonly fetchFn: Fetch;

  constructor(options: ClientOptions) {
    if (!options || typeof options.baseUrl !== "string" || options.baseUrl === "") {
      throw new TypeError("Countersign: baseUrl is required");
    }
    if (typeof options.token !== "string" || options.token === "") {
      throw new TypeError("Countersign: token is required");
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    const f = options.fetch ?? (globalThis.fetch as Fetch | undefined);
    if (typeof f !== "function") {
      throw new TypeError("Countersign: no fetch: pass options.fetch");
    }
    // Called unbound, a browser's fetch throws "Illegal invocation".
    this.fetchFn = options.fetch ? options.fetch : (input, init) => globalThis.fetch(input, init);
  }

  /** call asks for an action: POST /v1/calls. */
  call(body: CallRequest, options?: RequestOptions): Promise<CallResponse> {
    return this.json("POST", "/v1/calls", { body, ...options });
  }

  /** getProposal reads one proposal: GET /v1/proposals/{id}. */
  getProposal(id: string, options?: RequestOptions): Promise<Proposal> {
    return this.json("GET", `/v1/proposals/${seg(id)}`, options);
  }

  /**
   * waitForProposal long-polls a proposal (GET /v1/proposals/{id}?wait_seconds=N)
   * until it is terminal or reconciling, or timeoutSeconds (default 25) have
   * passed, and resolves with it as it then stands.
   */
  async waitForProposal(id: string, options: WaitOptions = {}): Promise<Proposal> {
    const total = options.timeoutSeconds ?? 25;
    if (!(total >= 0) || !Number.isFinite(total)) {
      throw new TypeError("waitForProposal: timeoutSeconds must be a finite number >= 0");
    }
    const deadline = Date.now() + total * 1000;
    for (;;) {
      const left = Math.max(0, (deadline - Date.now()) / 1000);
      const wait = Math.min(MAX_WAIT_SECONDS, Math.ceil(left));
      const p = await this.json<Proposal>("GET", `/v1/proposals/${seg(id)}`, {
        query: { wait_seconds: wait },
        signal: options.signal,
      });
      if (SETTLED.has(p.status) || Date.now() >= deadline || wait === 0) return p;
    }
  }

  /**
   * listProposals lists the proposals the caller may see, newest first,
   * following every page: GET /v1/proposals, then each page's
   * X-Action-Proposals-Next (decoded with decodeURIComponent) as after.
   */
  async listProposals(params: ListProposalsParams = {}, options?: RequestOptions): Promise<Proposal[]> {
    const status = Array.isArray(params.status) ? params.status.join(",") : params.status;
    return this.allPages(
      "/v1/proposals",
      { status: status || undefined, action: params.action, thread_id: params.thread_id, limit: params.limit },
      options,
    );
  }

  /** listThreadProposals lists one thread's proposals, every page: GET /v1/threads/{id}/proposals. */
  listThreadProposals(threadId: string, params: { limit?: number } = {}, options?: RequestOptions): Promise<Proposal[]> {
    return this.allPages(`/v1/threads/${seg(threadId)}/proposals`, { limit: params.limit }, options);
  }

  /** approve approves a proposal: POST /v1/proposals/{id}/approve. */
  approve(id: string, body: ApproveRequest = {}, options?: RequestOptions): Promise<DecisionResponse> {
    return this.json("POST", `/v1/proposals/${seg(id)}/approve`, { body, ...options });
  }

  /** reject rejects a proposal: POST /v1/proposals/{id}/reject. */
  reject(id: string, body: ReasonRequest = {}, options?: RequestOptions): Promise<DecisionResponse> {
    return this.json("POST", `/v1/proposals/${seg(id)}/reject`, { body, ...options });
  }

  /** cancel withdraws a pending proposal (its requester only): POST /v1/proposals/{id}/cancel. */
  cancel(id: string, body: ReasonRequest = {}, options?: RequestOptions): Promise<DecisionResponse> {
    return this.json("POST", `/v1/proposals/${seg(id)}/cancel`, { body, ...options });
  }

  /** resolve settles a reconciling or unknown proposal (role operator): POST /v1/proposals/{id}/resolve. */
  resolve(id: string, body: ResolveRequest, options?: RequestOptions): Promise<DecisionResponse> {
    return this.json("POST", `/v1/proposals/${seg(id)}/resolve`, { body, ...options });
  }

  /**
   * settle records the outcome of a caller-executed action run under the
   * lease its call's execute answer gave: POST /v1/proposals/{id}/settle.
   * status conflict (an answer, not an error): the lease was lost and
   * nothing was recorded.
   */
  settle(id: string, body: SettleRequest, options?: RequestOptions): Promise<LeaseResponse> {
    return this.json("POST", `/v1/proposals/${seg(id)}/settle`, { body, ...options });
  }

  /**
   * renew extends a caller's lease while the action runs: POST
   * /v1/proposals/{id}/renew. applied carries the lease (same token, later
   * expires_at); conflict: the lease was lost.
   */
  renew(id: string, body: RenewRequest, options?: RequestOptions): Promise<LeaseResponse> {
    return this.json("POST", `/v1/proposals/${seg(id)}/renew`, { body, ...options });
  }

  /** getThread reads a thread, its messages (oldest first) and runs: GET /v1/threads/{id}. */
  getThread(threadId: string, options?: RequestOptions): Promise<ThreadResponse> {
    return this.json("GET", `/v1/threads/${seg(threadId)}`, options);
  }

  /**
   * postMessage posts a user message: POST /v1/threads/{id}/messages, as
   * JSON (not the AG-UI stream). The answer is a text decision's result, a
   * finished or parked run with its messages, or the stored message (202).
   */
  postMessage(threadId: string, body: MessageRequest, options?: RequestOptions): Promise<MessageResponse> {
    return this.json("POST", `/v1/threads/${seg(threadId)}/messages`, { body, ...options });
  }

  /** getRun reads a run: GET /v1/threads/{id}/runs/{run_id}. */
  async getRun(threadId: string, runId: string, options?: RequestOptions): Promise<Run> {
    const r = await this.json<{ run: Run }>("GET", `/v1/threads/${seg(threadId)}/runs/${seg(runId)}`, options);
    return r.run;
  }

  /** cancelRun cancels a run (the thread's owner): POST /v1/threads/{id}/runs/{run_id}/cancel. */
  async cancelRun(threadId: string, runId: string, body: ReasonRequest = {}, options?: RequestOptions): Promise<Run> {
    const r = await this.json<{ run: Run }>("POST", `/v1/threads/${seg(threadId)}/runs/${seg(runId)}/cancel`, {
      body,
      ...options,
    });
    return r.run;
  }

  /**
   * events follows GET /v1/events: an async iterator of the proposal
   * events the caller may see, reconnecting after a dropped connection
   * with Last-Event-ID, each event once. Break out of the loop, or abort
   * options.signal, to close it.
   */
  events(options: EventsOptions = {}): AsyncGenerator<ProposalEvent, void, undefined> {
    return streamEvents(
      (init) => this.fetchFn(this.baseUrl + "/v1/events", { ...init, headers: { ...this.auth(), ...init.headers } }),
      options,
    );
  }

  /** watchProposals polls a thread's proposals while any is unsettled (see Watch). */
  watchProposals(threadId: string, options: WatchOptions = {}): Watch {
    return watchProposals(this, threadId, options);
  }

  /** request sends one request and returns the answer, throwing a CountersignError for an error answer. */
  async request(
    method: string,
    path: string,
    options: { query?: Query; body?: unknown; signal?: AbortSignal | undefined } = {},
  ): Promise<Response> {
    let url = this.baseUrl + path;
    if (options.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(options.query)) {
        if (v !== undefined) q.set(k, String(v));
      }
      const s = q.toString();
      if (s) url += "?" + s;
    }
    const headers: Record<string, string> = { ...this.auth(), Accept: "application/json" };
    const init: RequestInit = { method, headers };
    if (options.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.body);
    }
    if (options.signal) init.signal = options.signal;
    const res = await this.fetchFn(url, init);
    if (!res.ok) throw await CountersignError.fromResponse(res);
    return res;
  }

  private async json<T>(
    method: string,
    path: string,
    options?: { query?: Query; body?: unknown; signal?: AbortSignal | undefined },
  ): Promise<T> {
    const res = await this.request(method, path, options);
    return readJSON<T>(res);
  }

  private async allPages(path: string, query: Query, options?: RequestOptions): Promise<Proposal[]> {
    const all: Proposal[] = [];
    let after: string | undefined;
    for (;;) {
      const res = await this.request("GET", path, { query: { ...query, after }, signal: options?.signal });
      const page = await readJSON<{ proposals: Proposal[] }>(res);
      if (!page || !Array.isArray(page.proposals)) {
        throw new CountersignError(res.status, "INVALID_RESPONSE", `GET ${path}: no proposals in the answer`);
      }
      all.push(...page.proposals);
      const next = res.headers.get(NEXT_HEADER);
      if (!next) return all;
      let decoded: string;
      try {
        decoded = decodeURIComponent(next);
      } catch {
        throw new CountersignError(res.status, "INVALID_RESPONSE", `${NEXT_HEADER} is not URI-encoded: ${next}`);
      }
      if (decoded === after) {
        // A server that hands back the cursor it was given would loop forever.
        throw new CountersignError(res.status, "INVALID_RESPONSE", `${NEXT_HEADER} repeats the cursor sent`);
      }
      after = decoded;
    }
  }

  private auth(): Record<string, string> {
    return { Authorization: `Bearer ${this.token}` };
  }
}

/** createClient is new Countersign(options). */
export function createClient(options: ClientOptions): Countersign {
  return new Countersign(options);
}

/** seg escapes one path segment. */
function seg(s: string): string {
  if (typeof s !== "string" || s === "") throw new TypeError("an id must be a non-empty string");
  return encodeURIComponent(s);
}

async function readJSON<T>(res: Response): Promise<T> {
  const text = await res.text();
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new CountersignError(res.status, "INVALID_RESPONSE", `the answer is not JSON: ${text.slice(0, 200)}`);
  }
}
