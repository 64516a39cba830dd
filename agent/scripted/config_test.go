package scripted

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// demoYAML is the demo agent's model section, as docs/api.md gives it.
const demoYAML = `
rules:
  - match: '(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)'
    say: "I'll ask for that refund."
    call: {action: payments.refund, input: '{"amount": {amount}, "customer": "{customer}"}'}
  - match: '.*'
    say: "I can refund payments."
after_tool: "{summary}"
`

func demoConfig() Config {
	return Config{
		Rules: []Rule{
			{
				Match: `(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)`,
				Say:   "I'll ask for that refund.",
				Call:  &Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`},
			},
			{Match: `.*`, Say: "I can refund payments."},
		},
		AfterTool: "{summary}",
	}
}

func TestConfigDecodesFromYAMLAndJSON(t *testing.T) {
	t.Parallel()
	var fromYAML Config
	if err := yaml.Unmarshal([]byte(demoYAML), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML, demoConfig()) {
		t.Errorf("from YAML: %+v, want %+v", fromYAML, demoConfig())
	}
	data, err := json.Marshal(demoConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"rules"`, `"match"`, `"say"`, `"call"`, `"action"`, `"input"`, `"after_tool"`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("JSON %s lacks key %s", data, key)
		}
	}
	var fromJSON Config
	if err := json.Unmarshal(data, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromJSON, demoConfig()) {
		t.Errorf("from JSON: %+v, want %+v", fromJSON, demoConfig())
	}
	if _, err := New(fromYAML); err != nil {
		t.Errorf("New(demo): %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	say := func(match string) Rule { return Rule{Match: match, Say: "x"} }
	call := func(match, action, input string) Rule {
		return Rule{Match: match, Call: &Call{Action: action, Input: input}}
	}
	tests := []struct {
		name  string
		rules []Rule
		// want is the field and a piece of the reason of each error, in order.
		want [][2]string
	}{
		{"no rules", nil, [][2]string{{"rules", "at least one rule"}}},
		{"bad regexp", []Rule{say(`(unclosed`)}, [][2]string{{"rules[0].match", "missing closing )"}}},
		{"bad regexp later", []Rule{say(`.*`), say(`a**`)}, [][2]string{{"rules[1].match", "invalid nested repetition"}}},
		{"empty match", []Rule{say(``)}, [][2]string{{"rules[0].match", "missing"}}},
		{"neither say nor call", []Rule{{Match: `.*`}}, [][2]string{{"rules[0]", "neither say nor call"}}},
		{"call without action", []Rule{call(`.*`, "", `{}`)}, [][2]string{{"rules[0].call.action", "missing"}}},
		{"unknown group", []Rule{call(`(?P<amount>\d+)`, "a.b", `{"amount": {amount}, "to": "{customer}"}`)},
			[][2]string{{"rules[0].call.input", "{customer} names no group"}}},
		{"numbered group is not a name", []Rule{call(`(\d+)`, "a.b", `{"n": {1}}`)},
			[][2]string{{"rules[0].call.input", "{1} names no group"}}},
		{"invalid JSON", []Rule{call(`(?P<a>\w+)`, "a.b", `{"a": "{a}",}`)},
			[][2]string{{"rules[0].call.input", "invalid JSON"}}},
		{"unquoted word", []Rule{call(`(?P<a>\w+)`, "a.b", `{"a": x{a}}`)},
			[][2]string{{"rules[0].call.input", "invalid JSON"}}},
		{"not an object", []Rule{call(`(?P<a>\w+)`, "a.b", `["{a}"]`)},
			[][2]string{{"rules[0].call.input", "not a JSON object"}}},
		{"a bare placeholder", []Rule{call(`(?P<a>\w+)`, "a.b", `{a}`)},
			[][2]string{{"rules[0].call.input", "not a JSON object"}}},
		{"duplicate key", []Rule{call(`.*`, "a.b", `{"a": 1, "a": 2}`)},
			[][2]string{{"rules[0].call.input", "duplicate object key"}}},
		{"trailing data", []Rule{call(`.*`, "a.b", `{} {}`)},
			[][2]string{{"rules[0].call.input", "invalid JSON"}}},
		{"every problem reported", []Rule{{Match: `(`}, say(`.*`), call(`.*`, "", `{x}`)},
			[][2]string{
				{"rules[0]", "neither say nor call"},
				{"rules[0].match", "missing closing )"},
				{"rules[2].call.action", "missing"},
				{"rules[2].call.input", "{x} names no group"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(Config{Rules: tt.rules})
			if err == nil {
				t.Fatalf("New succeeded (%v), want errors %v", m, tt.want)
			}
			var got []*ConfigError
			for _, e := range unjoin(err) {
				var ce *ConfigError
				if !errors.As(e, &ce) {
					t.Fatalf("error %v is not a *ConfigError", e)
				}
				got = append(got, ce)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("errors %v, want %d: %v", err, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if got[i].Field != w[0] || !strings.Contains(got[i].Reason, w[1]) {
					t.Errorf("error %d: %q, want field %s with %q", i, got[i], w[0], w[1])
				}
				if !strings.HasPrefix(got[i].Error(), "scripted: "+w[0]+": ") {
					t.Errorf("error %d reads %q", i, got[i])
				}
			}
		})
	}
}

// unjoin splits an errors.Join result into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestNewAcceptsValidTemplates(t *testing.T) {
	t.Parallel()
	tests := []struct{ match, input string }{
		{`.*`, ``}, // no input means {}
		{`.*`, `{}`},
		{`(?P<n>\d+)`, `{"n": -{n}.{n}e{n}, "s": "{n} and {n}"}`},
		{`(?P<a>x)|(?P<a>y)`, `{"a": "{a}"}`},               // one name, two groups
		{`(?P<flag>true|false)`, `{"flag": "{flag}"}`},      // a word group kept as a string
		{`(?P<a>\w+)`, `{"nested": {"list": ["{a}", {}]}}`}, // JSON's own braces are not placeholders
		{`(?P<a>\w+)`, "{\"a\":\n\t\"{a}\"}"},
	}
	for _, tt := range tests {
		if _, err := New(Config{Rules: []Rule{{Match: tt.match, Call: &Call{Action: "a.b", Input: tt.input}}}}); err != nil {
			t.Errorf("match %q input %q: %v", tt.match, tt.input, err)
		}
	}
}
