package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testParkedRunSurvivesKill is issue 13's end-to-end run on the real
// binary: a wait-mode tool call parks the run; the server is killed with
// SIGKILL; the approver answers in the thread through a second process; the
// run resumes there, executes once and finishes.
func testParkedRunSurvivesKill(t *testing.T, store, language, yes string) {
	secret := "s3cret-for-the-chat-e2e-test"
	backend := &testBackend{t: t, secret: []byte(secret), execs: map[string]int{}}
	ts := httptest.NewServer(backend)
	defer ts.Close()
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key: key_bob, tenant: acme, actor: bob, roles: [finance]}
webhook_secret_env: E2E_WEBHOOK_SECRET
worker: {poll_interval: 100ms, lease: 5s}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance"], mode: wait, channels: [api, text]}
actions:
  - name: payments.refund
    input_schema: {type: object, required: [amount, customer], additionalProperties: false,
                   properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}}
    confirmation: {title: "Refund {amount} to {customer}", verb: Refund}
    execute: {url: %s/execute, timeout: 5s}
text_decisions: {language: %s}
default_agent: support
agents:
  - name: support
    actions: ["payments.*"]
    model:
      provider: scripted
      rules:
        - match: '(?i)(?:refund|reembolse) (?P<amount>\d+) .*(?:to|para) (?P<customer>\w+)'
          say: "I'll ask for that refund."
          call: {action: payments.refund, input: '{"amount": {amount}, "customer": "{customer}"}'}
        - match: '.*'
          say: "I can refund payments."
      after_tool: "Done: {summary}"
`, store, ts.URL, language)
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_WEBHOOK_SECRET", secret)

	first := startServer(t, "--config", path)
	res := post(t, first.base, "key_alice", "/v1/threads/th1/messages", `{"text":"refund 40 EUR to c_9"}`)
	run, _ := res["run"].(map[string]any)
	if run == nil || run["status"] != "parked" {
		t.Fatalf("the run did not park: %v\n%s", res, first.output())
	}
	runID := run["id"].(string)

	// The process dies; nothing it held is needed to go on.
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.read // its output ends with it

	second := startServer(t, "--config", path)
	dec := post(t, second.base, "key_bob", "/v1/threads/th1/messages", fmt.Sprintf(`{"text":%q}`, yes))
	pd, _ := dec["proposal_decision"].(map[string]any)
	if pd == nil || pd["status"] != "applied" {
		t.Fatalf("%q was not a decision: %v", yes, dec)
	}
	deadline := time.Now().Add(30 * time.Second)
	var got map[string]any
	for {
		got = get(t, second.base, "key_alice", "/v1/threads/th1/runs/"+runID)["run"].(map[string]any)
		if got["status"] == "finished" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got["status"] != "finished" {
		t.Fatalf("run %v, want finished\n%s", got, second.output())
	}
	backend.mu.Lock()
	execs := 0
	for _, n := range backend.execs {
		execs += n
	}
	backend.mu.Unlock()
	if execs != 1 {
		t.Fatalf("%d executions, want 1", execs)
	}
	th := get(t, second.base, "key_alice", "/v1/threads/th1")
	b, _ := json.Marshal(th["messages"])
	for _, want := range []string{`"role":"tool"`, `"status":"succeeded"`, `"text":"Done: `} {
		if !strings.Contains(string(b), want) {
			t.Errorf("thread lacks %s: %s", want, b)
		}
	}
	p := get(t, second.base, "key_bob", "/v1/proposals/"+run["proposal_ids"].([]any)[0].(string))
	if d := p["decisions"].([]any); len(d) != 1 || d[0].(map[string]any)["via"] != "text" || d[0].(map[string]any)["actor"] != "bob" {
		t.Fatalf("decisions %v, want bob's via text", d)
	}
}

func post(t *testing.T, base, key, path, body string) map[string]any {
	t.Helper()
	return curlJSON(t, "-s", "-X", "POST", base+path, "-H", "Authorization: Bearer "+key, "-H", "Content-Type: application/json", "-d", body)
}

func get(t *testing.T, base, key, path string) map[string]any {
	t.Helper()
	return curlJSON(t, "-s", base+path, "-H", "Authorization: Bearer "+key)
}

func curlJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, err := exec.Command("curl", args...).Output()
	if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("curl %v answered %s", args, out)
	}
	return m
}

func TestParkedRunSurvivesKillOnSQLite(t *testing.T) {
	testParkedRunSurvivesKill(t, "sqlite:"+filepath.Join(t.TempDir(), "chat.db"), "en", "yes")
}

func TestParkedRunSurvivesKillOnSQLiteInPortuguese(t *testing.T) {
	testParkedRunSurvivesKill(t, "sqlite:"+filepath.Join(t.TempDir(), "chat.db"), "pt-BR", "sim")
}

func TestParkedRunSurvivesKillOnPostgreSQL(t *testing.T) {
	for _, tc := range []struct{ lang, yes string }{{"en", "yes"}, {"pt-BR", "sim"}} {
		t.Run(tc.lang, func(t *testing.T) {
			testParkedRunSurvivesKill(t, pgStoreURL(t), tc.lang, tc.yes)
		})
	}
}
