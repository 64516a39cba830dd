package event

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the events")

// approvalSchema is the responseSchema of a Countersign approval interrupt.
var approvalSchema = map[string]any{
	"type":     "object",
	"required": []string{"approved"},
	"properties": map[string]any{
		"approved": map[string]any{"type": "boolean"},
		"reason":   map[string]any{"type": "string"},
		"remember": map[string]any{"enum": []string{"run", "thread"}},
	},
}

// goldenCases are one or more events of every type, with every field this
// package defines set in at least one. Their JSON is pinned in
// testdata/golden/<name>.json, and the official-schema test validates each.
var goldenCases = []struct {
	name  string
	event Event
}{
	{"run-started", &RunStarted{ThreadID: "t1", RunID: "run_1", ProtocolVersion: ProtocolVersion}},
	{"run-started-full", &RunStarted{ThreadID: "t1", RunID: "run_2", ParentRunID: "run_1", ProtocolVersion: ProtocolVersion, Timestamp: 1767268800000}},
	{"run-finished", &RunFinished{ThreadID: "t1", RunID: "run_1"}},
	{"run-finished-result", &RunFinished{ThreadID: "t1", RunID: "run_1", Result: map[string]any{"status": "finished"}, Outcome: &Outcome{Type: OutcomeSuccess}, Timestamp: 1767268800000}},
	{"run-finished-interrupt", &RunFinished{ThreadID: "t1", RunID: "run_1", Outcome: &Outcome{
		Type: OutcomeInterrupt,
		Interrupts: []Interrupt{{
			ID:             "prp_01",
			Reason:         "tool_call",
			ToolCallID:     "call_1",
			Message:        "Refund 20 EUR to alice?",
			ExpiresAt:      time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC),
			ResponseSchema: approvalSchema,
			Metadata:       map[string]any{"proposal": map[string]any{"id": "prp_01", "status": "pending"}},
		}},
	}}},
	{"run-finished-interrupt-minimal", &RunFinished{ThreadID: "t1", RunID: "run_1", Outcome: &Outcome{
		Type:       OutcomeInterrupt,
		Interrupts: []Interrupt{{ID: "prp_01", Reason: "tool_call"}, {ID: "prp_02", Reason: "tool_call"}},
	}}},
	{"run-finished-pending", &RunFinished{ThreadID: "t1", RunID: "run_1", Outcome: &Outcome{Type: OutcomeSuccess, PendingToolCallIDs: []string{"call_2", "call_3"}}}},
	{"run-finished-cancelled", &RunFinished{ThreadID: "t1", RunID: "run_1", Outcome: &Outcome{Type: OutcomeCancelled}}},
	{"run-error", &RunError{Message: "the interrupt has expired", Code: "INTERRUPT_EXPIRED", Timestamp: 1767268800000}},
	{"run-error-minimal", &RunError{Message: "model unavailable"}},
	{"step-started", &StepStarted{StepName: "model", Timestamp: 1767268800000}},
	{"step-finished", &StepFinished{StepName: "model"}},
	{"text-message-start", &TextMessageStart{MessageID: "msg_1", Role: RoleAssistant, Timestamp: 1767268800000}},
	{"text-message-start-minimal", &TextMessageStart{MessageID: "msg_1"}},
	// Quotes, a newline, markup, a line separator and non-ASCII text: all
	// stay on one data line.
	{"text-message-content", &TextMessageContent{MessageID: "msg_1", Delta: "Refund \"20 €\" to <alice>?\nYes\u2028ok 👍"}},
	{"text-message-end", &TextMessageEnd{MessageID: "msg_1"}},
	{"tool-call-start", &ToolCallStart{ToolCallID: "call_1", ToolCallName: "payments.refund", ParentMessageID: "msg_1", Timestamp: 1767268800000}},
	{"tool-call-start-minimal", &ToolCallStart{ToolCallID: "call_1", ToolCallName: "payments.refund"}},
	{"tool-call-args", &ToolCallArgs{ToolCallID: "call_1", Delta: `{"amount": 20, "customer": "alice"}`}},
	{"tool-call-end", &ToolCallEnd{ToolCallID: "call_1"}},
	{"tool-call-result", &ToolCallResult{MessageID: "msg_2", ToolCallID: "call_1", Content: `{"refund_id":"re_9"}`, Timestamp: 1767268800000}},
	{"state-snapshot", &StateSnapshot{Snapshot: map[string]any{"pending": []string{"prp_01"}, "note": nil}}},
	{"state-snapshot-null", &StateSnapshot{}},
	{"messages-snapshot", &MessagesSnapshot{Messages: []Message{
		{ID: "msg_0", Role: RoleUser, Content: "refund 20 to alice"},
		{ID: "msg_1", Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Function: FunctionCall{Name: "payments.refund", Arguments: `{"amount":20}`}}}},
		{ID: "msg_2", Role: RoleTool, Content: `{"status":"rejected"}`, ToolCallID: "call_1", Error: "rejected by bob"},
		{ID: "msg_3", Role: RoleAssistant, Content: "The refund was rejected."},
	}, Timestamp: 1767268800000}},
	{"messages-snapshot-empty", &MessagesSnapshot{}},
	{"custom", &Custom{Name: CustomActionProposalDecision, Value: map[string]any{
		"threadId":         "t1",
		"proposalDecision": map[string]any{"status": "applied", "proposal": map[string]any{"id": "prp_01", "status": "approved"}},
	}, Timestamp: 1767268800000}},
	{"custom-null", &Custom{Name: "countersign.ping"}},
	{"raw", &Raw{Event: map[string]any{"object": "chat.completion.chunk"}, Source: "openai"}},
	{"raw-minimal", &Raw{Event: "anything"}},
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := json.Marshal(c.event)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", c.name+".json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestGolden -update writes it)", err)
			}
			if !bytes.Equal(got, bytes.TrimSuffix(want, []byte("\n"))) {
				t.Errorf("JSON:\n got %s\nwant %s", got, want)
			}
			var head struct{ Type string }
			if err := json.Unmarshal(got, &head); err != nil || head.Type != c.event.Type() {
				t.Errorf(`"type" is %q, Type() %q (err %v)`, head.Type, c.event.Type(), err)
			}
			if !bytes.HasPrefix(got, []byte(`{"type":"`+c.event.Type()+`"`)) {
				t.Errorf(`%s: "type" is not the first member`, got)
			}
			// The event reads back as the same event.
			back, err := Parse(got)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			again, err := json.Marshal(back)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("after Parse: %s (err %v), want %s", again, err, got)
			}
		})
	}
}

