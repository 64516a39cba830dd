// The API's records, named: aliases of the types openapi-typescript
// generated from the served OpenAPI document (schema.d.ts).

import type { components } from "./schema.js";

type Schemas = components["schemas"];

export type Proposal = Schemas["Proposal"];
export type ProposalStatus = Proposal["status"];
export type Outcome = Schemas["Outcome"];
export type Decision = Schemas["Decision"];
export type CallRequest = Schemas["CallRequest"];
export type CallResponse = Schemas["CallResponse"];
export type ApproveRequest = Schemas["ApproveRequest"];
export type ReasonRequest = Schemas["ReasonRequest"];
export type ResolveRequest = Schemas["ResolveRequest"];
export type DecisionResponse = Schemas["DecisionResponse"];
export type Thread = Schemas["Thread"];
export type Message = Schemas["Message"];
export type ThreadResponse = Schemas["ThreadResponse"];
export type Run = Schemas["Run"];
export type MessageRequest = Schemas["MessageRequest"];
export type MessageResponse = Schemas["MessageResponse"];
export type AuditEvent = Schemas["Event"];
export type Lease = Schemas["Lease"];
export type CallExecute = Schemas["CallExecute"];
export type CallExecuting = Schemas["CallExecuting"];
export type SettleRequest = Schemas["SettleRequest"];
export type RenewRequest = Schemas["RenewRequest"];
export type LeaseResponse = Schemas["LeaseResponse"];

/** The names of GET /v1/events' events. */
export type EventName =
  | "proposal.created"
  | "proposal.decided"
  | "proposal.settled"
  | "proposal.expired"
  | "proposal.superseded";
