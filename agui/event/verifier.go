package event

import (
	"fmt"
	"slices"
	"strings"
)

// Verifier checks a stream of events against AG-UI 1.0's sequencing rules,
// one event at a time, as a producer must keep them:
//
//   - The stream begins with RUN_STARTED or RUN_ERROR.
//   - RUN_STARTED opens a run only when none is active; it declares the
//     producer's protocol version; its runId is not one the stream already
//     used on the thread.
//   - Every other event comes inside an active run, except that RUN_ERROR
//     may follow RUN_FINISHED (a failure that surfaced late). After
//     RUN_ERROR only RUN_STARTED may come.
//   - A text message (by messageId) and a tool call (by toolCallId) are
//     opened by their START, extended and closed only while open, and never
//     opened while already open; a closed one may be reopened. A step (by
//     stepName) is finished only while open and not opened twice.
//   - RUN_FINISHED comes with nothing open: no message, tool call or step.
//   - An outcome is one of the schema's three shapes: a success carries no
//     interrupts, and its pendingToolCallIds, when present, are exactly the
//     run's tool calls that got no TOOL_CALL_RESULT, in the order they were
//     made; an interrupt carries at least one interrupt, with ids unique in
//     the run; a cancellation carries neither, nor a result.
//
// And Countersign's own rules for what it sends:
//
//   - RUN_FINISHED names the threadId and runId of the RUN_STARTED it
//     closes (both echo the run input).
//   - No TEXT_MESSAGE_CONTENT has an empty delta.
//   - A TOOL_CALL_RESULT does not answer a call that is still open: its
//     arguments are not complete.
//   - A MESSAGES_SNAPSHOT's messages have ids and known roles; tool calls
//     ride only on assistant messages and a tool message names its call.
//
// A Verifier is not safe for concurrent use; the zero value is ready. A
// rejected event leaves it unchanged, so it can go on checking.
type Verifier struct {
	n     int // events accepted so far
	phase phase

	threadID, runID string
	usedRuns        map[string][]string // thread → runIds its runs had on this stream

	messages  map[string]bool // open text messages
	toolCalls map[string]bool // open tool calls
	steps     map[string]bool // open steps
	called    []string        // the run's tool calls, in the order first started
	answered  map[string]bool // the run's tool calls a TOOL_CALL_RESULT answered
}

// phase is where the stream stands between runs.
type phase int

const (
	phaseNone     phase = iota // nothing yet
	phaseActive                // a run is open
	phaseFinished              // the last run ended with RUN_FINISHED
	phaseFailed                // the last run ended with RUN_ERROR
)

// SequenceError is an event the Verifier rejected.
type SequenceError struct {
	// Index is the event's position in the stream, from 0.
	Index int
	// Type is the event's type.
	Type string
	// Reason says which rule it breaks.
	Reason string
}

func (e *SequenceError) Error() string {
	return fmt.Sprintf("AG-UI event %d (%s): %s", e.Index, e.Type, e.Reason)
}

// Verify checks a whole stream: each event in order, then that it ends
// with no run open.
func Verify(events []Event) error {
	var v Verifier
	for _, e := range events {
		if err := v.Check(e); err != nil {
			return err
		}
	}
	return v.End()
}

// Check reports whether e may come next, as a *SequenceError when it may
// not, and records it when it may.
func (v *Verifier) Check(e Event) error {
	if isNil(e) {
		return v.fail("<nil>", "a nil event")
	}
	if reason := v.check(e); reason != "" {
		return v.fail(e.Type(), reason)
	}
	v.apply(e)
	v.n++
	return nil
}

// End reports whether the stream may end here: not while a run is open,
// for a stream that stops inside a run is a truncated run.
func (v *Verifier) End() error {
	switch v.phase {
	case phaseNone:
		return &SequenceError{Index: v.n, Type: "end of stream", Reason: "the stream carries no event"}
	case phaseActive:
		return &SequenceError{Index: v.n, Type: "end of stream", Reason: fmt.Sprintf("run %q is still open: RUN_FINISHED or RUN_ERROR must close it", v.runID)}
	}
	return nil
}

func (v *Verifier) fail(typ, reason string) error {
	return &SequenceError{Index: v.n, Type: typ, Reason: reason}
}