// Every event type has a golden case, so the official-schema test sees it.
func TestGoldenCoversEveryType(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range goldenCases {
		seen[c.event.Type()] = true
	}
	for typ := range newEvent {
		if !seen[typ] {
			t.Errorf("no golden case of %s", typ)
		}
	}
	if len(seen) != len(newEvent) {
		t.Errorf("golden cases cover %d types, the package has %d", len(seen), len(newEvent))
	}
}

// An event marshals the same by value and by pointer, and a zero event
// carries its required fields and nothing else.
func TestMarshalZeroEvents(t *testing.T) {
	t.Parallel()
	cases := []struct {
		value, pointer any
		want           string
	}{
		{RunStarted{}, &RunStarted{}, `{"type":"RUN_STARTED","threadId":"","runId":""}`},
		{RunFinished{}, &RunFinished{}, `{"type":"RUN_FINISHED","threadId":"","runId":""}`},
		{RunError{}, &RunError{}, `{"type":"RUN_ERROR","message":""}`},
		{TextMessageContent{}, &TextMessageContent{}, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"","delta":""}`},
		{ToolCallResult{}, &ToolCallResult{}, `{"type":"TOOL_CALL_RESULT","messageId":"","toolCallId":"","content":""}`},
		{MessagesSnapshot{}, &MessagesSnapshot{}, `{"type":"MESSAGES_SNAPSHOT","messages":[]}`},
		{Custom{}, &Custom{}, `{"type":"CUSTOM","name":"","value":null}`},
		{Interrupt{}, &Interrupt{}, `{"id":"","reason":""}`},
		{ToolCall{}, &ToolCall{}, `{"id":"","type":"function","function":{"name":"","arguments":""}}`},
	}
	for _, c := range cases {
		for _, v := range []any{c.value, c.pointer} {
			got, err := json.Marshal(v)
			if err != nil || string(got) != c.want {
				t.Errorf("%T: %s (err %v), want %s", v, got, err, c.want)
			}
		}
	}
}

// A payload whose own JSON spans lines is compacted into the event's.
func TestMarshalCompactsPayloads(t *testing.T) {
	t.Parallel()
	got, err := json.Marshal(&Custom{Name: "x", Value: json.RawMessage("{\n  \"a\": [1,\n 2]\n}")})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"CUSTOM","name":"x","value":{"a":[1,2]}}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
