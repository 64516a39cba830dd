package event

import (
	"encoding/json"
	"time"
)

// RunStarted opens a run. A stream begins with it (or with RUN_ERROR, for a
// run that failed before it began).
type RunStarted struct {
	// ThreadID and RunID are the conversation and the run. Countersign
	// echoes the run input's threadId and runId.
	ThreadID string `json:"threadId"`
	RunID    string `json:"runId"`
	// ParentRunID names the run that spawned this one, if any.
	ParentRunID string `json:"parentRunId,omitempty"`
	// ProtocolVersion is the version the producer speaks: a 1.0 producer
	// must declare it, so set it to ProtocolVersion.
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Timestamp is when the event was made, in milliseconds since the Unix
	// epoch (time.Time.UnixMilli); zero leaves it out. Informational only:
	// arrival order is the protocol's order.
	Timestamp int64 `json:"timestamp,omitempty"`
}

// RunFinished closes a run that did not fail.
type RunFinished struct {
	// ThreadID and RunID are those of the RUN_STARTED it closes.
	ThreadID string `json:"threadId"`
	RunID    string `json:"runId"`
	// Result is the run's return value, any JSON value; nil leaves it out.
	Result any `json:"result,omitempty"`
	// Outcome says why the run ended; nil means success.
	Outcome   *Outcome `json:"outcome,omitempty"`
	Timestamp int64    `json:"timestamp,omitempty"`
}

// The outcomes of a run (Outcome.Type).
const (
	// OutcomeSuccess: the run completed. It may have left frontend tool
	// calls unanswered (Outcome.PendingToolCallIDs).
	OutcomeSuccess = "success"
	// OutcomeInterrupt: the run stopped to ask for something (an approval);
	// the next run on the thread answers it with resume entries.
	OutcomeInterrupt = "interrupt"
	// OutcomeCancelled: the run was stopped on purpose before it completed,
	// and did not fail.
	OutcomeCancelled = "cancelled"
)

// Outcome is why a run ended: one of three closed shapes, told apart by
// Type. A success carries only PendingToolCallIDs, an interrupt only
// Interrupts (at least one), a cancellation neither; the Verifier holds
// events to that.
type Outcome struct {
	Type string `json:"type"`
	// PendingToolCallIDs names, on a success, the tool calls the run started
	// and left unanswered (no TOOL_CALL_RESULT), in the order they were made:
	// the frontend tools whose results arrive as tool messages of the next
	// run. Empty means the producer names none.
	PendingToolCallIDs []string `json:"pendingToolCallIds,omitempty"`
	// Interrupts are, on an interrupt, what the run waits for.
	Interrupts []Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is something a run needs from outside before it can go on. In
// Countersign it is a proposal awaiting a decision: ID is the proposal's id,
// Reason "tool_call", ToolCallID the call it gates.
type Interrupt struct {
	// ID identifies the interrupt within the run; a resume entry answers it
	// by this id.
	ID string `json:"id"`
	// Reason is why the run stopped, an open string.
	Reason string `json:"reason"`
	// Message is a prompt for whoever answers.
	Message string `json:"message,omitempty"`
	// ToolCallID is the tool call an approval concerns.
	ToolCallID string `json:"toolCallId,omitempty"`
	// ResponseSchema is the JSON Schema of the answer the interrupt expects.
	ResponseSchema map[string]any `json:"responseSchema,omitempty"`
	// ExpiresAt is when the interrupt stops being answerable; the zero time
	// leaves it out. It is sent as RFC 3339, the ISO 8601 form consumers
	// parse.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Metadata is extra information, open by key.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// RunError ends a run that failed: before it began (as the stream's first
// event), while it ran, or after RUN_FINISHED when a failure surfaced late.
type RunError struct {
	// Message says what went wrong, for a person.
	Message string `json:"message"`
	// Code is machine-readable, an open string: Countersign sends its API
	// error codes (FORBIDDEN, INTERRUPT_EXPIRED, INVALID_RESUME, …).
	Code      string `json:"code,omitempty"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// StepStarted opens a named step of a run, for a UI that shows progress.
type StepStarted struct {
	StepName  string `json:"stepName"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// StepFinished closes the step of the same name.
type StepFinished struct {
	StepName  string `json:"stepName"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// Type returns "RUN_STARTED".
func (*RunStarted) Type() string { return TypeRunStarted }

// Type returns "RUN_FINISHED".
func (*RunFinished) Type() string { return TypeRunFinished }

// Type returns "RUN_ERROR".
func (*RunError) Type() string { return TypeRunError }

// Type returns "STEP_STARTED".
func (*StepStarted) Type() string { return TypeStepStarted }

// Type returns "STEP_FINISHED".
func (*StepFinished) Type() string { return TypeStepFinished }

func (*RunStarted) event()   {}
func (*RunFinished) event()  {}
func (*RunError) event()     {}
func (*StepStarted) event()  {}
func (*StepFinished) event() {}

// MarshalJSON writes the event with its "type".
func (e RunStarted) MarshalJSON() ([]byte, error) {
	type fields RunStarted
	b, err := json.Marshal(fields(e))
	return withType(TypeRunStarted, b, err)
}

// MarshalJSON writes the event with its "type".
func (e RunFinished) MarshalJSON() ([]byte, error) {
	type fields RunFinished
	b, err := json.Marshal(fields(e))
	return withType(TypeRunFinished, b, err)
}

// MarshalJSON writes the event with its "type".
func (e RunError) MarshalJSON() ([]byte, error) {
	type fields RunError
	b, err := json.Marshal(fields(e))
	return withType(TypeRunError, b, err)
}

// MarshalJSON writes the event with its "type".
func (e StepStarted) MarshalJSON() ([]byte, error) {
	type fields StepStarted
	b, err := json.Marshal(fields(e))
	return withType(TypeStepStarted, b, err)
}

// MarshalJSON writes the event with its "type".
func (e StepFinished) MarshalJSON() ([]byte, error) {
	type fields StepFinished
	b, err := json.Marshal(fields(e))
	return withType(TypeStepFinished, b, err)
}