// check returns the rule e breaks, or "".
func (v *Verifier) check(e Event) string {
	if r := v.checkLifecycle(e); r != "" {
		return r
	}
	switch e := e.(type) {
	case *RunStarted:
		if e.ProtocolVersion == "" {
			return "RUN_STARTED must declare the producer's protocolVersion (" + ProtocolVersion + ")"
		}
		if slices.Contains(v.usedRuns[e.ThreadID], e.RunID) {
			return fmt.Sprintf("runId %q was already used for a run on thread %q", e.RunID, e.ThreadID)
		}
	case *RunFinished:
		return v.checkFinish(e)
	case *TextMessageStart:
		if v.messages[e.MessageID] {
			return fmt.Sprintf("text message %q is already open", e.MessageID)
		}
		if e.Role != "" && !slices.Contains(textRoles, e.Role) {
			return fmt.Sprintf("role %q is not a text message's (developer, system, assistant or user)", e.Role)
		}
	case *TextMessageContent:
		if !v.messages[e.MessageID] {
			return fmt.Sprintf("no open text message %q: TEXT_MESSAGE_START comes first", e.MessageID)
		}
		if e.Delta == "" {
			return "an empty delta (Countersign sends none)"
		}
	case *TextMessageEnd:
		if !v.messages[e.MessageID] {
			return fmt.Sprintf("no open text message %q to end", e.MessageID)
		}
	case *ToolCallStart:
		if v.toolCalls[e.ToolCallID] {
			return fmt.Sprintf("tool call %q is already open", e.ToolCallID)
		}
	case *ToolCallArgs:
		if !v.toolCalls[e.ToolCallID] {
			return fmt.Sprintf("no open tool call %q: TOOL_CALL_START comes first", e.ToolCallID)
		}
	case *ToolCallEnd:
		if !v.toolCalls[e.ToolCallID] {
			return fmt.Sprintf("no open tool call %q to end", e.ToolCallID)
		}
	case *ToolCallResult:
		if v.toolCalls[e.ToolCallID] {
			return fmt.Sprintf("tool call %q is still open: its result comes after TOOL_CALL_END", e.ToolCallID)
		}
	case *StepStarted:
		if v.steps[e.StepName] {
			return fmt.Sprintf("step %q is already open", e.StepName)
		}
	case *StepFinished:
		if !v.steps[e.StepName] {
			return fmt.Sprintf("step %q was not started", e.StepName)
		}
	case *MessagesSnapshot:
		return checkMessages(e.Messages)
	}
	return ""
}

// checkLifecycle returns the rule e breaks by where it comes in the run
// lifecycle, or "".
func (v *Verifier) checkLifecycle(e Event) string {
	typ := e.Type()
	switch v.phase {
	case phaseNone:
		if typ != TypeRunStarted && typ != TypeRunError {
			return "the stream must begin with RUN_STARTED (or RUN_ERROR)"
		}
	case phaseActive:
		if typ == TypeRunStarted {
			return fmt.Sprintf("run %q is still active: it must be closed before another starts", v.runID)
		}
	case phaseFinished:
		if typ != TypeRunStarted && typ != TypeRunError {
			return fmt.Sprintf("run %q has finished: only RUN_STARTED (a new run) or RUN_ERROR (a late failure) may follow", v.runID)
		}
	case phaseFailed:
		if typ != TypeRunStarted {
			return "the run has ended with RUN_ERROR: only RUN_STARTED (a new run) may follow"
		}
	}
	return ""
}

