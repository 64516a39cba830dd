// @countersign/client: a typed client of Countersign's HTTP API on fetch
// alone (Node 20 and browsers). See README.md.

export { Countersign, createClient, NEXT_HEADER } from "./client.js";
export type { ClientOptions, Fetch, ListProposalsParams, RequestOptions, WaitOptions } from "./client.js";
export { CountersignError } from "./errors.js";
export type { ErrorCode } from "./errors.js";
export type { EventsOptions, ProposalEvent } from "./events.js";
export { SSEParser } from "./sse.js";
export type { SSEFrame } from "./sse.js";
export { MAX_BACKOFF_MS, unsettled, watchProposals } from "./watch.js";
export type { FocusTarget, Watch, WatchOptions, WatchSnapshot, WatchSource, WatchTimers } from "./watch.js";
export type * from "./types.js";
export type { components, operations, paths } from "./schema.js";
export {
  Denied,
  Failed,
  GateError,
  InvalidInput,
  LeaseLost,
  NotApplied,
  NotExecuted,
  OutcomeUnknown,
  gateError,
  leaseMillis,
  runUnderLease,
  transient,
} from "./lease.js";
export type { Execution, GateAnswer } from "./lease.js";
