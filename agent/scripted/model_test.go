package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent"
)

var refundTool = agent.Tool{Name: "payments.refund", Description: "Refund a payment", InputSchema: json.RawMessage(`{"type":"object"}`)}

func user(text string) agent.Message { return agent.Message{Role: agent.RoleUser, Text: text} }

func mustNew(t testing.TB, cfg Config) *Model {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGenerateDemoRules(t *testing.T) {
	t.Parallel()
	m := mustNew(t, demoConfig())
	refundCall := agent.Message{Role: agent.RoleAssistant, Text: "I'll ask for that refund.",
		ToolCalls: []agent.ToolCall{{ID: "call_1", Action: "payments.refund", Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`)}}}
	tests := []struct {
		name     string
		messages []agent.Message
		want     agent.Reply
	}{
		{"refund", []agent.Message{user("refund 40 EUR to c_9")}, agent.Reply{
			Text:      "I'll ask for that refund.",
			ToolCalls: []agent.ToolCall{{Action: "payments.refund", Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`)}},
		}},
		{"refund, any case, mid-sentence", []agent.Message{user("Please REFUND 7 dollars, sent by card, to bob now")}, agent.Reply{
			Text:      "I'll ask for that refund.",
			ToolCalls: []agent.ToolCall{{Action: "payments.refund", Input: json.RawMessage(`{"amount":7,"customer":"bob"}`)}},
		}},
		{"fallback", []agent.Message{user("hello")}, agent.Reply{Text: "I can refund payments."}},
		{"empty message hits the fallback", []agent.Message{user("")}, agent.Reply{Text: "I can refund payments."}},
		{"tool result", []agent.Message{user("refund 40 EUR to c_9"), refundCall,
			{Role: agent.RoleTool, ToolCallID: "call_1", Result: json.RawMessage(`{"refund_id":"r_1"}`), Summary: "Refunded 40 EUR to c_9 (r_1)."}},
			agent.Reply{Text: "Refunded 40 EUR to c_9 (r_1)."}},
		{"latest user message answers", []agent.Message{user("hello"),
			{Role: agent.RoleAssistant, Text: "I can refund payments."}, user("refund 5 to ann")}, agent.Reply{
			Text:      "I'll ask for that refund.",
			ToolCalls: []agent.ToolCall{{Action: "payments.refund", Input: json.RawMessage(`{"amount":5,"customer":"ann"}`)}},
		}},
		{"a user message after a tool result is matched", []agent.Message{user("refund 40 EUR to c_9"), refundCall,
			{Role: agent.RoleTool, ToolCallID: "call_1", Summary: "done"}, {Role: agent.RoleAssistant, Text: "done"}, user("thanks")},
			agent.Reply{Text: "I can refund payments."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := &agent.Request{Instructions: "Help.", Messages: tt.messages, Tools: []agent.Tool{refundTool}}
			got, err := m.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			gotIDs := mintedIDs(t, got)
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("reply %s, want %s", show(got), show(&tt.want))
			}
			// The same conversation gets the same reply, but never the same
			// tool call id: each call is one of its own.
			again, err := m.Generate(context.Background(), req)
			againIDs := mintedIDs(t, again)
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Errorf("replayed: %s, %v; first: %s", show(again), err, show(got))
			}
			for i := range gotIDs {
				if gotIDs[i] == againIDs[i] {
					t.Errorf("call %d: the same id %q twice", i, gotIDs[i])
				}
			}
		})
	}
}

// mintedIDs checks that each of reply's tool call ids is "call_" and 24
// lowercase hex digits (96 random bits), returns them, and blanks them in
// reply so that the rest compares exactly.
func mintedIDs(t *testing.T, reply *agent.Reply) []string {
	t.Helper()
	var ids []string
	for i := range reply.ToolCalls {
		id := reply.ToolCalls[i].ID
		if !mintedID.MatchString(id) {
			t.Errorf("tool call id %q: want call_ and 24 hex digits", id)
		}
		ids = append(ids, id)
		reply.ToolCalls[i].ID = ""
	}
	return ids
}

var mintedID = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

