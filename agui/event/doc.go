// Package event encodes the run of an agent as AG-UI 1.0 events over
// server-sent events. It is the one encoder for both places a run is
// streamed: the chat route (POST /v1/threads/{id}/messages with Accept:
// text/event-stream) and the AG-UI endpoint (package agui).
//
// The event structs are written by hand from the protocol's schema, as
// @ag-ui/core 1.0.0 publishes it (the AG-UI Go SDK is a community one, not
// the protocol's). They hold the events Countersign sends and the fields
// it uses; each marshals to the event's exact JSON, "type" first, with an
// optional field left out rather than sent as null. Event is their
// interface.
//
//   - Writer frames each event as "data: {json}\n\n", flushes it, sends
//     heartbeats (": ping") and sets the stream's headers.
//   - Verifier holds a stream to AG-UI's ordering rules and Countersign's
//     own; a Writer runs one when WriterOptions.Verifier is set.
//   - Decode reads a stream back into events, strictly, for tests.
//
// The tests check every event's JSON against golden files and, when Node.js
// and test/clients' npm packages are installed, against @ag-ui/core's own
// validators (test/clients/agui-validate.mjs).
//
// # A Countersign run, event by event
//
// A run answers one user message. The model's reply becomes a text message,
// its tool calls tool calls, each an engine call:
//
//	RUN_STARTED           {threadId, runId, protocolVersion: "1.0"}
//	TEXT_MESSAGE_START    {messageId: m1, role: "assistant"}
//	TEXT_MESSAGE_CONTENT  {messageId: m1, delta: "I'll ask for that refund."}
//	TEXT_MESSAGE_END      {messageId: m1}
//	TOOL_CALL_START       {toolCallId: c1, toolCallName: "payments.refund", parentMessageId: m1}
//	TOOL_CALL_ARGS        {toolCallId: c1, delta: "{\"amount\":20}"}
//	TOOL_CALL_END         {toolCallId: c1}
//
// A call the policy allows runs at once: its result goes to the model,
// which goes on until it answers without calling a tool.
//
//	TOOL_CALL_RESULT      {messageId: m2, toolCallId: c1, content: "{…result…}"}
//	TEXT_MESSAGE_START    {messageId: m3, role: "assistant"}
//	TEXT_MESSAGE_CONTENT  {messageId: m3, delta: "Refunded."}
//	TEXT_MESSAGE_END      {messageId: m3}
//	RUN_FINISHED          {threadId, runId}
//
// A call that waits for a human instead ends the run with an interrupt,
// one per proposal, its id the proposal's:
//
//	RUN_FINISHED          {threadId, runId, outcome: {type: "interrupt", interrupts: [
//	                        {id: prp_…, reason: "tool_call", toolCallId: c1, message, expiresAt,
//	                         responseSchema, metadata: {proposal}}]}}
//
// The client resumes with a new run on the thread whose input answers the
// interrupt. That run begins where the first stopped, with the result of
// the gated call:
//
//	RUN_STARTED           {threadId, runId: r2, protocolVersion: "1.0"}
//	TOOL_CALL_RESULT      {messageId: m4, toolCallId: c1, content: "{…result…}"}
//	TEXT_MESSAGE_START … TEXT_MESSAGE_END
//	RUN_FINISHED          {threadId, runId: r2}
//
// A call of a client's tool is not answered in the stream: the run
// finishes as a success naming it, and the client's result arrives as a
// tool message of the next run.
//
//	RUN_FINISHED          {threadId, runId, outcome: {type: "success", pendingToolCallIds: [c2]}}
//
// A text decision ("yes") is a short run: RUN_STARTED, a CUSTOM named
// countersign.action-proposal-decision, the reply as one assistant text
// message, RUN_FINISHED. A run that fails, or a resume refused, ends with
// RUN_ERROR {message, code}, the code one of Countersign's API error codes
// (FORBIDDEN, INTERRUPT_EXPIRED, INVALID_RESUME).
package event
