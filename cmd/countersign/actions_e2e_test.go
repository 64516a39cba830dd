package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCLIActions runs `countersign actions list` against a real serve
// whose policy decides by the caller: finance refunds at once, globex may
// not refund, danger.delete is denied to all, a read is allowed. Each
// token's table and --json show what it may call, an agent's token lists
// as its person's would, and the exit codes are the client's.
func TestCLIActions(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`store: "sqlite:%s"
auth:
  api_keys:
    - {key: k_agent_alice, tenant: acme, actor: alice, kind: agent}
    - {key: k_bob, tenant: acme, actor: bob, roles: [finance], kind: human}
    - {key: k_eve, tenant: globex, actor: eve, kind: human}
webhook_secret_env: E2E_ACTIONS_SECRET
policy:
  rules:
    - {match: payments.refund, when: "'finance' in actor.roles", effect: allow}
    - {match: payments.refund, when: "tenant == 'globex'", effect: deny}
    - {match: "payments.*", effect: ask, approvers: ["role:finance"]}
    - {match: "danger.*", effect: deny}
actions:
  - name: payments.refund
    description: Refund a payment
    input_schema: {type: object, required: [amount, customer], additionalProperties: false,
                   properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}}
    confirmation: {title: "Refund {amount} to {customer}", verb: Refund}
    execute: {url: http://127.0.0.1:9/execute, timeout: 5s}
  - name: danger.delete
    execute: {url: http://127.0.0.1:9/execute, timeout: 5s}
  - name: crm.lookup
    kind: read
    description: Look a customer up
    execute: {url: http://127.0.0.1:9/execute, timeout: 5s}
`, filepath.Join(dir, "actions.db"))
	path := filepath.Join(dir, "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_ACTIONS_SECRET", "s3cret-for-the-actions-test")
	s := startServer(t, "--config", path)
	as := func(key string, args ...string) []string {
		return append(append([]string{"actions", "list"}, args...), "--token", key, "--server", s.base)
	}
	row := func(name, kind, effect, desc string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s+1\s+` + kind + `\s+` + effect + `\s+` + regexp.QuoteMeta(desc) + `\s*$`)
	}
	tables := []struct {
		key       string
		rows, not []*regexp.Regexp
	}{
		{"k_agent_alice", []*regexp.Regexp{row("crm.lookup", "read", "allow", "Look a customer up"), row("payments.refund", "write", "ask", "Refund a payment")},
			[]*regexp.Regexp{regexp.MustCompile(`danger`)}},
		{"k_bob", []*regexp.Regexp{row("crm.lookup", "read", "allow", "Look a customer up"), row("payments.refund", "write", "allow", "Refund a payment")},
			[]*regexp.Regexp{regexp.MustCompile(`danger`)}},
		{"k_eve", []*regexp.Regexp{row("crm.lookup", "read", "allow", "Look a customer up")},
			[]*regexp.Regexp{regexp.MustCompile(`danger|payments`)}},
	}
	for _, tc := range tables {
		out, code := cli(t, as(tc.key)...)
		if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "EFFECT") {
			t.Errorf("%s: actions list: exit %d\n%s", tc.key, code, out)
		}
		for _, re := range tc.rows {
			if !re.MatchString(out) {
				t.Errorf("%s: actions list lacks a row %s:\n%s", tc.key, re, out)
			}
		}
		for _, re := range tc.not {
			if re.MatchString(out) {
				t.Errorf("%s: actions list shows %s:\n%s", tc.key, re, out)
			}
		}
	}

	out, code := cli(t, as("k_bob", "--json")...)
	var page struct {
		Actions []struct {
			Name         string          `json:"name"`
			Version      string          `json:"version"`
			Kind         string          `json:"kind"`
			Description  string          `json:"description"`
			InputSchema  json.RawMessage `json:"input_schema"`
			Confirmation struct {
				Title string `json:"title"`
				Verb  string `json:"verb"`
			} `json:"confirmation"`
			Effect string `json:"effect"`
		} `json:"actions"`
	}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page.Actions) != 2 {
		t.Fatalf("actions list --json: exit %d, %v\n%s", code, err, out)
	}
	r := page.Actions[1]
	if r.Name != "payments.refund" || r.Version != "1" || r.Kind != "write" || r.Effect != "allow" ||
		r.Confirmation.Title != "Refund {amount} to {customer}" || r.Confirmation.Verb != "Refund" ||
		!strings.Contains(string(r.InputSchema), `"customer"`) {
		t.Errorf("payments.refund in --json: %+v (input_schema %s)", r, r.InputSchema)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad token", as("nope"), exitUnauth, "401"},
		{"an argument", append(as("k_bob"), "extra"), exitUsage, "Usage"},
		{"unreachable", []string{"actions", "list", "--token", "x", "--server", "http://127.0.0.1:1"}, exitUnreachable, "cannot reach"},
	} {
		out, code := cli(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", tc.name, code, out, tc.code, tc.want)
		}
	}
}

// TestActionsEscapeServerText: whatever a server puts in an action, `actions
// list` prints no character a terminal obeys, and --json keeps the text.
func TestActionsEscapeServerText(t *testing.T) {
	t.Parallel()
	action := map[string]any{"name": "payments." + hostile, "version": hostile, "kind": "write" + hostile,
		"description": hostile, "input_schema": map[string]any{"type": "object"},
		"confirmation": map[string]any{"title": hostile, "verb": hostile}, "effect": "ask" + hostile}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "GET" || r.URL.Path != "/v1/actions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"actions": []any{action, action}})
	}))
	t.Cleanup(srv.Close)
	for _, asJSON := range []bool{false, true} {
		args := []string{"actions", "list"}
		if asJSON {
			args = append(args, "--json")
		}
		out, _ := runEscaped(t, srv.URL, args, false)
		if asJSON {
			var v any
			if err := json.Unmarshal(out, &v); err != nil || !containsString(v, "payments."+hostile) {
				t.Errorf("--json: %v\n%s", err, out)
			}
		}
	}
}
