package scripted

import (
	"cmp"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/internal/canonjson"
)

// checkInput fails t unless raw is one JSON object the engine accepts.
func checkInput(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	if _, err := canonjson.Canonicalize(raw); err != nil {
		t.Fatalf("input %q: %v", raw, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		t.Fatalf("input %q is not a JSON object: %v", raw, err)
	}
	return obj
}

// FuzzDemoRules runs the demo rules over any message and any after_tool:
// no panic, a reply or an input error, and every tool call's input a valid
// object holding exactly the message's groups.
func FuzzDemoRules(f *testing.F) {
	for _, s := range [][2]string{
		{"refund 40 EUR to c_9", "{summary}"},
		{"hello", ""},
		{`REFUND 1 "x" to "y"`, "Done: {summary}{summary}"},
		{"refund 99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999 x to y", "{"},
		{"note \\\"\x00\xff", "{summary"},
	} {
		f.Add(s[0], s[1])
	}
	demo := regexp.MustCompile(demoConfig().Rules[0].Match)
	loose := mustNew(f, Config{Rules: []Rule{{
		Match: `(?s)note (?P<note>.*)`,
		Call:  &Call{Action: "crm.note", Input: `{"note": "{note}"}`},
	}}})
	tools := []agent.Tool{refundTool, {Name: "crm.note"}}
	f.Fuzz(func(t *testing.T, text, afterTool string) {
		cfg := demoConfig()
		cfg.AfterTool = afterTool
		m, err := New(cfg)
		if err != nil {
			t.Fatalf("New with after_tool %q: %v", afterTool, err)
		}
		ctx := context.Background()

		reply, err := m.Generate(ctx, &agent.Request{Messages: []agent.Message{user(text)}, Tools: tools})
		groups := demo.FindStringSubmatch(text)
		switch {
		case err != nil:
			// Only a number too large for a double can fail the demo rules.
			if groups == nil || !strings.Contains(err.Error(), "after substitution") {
				t.Fatalf("%q: %v", text, err)
			}
		case groups == nil:
			if reply.Text != "I can refund payments." || reply.ToolCalls != nil {
				t.Fatalf("%q: %s, want the fallback", text, show(reply))
			}
		default:
			if len(reply.ToolCalls) != 1 {
				t.Fatalf("%q: %s, want one call", text, show(reply))
			}
			input := checkInput(t, reply.ToolCalls[0].Input)
			if input["customer"] != groups[demo.SubexpIndex("customer")] || len(input) != 2 {
				t.Fatalf("%q: input %s, groups %q", text, reply.ToolCalls[0].Input, groups)
			}
			if _, ok := input["amount"].(float64); !ok {
				t.Fatalf("%q: input %s, amount not a number", text, reply.ToolCalls[0].Input)
			}
		}

		reply, err = m.Generate(ctx, &agent.Request{Messages: []agent.Message{user("x"), {Role: agent.RoleTool, Summary: text}}, Tools: tools})
		want := strings.ReplaceAll(cmp.Or(afterTool, DefaultAfterTool), "{summary}", text)
		if err != nil || reply.Text != want || reply.ToolCalls != nil {
			t.Fatalf("after_tool %q, summary %q: %s, %v; want %q", afterTool, text, show(reply), err, want)
		}

		reply, err = loose.Generate(ctx, &agent.Request{Messages: []agent.Message{user(text)}, Tools: tools})
		if err != nil {
			if err != ErrNoRuleMatches || strings.Contains(text, "note ") {
				t.Fatalf("loose %q: %v", text, err)
			}
			return
		}
		input := checkInput(t, reply.ToolCalls[0].Input)
		if note := text[strings.Index(text, "note ")+len("note "):]; utf8.ValidString(note) && input["note"] != note {
			t.Fatalf("loose %q: note %q, want %q", text, input["note"], note)
		}
	})
}

// FuzzNew builds a model from any match and input template: New never
// panics, and a model it accepts never panics either and calls only with a
// valid object.
func FuzzNew(f *testing.F) {
	for _, s := range [][3]string{
		{demoConfig().Rules[0].Match, demoConfig().Rules[0].Call.Input, "refund 40 EUR to c_9"},
		{`(?P<a>x)|(?P<a>y)`, `{"a": "{a}", "b": {a}}`, "y"},
		{`(?P<n>\d*)`, `{"n": -{n}.{n}e{n}}`, ""},
		{`(?P<w>\w+)`, `{"{w}": "{w}"}`, "k"},
		{`(`, `{x}`, ""},
		{`.*`, `{"a": "\ud800"}`, ""},
		{`(?P<q>.)`, `{"a": "\{q}"}`, `"`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, match, input, text string) {
		m, err := New(Config{Rules: []Rule{{Match: match, Say: "s", Call: &Call{Action: "a.b", Input: input}}}})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "scripted: rules") {
				t.Fatalf("error %q", err)
			}
			return
		}
		reply, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{user(text)}, Tools: []agent.Tool{{Name: "a.b"}}})
		if err != nil {
			return
		}
		if len(reply.ToolCalls) != 1 || reply.ToolCalls[0].Action != "a.b" || !mintedID.MatchString(reply.ToolCalls[0].ID) {
			t.Fatalf("reply %s", show(reply))
		}
		checkInput(t, reply.ToolCalls[0].Input)
	})
}