func show(r *agent.Reply) string {
	if r == nil {
		return "<nil>"
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func TestGenerateAfterTool(t *testing.T) {
	t.Parallel()
	tool := func(summary string) []agent.Message {
		return []agent.Message{user("go"), {Role: agent.RoleTool, ToolCallID: "call_1", Summary: summary}}
	}
	tests := []struct {
		afterTool, summary, want string
	}{
		{"", "Refunded.", "Refunded."}, // the default
		{"{summary}", "", ""},
		{"Done: {summary} ({summary})", "ok", "Done: ok (ok)"},
		{"No summary here.", "ok", "No summary here."},
		{"{other} {summary}", "ok", "{other} ok"},                 // only {summary} is a placeholder
		{"{summary}", "{summary} {amount}", "{summary} {amount}"}, // a summary is not rescanned
	}
	for _, tt := range tests {
		m := mustNew(t, Config{Rules: []Rule{{Match: ".*", Say: "x"}}, AfterTool: tt.afterTool})
		got, err := m.Generate(context.Background(), &agent.Request{Messages: tool(tt.summary)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Text != tt.want || got.ToolCalls != nil {
			t.Errorf("after_tool %q, summary %q: %s, want text %q", tt.afterTool, tt.summary, show(got), tt.want)
		}
	}
}

// TestGenerateEscapesGroupText puts hostile group text in quoted
// placeholders: the input stays one valid object with the text as a string.
func TestGenerateEscapesGroupText(t *testing.T) {
	t.Parallel()
	m := mustNew(t, Config{Rules: []Rule{{
		Match: `(?s)^note (?P<note>.*)$`,
		Call:  &Call{Action: "crm.note", Input: `{"note": "{note}", "again": "<{note}>"}`},
	}}})
	tests := []struct{ text, want string }{
		{`she said "hi"`, `she said "hi"`},
		{`back\slash \" \\" \u0041`, `back\slash \" \\" \u0041`},
		{`", "admin": true, "x": "`, `", "admin": true, "x": "`},
		{"line\nbreak\ttab\x00nul\x1f", "line\nbreak\ttab\x00nul\x1f"},
		{"<script>&amp;</script>", "<script>&amp;</script>"},
		{"\u2028\u2029 émoji 🙂", "\u2028\u2029 émoji 🙂"},
		{"{note} {summary} {}", "{note} {summary} {}"}, // substituted text is not rescanned
		{"bad utf-8 \xff\xfe", "bad utf-8 \ufffd\ufffd"},
		{"", ""},
	}
	for _, tt := range tests {
		req := &agent.Request{Messages: []agent.Message{user("note " + tt.text)}, Tools: []agent.Tool{{Name: "crm.note"}}}
		got, err := m.Generate(context.Background(), req)
		if err != nil {
			t.Errorf("%q: %v", tt.text, err)
			continue
		}
		var input map[string]any
		if err := json.Unmarshal(got.ToolCalls[0].Input, &input); err != nil {
			t.Errorf("%q: input %s: %v", tt.text, got.ToolCalls[0].Input, err)
			continue
		}
		want := map[string]any{"note": tt.want, "again": "<" + tt.want + ">"}
		if !reflect.DeepEqual(input, want) {
			t.Errorf("%q: input %s, want %v", tt.text, got.ToolCalls[0].Input, want)
		}
	}
}

func TestGenerateGroupsByName(t *testing.T) {
	t.Parallel()
	m := mustNew(t, Config{Rules: []Rule{{
		Match: `^(?:cancel (?P<id>\w+)|drop order (?P<id>\w+))(?: because (?P<why>.+))?$`,
		Call:  &Call{Action: "orders.cancel", Input: `{"id": "{id}", "why": "{why}"}`},
	}}})
	tests := []struct{ text, want string }{
		{"cancel o_1", `{"id":"o_1","why":""}`},     // a group that took no part is empty
		{"drop order o_2", `{"id":"o_2","why":""}`}, // the second group of the name
		{"cancel o_3 because late", `{"id":"o_3","why":"late"}`},
	}
	for _, tt := range tests {
		got, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{user(tt.text)}, Tools: []agent.Tool{{Name: "orders.cancel"}}})
		if err != nil {
			t.Fatalf("%q: %v", tt.text, err)
		}
		if string(got.ToolCalls[0].Input) != tt.want {
			t.Errorf("%q: input %s, want %s", tt.text, got.ToolCalls[0].Input, tt.want)
		}
	}
}

func TestGenerateFails(t *testing.T) {
	t.Parallel()
	demo := mustNew(t, demoConfig())
	strict := mustNew(t, Config{Rules: []Rule{
		{Match: `^amount (?P<n>.+)$`, Call: &Call{Action: "payments.refund", Input: `{"amount": {n}}`}},
		{Match: `^hello$`, Say: "hi"},
	}})
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	offered := []agent.Tool{refundTool}
	tests := []struct {
		name     string
		model    *Model
		ctx      context.Context
		messages []agent.Message
		tools    []agent.Tool
		is       error    // errors.Is target, if any
		want     []string // pieces of the message
	}{
		{"action not offered", demo, context.Background(), []agent.Message{user("refund 40 EUR to c_9")}, nil, nil,
			[]string{"rules[0]", `"payments.refund"`, "not offered"}},
		{"other actions offered", demo, context.Background(), []agent.Message{user("refund 40 EUR to c_9")},
			[]agent.Tool{{Name: "crm.lookup"}, {Name: "payments.refund.v2"}}, nil, []string{`"payments.refund"`, "not offered"}},
		{"no rule matches", strict, context.Background(), []agent.Message{user("goodbye")}, offered, ErrNoRuleMatches, nil},
		{"no user message", demo, context.Background(), []agent.Message{{Role: agent.RoleAssistant, Text: "hi"}}, offered, nil,
			[]string{"no user message"}},
		{"empty conversation", demo, context.Background(), nil, offered, nil, []string{"no user message"}},
		{"unquoted text is not JSON", strict, context.Background(), []agent.Message{user("amount secret-words")}, offered, nil,
			[]string{"rules[0]: input is not a JSON object after substitution", "invalid JSON"}},
		{"unquoted quotes stay escaped", strict, context.Background(), []agent.Message{user(`amount 1, "admin": true`)}, offered, nil,
			[]string{"rules[0]: input is not a JSON object after substitution"}},
		{"number too large", strict, context.Background(), []agent.Message{user("amount 1e999")}, offered, nil,
			[]string{"out of IEEE 754 double range"}},
		{"canceled", demo, canceled, []agent.Message{user("hello")}, offered, context.Canceled, nil},
		{"canceled after a tool result", demo, canceled, []agent.Message{user("x"), {Role: agent.RoleTool}}, offered, context.Canceled, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.model.Generate(tt.ctx, &agent.Request{Messages: tt.messages, Tools: tt.tools})
			if err == nil {
				t.Fatalf("reply %s, want an error", show(got))
			}
			if got != nil {
				t.Errorf("reply %s beside error %v", show(got), err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v, want %v", err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, m := range tt.messages {
				if len(m.Text) > 3 && strings.Contains(err.Error(), m.Text) {
					t.Errorf("error %q repeats the message %q", err, m.Text)
				}
			}
		})
	}
	if _, err := demo.Generate(context.Background(), nil); err == nil {
		t.Error("a nil request: no error")
	}
}

func TestGenerateNumbersAsGiven(t *testing.T) {
	t.Parallel()
	m := mustNew(t, Config{Rules: []Rule{{Match: `^amount (?P<n>\S+)$`, Call: &Call{Action: "payments.refund", Input: `{"amount": {n}}`}}}})
	for text, want := range map[string]string{
		"amount 40":     `{"amount":40}`,
		"amount 40.50":  `{"amount":40.5}`, // canonical form
		"amount -1e2":   `{"amount":-100}`,
		"amount true":   `{"amount":true}`,
		`amount "x"`:    "", // the quotes arrive escaped: not JSON
		"amount [1,{}]": `{"amount":[1,{}]}`,
	} {
		got, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{user(text)}, Tools: []agent.Tool{refundTool}})
		if want == "" {
			if err == nil {
				t.Errorf("%q: %s, want an error", text, show(got))
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		if string(got.ToolCalls[0].Input) != want {
			t.Errorf("%q: input %s, want %s", text, got.ToolCalls[0].Input, want)
		}
	}
}
