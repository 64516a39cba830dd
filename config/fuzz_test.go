package config

import (
	"errors"
	"os"
	"testing"

	"github.com/countersign/countersign/agent/scripted"
)

// FuzzParse: Parse never panics; it fails only with *Error values, joined
// or alone; and what it accepts, the engine's policy check, the
// text-decision parser and the scripted models accept. (cmd/countersign's TestEngineAcceptsWhatConfigAccepts builds the
// engine, the worker, the agents and the gateway from this corpus.)
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	agents, err := os.ReadFile("testdata/agents.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		string(agents),
		"default_agent: a\nagents:\n  - name: a\n    model: {provider: scripted, rules: [{match: '(?P<n>\\d+)', call: {action: x.y, input: '{\"n\": {n}}'}}]}\n    actions: [\"x.*\"]\n    max_steps: 0\n",
		"agents:\n  - name: a\n    model: {provider: openai, name: m, api_key_env: K, base_url: \"http://127.0.0.1:1/v1\"}\n  - name: b\n    model: {provider: anthropic, name: m, api_key_env: K}\n",
		"text_decisions:\n  language: PT-br\n  vocabulary: {approve: [bora], reject: [\"não\"], remember: [sempre]}\n  replies: {ambiguous: \"{ids}?\"}\n",
		"",
		"listen: :8080\nstore: postgres://cs@db/cs\n",
		"worker: {poll_interval: 2s, lease: 5s}\n",
		"policy:\n  rules:\n    - {match: \"*\", effect: deny}\n    - &r {match: a, approvers: [\"actor:b\"], quorum: 1}\n    - {<<: *r, match: b}\n",
		"actions:\n  - name: a\n    input_schema: {type: object, properties: {x: {enum: [1, 2.5, true, null, \"s\"]}}}\n    execute: {url: \"https://h/x\", timeout: 1s}\n",
		"auth:\n  api_keys:\n    - {key: k, tenant: t, actor: a}\n  jwt: {issuer: i, audience: a, jwks_file: k}\n",
		"a: &a [*a]\n",
		"x: 1\n---\ny: 2\n",
		"mcp:\n  path: /tools/mcp\n  hold: 5s\n  servers:\n    - {name: fs, command: [npx, -y, x], env: {A: b}}\n    - {name: crm-1, url: \"https://h/mcp\", headers_env: {Authorization: T}}\n",
		"mcp: {servers: [{name: a_b, url: \"http://h\"}, &s {name: c, command: [c]}, {<<: *s, name: d}]}\n",
		bomb(),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse returned a configuration and an error: %v", err)
			}
			checkErrors(t, err)
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate rejects what Parse accepted: %v", err)
		}
		if err := c.Policy().Validate(); err != nil {
			t.Fatalf("the engine's check refuses the policy: %v", err)
		}
		if _, err := c.TextVocabulary(); err != nil {
			t.Fatalf("TextVocabulary rejects what Parse accepted: %v", err)
		}
		for _, a := range c.Agents {
			if a.Model.Provider != ProviderScripted {
				continue
			}
			if _, err := scripted.New(a.Model.Scripted); err != nil {
				t.Fatalf("scripted.New rejects agent %s's rules: %v", a.Name, err)
			}
		}
	})
}

// checkErrors fails unless err is an *Error or errors.Join of *Errors.
func checkErrors(t *testing.T, err error) {
	t.Helper()
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	if len(list) == 0 {
		t.Fatalf("an empty joined error: %v", err)
	}
	for _, e := range list {
		var ce *Error
		if _, ok := e.(*Error); !ok || !errors.As(e, &ce) || ce.Reason == "" {
			t.Fatalf("%T %v: want *Error with a reason", e, e)
		}
	}
}
