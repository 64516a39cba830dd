package event

import (
	"errors"
	"strings"
	"testing"
)

// Short constructors, so that a sequence reads as a stream.
func started(thread, run string) *RunStarted {
	return &RunStarted{ThreadID: thread, RunID: run, ProtocolVersion: ProtocolVersion}
}
func finished(thread, run string, o *Outcome) *RunFinished {
	return &RunFinished{ThreadID: thread, RunID: run, Outcome: o}
}
func runError(code string) *RunError { return &RunError{Message: "it failed", Code: code} }
func msgStart(id string) *TextMessageStart {
	return &TextMessageStart{MessageID: id, Role: RoleAssistant}
}
func msgText(id, d string) *TextMessageContent { return &TextMessageContent{MessageID: id, Delta: d} }
func msgEnd(id string) *TextMessageEnd         { return &TextMessageEnd{MessageID: id} }
func callStart(id string) *ToolCallStart {
	return &ToolCallStart{ToolCallID: id, ToolCallName: "payments.refund"}
}
func callArgs(id, d string) *ToolCallArgs { return &ToolCallArgs{ToolCallID: id, Delta: d} }
func callEnd(id string) *ToolCallEnd      { return &ToolCallEnd{ToolCallID: id} }
func result(msg, call string) *ToolCallResult {
	return &ToolCallResult{MessageID: msg, ToolCallID: call, Content: `{"ok":true}`}
}
func interrupted(ids ...string) *Outcome {
	o := &Outcome{Type: OutcomeInterrupt}
	for _, id := range ids {
		o.Interrupts = append(o.Interrupts, Interrupt{ID: id, Reason: "tool_call"})
	}
	return o
}
func pending(ids ...string) *Outcome { return &Outcome{Type: OutcomeSuccess, PendingToolCallIDs: ids} }

// call is a whole tool call: start, arguments, end.
func call(id string) []Event {
	return []Event{callStart(id), callArgs(id, `{"amount":20}`), callEnd(id)}
}

// text is a whole text message.
func text(id string) []Event {
	return []Event{msgStart(id), msgText(id, "Hello"), msgText(id, ", world."), msgEnd(id)}
}

// seq joins events and sequences of events into one stream.
func seq(parts ...any) []Event {
	var out []Event
	for _, p := range parts {
		switch p := p.(type) {
		case nil:
			out = append(out, nil)
		case Event:
			out = append(out, p)
		case []Event:
			out = append(out, p...)
		default:
			panic("seq: not an event")
		}
	}
	return out
}

