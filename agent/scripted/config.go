package scripted

import (
	"errors"
	"fmt"
	"regexp"
)

// DefaultAfterTool is the reply after a tool result when Config.AfterTool is
// empty: the result's one-line summary, as is.
const DefaultAfterTool = "{summary}"

// Config is the scripted model's configuration, the model section of an
// agent whose provider is "scripted".
type Config struct {
	// Rules answer the latest user message: the first whose Match matches
	// does. At least one is required; a last rule matching '.*' is the
	// fallback reply.
	Rules []Rule `yaml:"rules" json:"rules"`
	// AfterTool is the reply after a tool result, with "{summary}" replaced
	// by the result's one-line summary (no other placeholder exists; other
	// braces are literal text). Empty means DefaultAfterTool.
	AfterTool string `yaml:"after_tool,omitempty" json:"after_tool,omitempty"`
}

// Rule is one scripted answer. It needs Say, Call or both.
type Rule struct {
	// Match is a regexp (RE2 syntax, as Go's regexp package reads it)
	// matched anywhere in the message, like regexp.MatchString: anchor it
	// with ^ and $ to match the whole message. Its named groups
	// ((?P<name>…)) are what Call.Input's placeholders refer to. Required.
	Match string `yaml:"match" json:"match"`
	// Say is the reply's text, before the tool call if there is one.
	Say string `yaml:"say,omitempty" json:"say,omitempty"`
	// Call is the tool the reply calls, if any.
	Call *Call `yaml:"call,omitempty" json:"call,omitempty"`
}

// clientToolName is what a caller's tool may be named (the engine's rule).
var clientToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Call is the tool call a rule makes.
type Call struct {
	// Action is the engine action to call, like "payments.refund".
	Action string `yaml:"action" json:"action"`
	// ClientTool, instead of Action, names a tool the run's caller offers
	// (AG-UI's input tools, like "get_weather"): the model calls it when the
	// caller offered it, and fails the run when not. Exactly one of Action
	// and ClientTool is set.
	ClientTool string `yaml:"client_tool,omitempty" json:"client_tool,omitempty"`
	// Input is the call's input: a JSON object text in which each {name} is
	// replaced by the text of Match's group of that name, escaped as the
	// inside of a JSON string. Inside quotes ("{customer}") any text stays
	// one string; unquoted ({amount}) the text is inserted as JSON, so the
	// group's pattern must admit only what is meant (\d+ for a number).
	// Every {word} is a placeholder and must name a group; there is no
	// escape for a literal one. Empty means {} (an action without input).
	Input string `yaml:"input,omitempty" json:"input,omitempty"`
}

// ConfigError is a problem with one field of a Config. Field is the field's
// path in the configuration, like "rules[0].call.input", so a caller that
// knows where the model section sits can point at the line.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return "scripted: " + e.Field + ": " + e.Reason
}

// rule is a Rule ready to answer: its regexp compiled, its input parsed.
type rule struct {
	name   string // "rules[i]", for errors
	match  *regexp.Regexp
	say    string
	action string         // "" without a call
	client bool           // action names a tool the caller offers
	input  *inputTemplate // nil without a call
}

// compile checks every rule and returns them ready, or every problem found
// (each a *ConfigError, joined).
func compile(cfg Config) ([]rule, error) {
	if len(cfg.Rules) == 0 {
		return nil, &ConfigError{Field: "rules", Reason: "at least one rule is needed"}
	}
	var errs []error
	rules := make([]rule, 0, len(cfg.Rules))
	for i, r := range cfg.Rules {
		name := fmt.Sprintf("rules[%d]", i)
		bad := func(field, format string, args ...any) {
			errs = append(errs, &ConfigError{Field: name + field, Reason: fmt.Sprintf(format, args...)})
		}
		if r.Say == "" && r.Call == nil {
			bad("", "has neither say nor call")
		}
		if r.Match == "" {
			// An empty regexp would match every message; say so explicitly.
			bad(".match", "missing (use '.*' to match every message)")
			continue
		}
		re, err := regexp.Compile(r.Match)
		if err != nil {
			bad(".match", "%v", err)
			continue
		}
		c := rule{name: name, match: re, say: r.Say}
		if r.Call != nil {
			switch {
			case r.Call.Action == "" && r.Call.ClientTool == "":
				bad(".call.action", "missing (or client_tool, for a tool the caller offers)")
			case r.Call.Action != "" && r.Call.ClientTool != "":
				bad(".call", "action and client_tool both set: a call is one or the other")
			case r.Call.ClientTool != "" && !clientToolName.MatchString(r.Call.ClientTool):
				bad(".call.client_tool", "%q: want 1 to 64 of [A-Za-z0-9_-], as a caller's tool is named", r.Call.ClientTool)
			}
			input, err := parseInput(r.Call.Input, re)
			if err != nil {
				bad(".call.input", "%v", err)
			}
			c.action, c.client, c.input = r.Call.Action, r.Call.ClientTool != "", input
			if c.client {
				c.action = r.Call.ClientTool
			}
		}
		rules = append(rules, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}