// checkFinish returns the rule a RUN_FINISHED breaks, or "".
func (v *Verifier) checkFinish(e *RunFinished) string {
	if e.ThreadID != v.threadID || e.RunID != v.runID {
		return fmt.Sprintf("it names thread %q run %q, but the open run is thread %q run %q", e.ThreadID, e.RunID, v.threadID, v.runID)
	}
	if open := openIDs(v.messages); open != "" {
		return "text messages still open: " + open
	}
	if open := openIDs(v.toolCalls); open != "" {
		return "tool calls still open: " + open
	}
	if open := openIDs(v.steps); open != "" {
		return "steps still open: " + open
	}
	o := e.Outcome
	if o == nil {
		return ""
	}
	switch o.Type {
	case OutcomeSuccess:
		if len(o.Interrupts) > 0 {
			return "a success outcome carries no interrupts"
		}
		if len(o.PendingToolCallIDs) > 0 {
			var pending []string
			for _, id := range v.called {
				if !v.answered[id] {
					pending = append(pending, id)
				}
			}
			if !slices.Equal(o.PendingToolCallIDs, pending) {
				return fmt.Sprintf("pendingToolCallIds %q, but the run's unanswered tool calls are %q", o.PendingToolCallIDs, pending)
			}
		}
	case OutcomeInterrupt:
		if len(o.Interrupts) == 0 {
			return "an interrupt outcome carries at least one interrupt"
		}
		if len(o.PendingToolCallIDs) > 0 {
			return "an interrupt outcome carries no pendingToolCallIds"
		}
		seen := make(map[string]bool, len(o.Interrupts))
		for _, in := range o.Interrupts {
			if seen[in.ID] {
				return fmt.Sprintf("interrupt id %q appears twice", in.ID)
			}
			seen[in.ID] = true
		}
	case OutcomeCancelled:
		if len(o.Interrupts) > 0 || len(o.PendingToolCallIDs) > 0 {
			return "a cancelled outcome carries neither interrupts nor pendingToolCallIds"
		}
		if e.Result != nil {
			return "a cancelled run has no result"
		}
	default:
		return fmt.Sprintf("outcome type %q is not success, interrupt or cancelled", o.Type)
	}
	return ""
}

// textRoles are the roles a text message may take: all but RoleTool, whose
// messages are TOOL_CALL_RESULTs.
var textRoles = []string{RoleDeveloper, RoleSystem, RoleAssistant, RoleUser}

// checkMessages returns the rule a snapshot's messages break, or "".
func checkMessages(msgs []Message) string {
	for i, m := range msgs {
		switch {
		case m.ID == "":
			return fmt.Sprintf("message %d has no id", i)
		case m.Role != RoleTool && !slices.Contains(textRoles, m.Role):
			return fmt.Sprintf("message %q: unknown role %q", m.ID, m.Role)
		case len(m.ToolCalls) > 0 && m.Role != RoleAssistant:
			return fmt.Sprintf("message %q: only an assistant message carries tool calls", m.ID)
		case m.Role == RoleTool && m.ToolCallID == "":
			return fmt.Sprintf("tool message %q names no toolCallId", m.ID)
		case m.Role != RoleTool && (m.ToolCallID != "" || m.Error != ""):
			return fmt.Sprintf("message %q: toolCallId and error belong to tool messages", m.ID)
		}
	}
	return ""
}

// apply records an accepted event.
func (v *Verifier) apply(e Event) {
	switch e := e.(type) {
	case *RunStarted:
		v.phase = phaseActive
		v.threadID, v.runID = e.ThreadID, e.RunID
		if v.usedRuns == nil {
			v.usedRuns = make(map[string][]string)
		}
		v.usedRuns[e.ThreadID] = append(v.usedRuns[e.ThreadID], e.RunID)
		// What a run opened does not cross into the next.
		v.messages, v.toolCalls, v.steps = map[string]bool{}, map[string]bool{}, map[string]bool{}
		v.called, v.answered = nil, map[string]bool{}
	case *RunFinished:
		v.phase = phaseFinished
	case *RunError:
		v.phase = phaseFailed
	case *TextMessageStart:
		v.messages[e.MessageID] = true
	case *TextMessageEnd:
		delete(v.messages, e.MessageID)
	case *ToolCallStart:
		v.toolCalls[e.ToolCallID] = true
		if !slices.Contains(v.called, e.ToolCallID) {
			v.called = append(v.called, e.ToolCallID)
		}
	case *ToolCallEnd:
		delete(v.toolCalls, e.ToolCallID)
	case *ToolCallResult:
		v.answered[e.ToolCallID] = true
	case *StepStarted:
		v.steps[e.StepName] = true
	case *StepFinished:
		delete(v.steps, e.StepName)
	}
}

// openIDs lists the ids of set, sorted, or "" when it is empty.
func openIDs(set map[string]bool) string {
	if len(set) == 0 {
		return ""
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, fmt.Sprintf("%q", id))
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}