func TestVerifyValid(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		events []Event
	}{
		{"text", seq(started("t1", "r1"), text("m1"), finished("t1", "r1", nil))},
		{"tool call run at once", seq(started("t1", "r1"), text("m1"), call("c1"), result("m2", "c1"), text("m3"), finished("t1", "r1", &Outcome{Type: OutcomeSuccess}))},
		{"interrupt, then the resume on the same stream", seq(
			started("t1", "r1"), text("m1"), call("c1"), finished("t1", "r1", interrupted("prp_1")),
			started("t1", "r2"), result("m2", "c1"), text("m3"), finished("t1", "r2", nil))},
		{"two interrupts", seq(started("t1", "r1"), call("c1"), call("c2"), finished("t1", "r1", interrupted("prp_1", "prp_2")))},
		{"resume answering a call of an earlier run", seq(started("t1", "r2"), result("m2", "c1"), finished("t1", "r2", nil))},
		{"client tools left pending", seq(started("t1", "r1"), call("c1"), result("m2", "c1"), call("c2"), call("c3"), finished("t1", "r1", pending("c2", "c3")))},
		{"pending calls not named", seq(started("t1", "r1"), call("c2"), finished("t1", "r1", &Outcome{Type: OutcomeSuccess}))},
		{"pending call reopened counts once", seq(started("t1", "r1"), call("c2"), call("c2"), finished("t1", "r1", pending("c2")))},
		{"text decision", seq(started("t1", "r1"), &Custom{Name: CustomActionProposalDecision, Value: map[string]any{"threadId": "t1"}}, text("m1"), finished("t1", "r1", nil))},
		{"cancelled", seq(started("t1", "r1"), text("m1"), finished("t1", "r1", &Outcome{Type: OutcomeCancelled}))},
		{"RUN_ERROR first", seq(runError("FORBIDDEN"))},
		{"RUN_ERROR ends what is open", seq(started("t1", "r1"), msgStart("m1"), callStart("c1"), &StepStarted{StepName: "s"}, runError("INTERNAL"))},
		{"late RUN_ERROR", seq(started("t1", "r1"), finished("t1", "r1", nil), runError("INTERNAL"))},
		{"a new run after RUN_ERROR", seq(started("t1", "r1"), msgStart("m1"), runError("INTERNAL"), started("t1", "r2"), text("m1"), finished("t1", "r2", nil))},
		{"same runId on another thread", seq(started("t1", "r1"), finished("t1", "r1", nil), started("t2", "r1"), finished("t2", "r1", nil))},
		{"reopened message and call", seq(started("t1", "r1"), text("m1"), msgStart("m1"), msgText("m1", "more"), msgEnd("m1"), call("c1"), callStart("c1"), callEnd("c1"), finished("t1", "r1", nil))},
		{"interleaved", seq(started("t1", "r1"), msgStart("m1"), callStart("c1"), msgText("m1", "a"), callArgs("c1", "{}"), msgEnd("m1"), callEnd("c1"), finished("t1", "r1", nil))},
		{"empty tool arguments", seq(started("t1", "r1"), callStart("c1"), callArgs("c1", ""), callEnd("c1"), finished("t1", "r1", nil))},
		{"overlapping steps", seq(started("t1", "r1"), &StepStarted{StepName: "a"}, &StepStarted{StepName: "b"}, &StepFinished{StepName: "a"}, &StepStarted{StepName: "a"}, &StepFinished{StepName: "b"}, &StepFinished{StepName: "a"}, finished("t1", "r1", nil))},
		{"standalone events", seq(started("t1", "r1"), &StateSnapshot{}, &Raw{Event: 1}, &MessagesSnapshot{Messages: []Message{
			{ID: "m0", Role: RoleUser, Content: "hi"},
			{ID: "m1", Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1"}}},
			{ID: "m2", Role: RoleTool, ToolCallID: "c1", Error: "failed"},
		}}, finished("t1", "r1", nil))},
		{"result and outcome", seq(started("t1", "r1"), &RunFinished{ThreadID: "t1", RunID: "r1", Result: "done", Outcome: pending()})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if err := Verify(c.events); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestVerifyViolations(t *testing.T) {
	t.Parallel()
	run := func(events ...any) []Event { return seq(append([]any{started("t1", "r1")}, events...)...) }
	cases := []struct {
		name   string
		events []Event
		index  int    // of the rejected event
		reason string // a part of the reason
	}{
		{"text first", seq(msgStart("m1")), 0, "must begin with RUN_STARTED"},
		{"custom first", seq(&Custom{Name: "x"}), 0, "must begin with RUN_STARTED"},
		{"no protocol version", seq(&RunStarted{ThreadID: "t1", RunID: "r1"}), 0, "protocolVersion"},
		{"nested RUN_STARTED", run(started("t1", "r2")), 1, `run "r1" is still active`},
		{"event after RUN_FINISHED", run(finished("t1", "r1", nil), msgStart("m1")), 2, "has finished"},
		{"RUN_FINISHED twice", run(finished("t1", "r1", nil), finished("t1", "r1", nil)), 2, "has finished"},
		{"RUN_ERROR twice", run(runError("A"), runError("B")), 2, "only RUN_STARTED"},
		{"event after RUN_ERROR", run(runError("A"), msgStart("m1")), 2, "only RUN_STARTED"},
		{"runId reused", run(finished("t1", "r1", nil), started("t1", "r1")), 2, `runId "r1" was already used`},
		{"content without start", run(msgText("m1", "a")), 1, `no open text message "m1"`},
		{"content for another message", run(msgStart("m1"), msgText("m2", "a")), 2, `no open text message "m2"`},
		{"content after end", run(text("m1"), msgText("m1", "a")), 5, `no open text message "m1"`},
		{"end without start", run(msgEnd("m1")), 1, `no open text message "m1" to end`},
		{"start twice", run(msgStart("m1"), msgStart("m1")), 2, `text message "m1" is already open`},
		{"empty text delta", run(msgStart("m1"), msgText("m1", "")), 2, "empty delta"},
		{"text with the tool role", run(&TextMessageStart{MessageID: "m1", Role: RoleTool}), 1, `role "tool"`},
		{"text with an unknown role", run(&TextMessageStart{MessageID: "m1", Role: "bot"}), 1, `role "bot"`},
		{"args without start", run(callArgs("c1", "{}")), 1, `no open tool call "c1"`},
		{"args after end", run(call("c1"), callArgs("c1", "{}")), 4, `no open tool call "c1"`},
		{"call end without start", run(callEnd("c1")), 1, `no open tool call "c1" to end`},
		{"call started twice", run(callStart("c1"), callStart("c1")), 2, `tool call "c1" is already open`},
		{"result of an open call", run(callStart("c1"), result("m2", "c1")), 2, "still open"},
		{"step finished unstarted", run(&StepFinished{StepName: "s"}), 1, `step "s" was not started`},
		{"step started twice", run(&StepStarted{StepName: "s"}, &StepStarted{StepName: "s"}), 2, `step "s" is already open`},
		{"finish with a message open", run(msgStart("m2"), msgStart("m1"), finished("t1", "r1", nil)), 3, `text messages still open: "m1", "m2"`},
		{"finish with a call open", run(callStart("c1"), finished("t1", "r1", nil)), 2, `tool calls still open: "c1"`},
		{"finish with a step open", run(&StepStarted{StepName: "s"}, finished("t1", "r1", nil)), 2, `steps still open: "s"`},
		{"finish naming another run", run(finished("t1", "r2", nil)), 1, `names thread "t1" run "r2"`},
		{"finish naming another thread", run(finished("t2", "r1", nil)), 1, `names thread "t2" run "r1"`},
		{"unknown outcome", run(finished("t1", "r1", &Outcome{Type: "paused"})), 1, `outcome type "paused"`},
		{"success with interrupts", run(finished("t1", "r1", &Outcome{Type: OutcomeSuccess, Interrupts: []Interrupt{{ID: "p"}}})), 1, "success outcome carries no interrupts"},
		{"pending out of order", run(call("c1"), call("c2"), finished("t1", "r1", pending("c2", "c1"))), 7, "pendingToolCallIds"},
		{"pending names an answered call", run(call("c1"), result("m2", "c1"), call("c2"), finished("t1", "r1", pending("c1", "c2"))), 8, "pendingToolCallIds"},
		{"pending misses a call", run(call("c1"), call("c2"), finished("t1", "r1", pending("c1"))), 7, "pendingToolCallIds"},
		{"pending names an unknown call", run(finished("t1", "r1", pending("c9"))), 1, "pendingToolCallIds"},
		{"interrupt without interrupts", run(finished("t1", "r1", interrupted())), 1, "at least one interrupt"},
		{"interrupt ids twice", run(finished("t1", "r1", interrupted("p1", "p1"))), 1, `interrupt id "p1" appears twice`},
		{"interrupt with pending calls", run(call("c1"), finished("t1", "r1", &Outcome{Type: OutcomeInterrupt, Interrupts: []Interrupt{{ID: "p"}}, PendingToolCallIDs: []string{"c1"}})), 4, "no pendingToolCallIds"},
		{"cancelled with interrupts", run(finished("t1", "r1", &Outcome{Type: OutcomeCancelled, Interrupts: []Interrupt{{ID: "p"}}})), 1, "cancelled outcome"},
		{"cancelled with a result", run(&RunFinished{ThreadID: "t1", RunID: "r1", Result: 1, Outcome: &Outcome{Type: OutcomeCancelled}}), 1, "no result"},
		{"snapshot message without id", run(&MessagesSnapshot{Messages: []Message{{Role: RoleUser}}}), 1, "message 0 has no id"},
		{"snapshot message with an unknown role", run(&MessagesSnapshot{Messages: []Message{{ID: "m", Role: "bot"}}}), 1, `unknown role "bot"`},
		{"snapshot tool calls on a user message", run(&MessagesSnapshot{Messages: []Message{{ID: "m", Role: RoleUser, ToolCalls: []ToolCall{{ID: "c"}}}}}), 1, "only an assistant message"},
		{"snapshot tool message without its call", run(&MessagesSnapshot{Messages: []Message{{ID: "m", Role: RoleTool}}}), 1, "names no toolCallId"},
		{"snapshot toolCallId on an assistant message", run(&MessagesSnapshot{Messages: []Message{{ID: "m", Role: RoleAssistant, ToolCallID: "c"}}}), 1, "belong to tool messages"},
		{"nil event", run(Event(nil)), 1, "nil event"},
		{"nil pointer", run((*TextMessageEnd)(nil)), 1, "nil event"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := Verify(c.events)
			se, ok := errors.AsType[*SequenceError](err)
			if !ok {
				t.Fatalf("Verify: %v, want a *SequenceError", err)
			}
			if se.Index != c.index || !strings.Contains(se.Reason, c.reason) {
				t.Errorf("got %v\nwant event %d, a reason with %q", err, c.index, c.reason)
			}
			if c.index < len(c.events) && c.events[c.index] != nil && !isNil(c.events[c.index]) && se.Type != c.events[c.index].Type() {
				t.Errorf("error names type %s, the event is %s", se.Type, c.events[c.index].Type())
			}
		})
	}
}

func TestVerifierEnd(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		events []Event
		reason string // "" when the stream may end
	}{
		{"empty", nil, "carries no event"},
		{"open run", seq(started("t1", "r1"), text("m1")), `run "r1" is still open`},
		{"finished", seq(started("t1", "r1"), finished("t1", "r1", nil)), ""},
		{"failed", seq(started("t1", "r1"), runError("X")), ""},
		{"a second run open", seq(started("t1", "r1"), finished("t1", "r1", nil), started("t1", "r2")), `run "r2" is still open`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var v Verifier
			for _, e := range c.events {
				if err := v.Check(e); err != nil {
					t.Fatal(err)
				}
			}
			err := v.End()
			switch {
			case c.reason == "" && err != nil:
				t.Errorf("End: %v", err)
			case c.reason != "" && (err == nil || !strings.Contains(err.Error(), c.reason)):
				t.Errorf("End: %v, want %q", err, c.reason)
			}
			if c.reason != "" {
				if se, ok := errors.AsType[*SequenceError](err); !ok || se.Index != len(c.events) {
					t.Errorf("End: %#v, want a *SequenceError at %d", err, len(c.events))
				}
			}
		})
	}
}

// A rejected event changes nothing: the stream goes on as if it had not
// been offered.
func TestVerifierRejectLeavesState(t *testing.T) {
	t.Parallel()
	var v Verifier
	steps := []struct {
		e  Event
		ok bool
	}{
		{msgStart("m1"), false}, // before RUN_STARTED
		{started("t1", "r1"), true},
		{msgStart("m1"), true},
		{msgStart("m1"), false}, // already open
		{msgText("m1", ""), false},
		{msgText("m1", "a"), true},
		{finished("t1", "r1", nil), false}, // m1 open
		{msgEnd("m1"), true},
		{finished("t1", "r2", nil), false}, // another run
		{finished("t1", "r1", nil), true},
	}
	for i, s := range steps {
		err := v.Check(s.e)
		if (err == nil) != s.ok {
			t.Fatalf("step %d (%s): %v, want ok=%v", i, s.e.Type(), err, s.ok)
		}
	}
	if err := v.End(); err != nil {
		t.Error(err)
	}
	// Indexes count the accepted events only.
	err := v.Check(msgStart("m9"))
	if se, ok := errors.AsType[*SequenceError](err); !ok || se.Index != 5 {
		t.Errorf("after 5 accepted events: %v", err)
	}
}
