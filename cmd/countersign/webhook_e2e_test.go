package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/webhook"
)

// testBackend is the user's backend of the webhook actions: it checks every
// signature and records every execute.
type testBackend struct {
	t      *testing.T
	secret []byte
	mu     sync.Mutex
	execs  map[string]int // Idempotency-Key → executions
	bodies []map[string]any
}

func (b *testBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := webhook.Verify(b.secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), time.Minute); err != nil {
		b.t.Errorf("%s: bad signature: %v", r.URL.Path, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/prepare":
		fmt.Fprintf(w, `{"preview":"Refund %v EUR to %v (balance 100)","state_version":"v7"}`, m["input"].(map[string]any)["amount"], m["input"].(map[string]any)["customer"])
	case "/execute":
		b.mu.Lock()
		b.execs[r.Header.Get("Idempotency-Key")]++
		b.bodies = append(b.bodies, m)
		b.mu.Unlock()
		fmt.Fprintf(w, `{"receipt":"rf_%s","result":{"ok":true}}`, m["operation_id"])
	default:
		http.NotFound(w, r)
	}
}

func testWebhookFlow(t *testing.T, store string) {
	secret := "s3cret-for-the-e2e-test"
	backend := &testBackend{t: t, secret: []byte(secret), execs: map[string]int{}}
	ts := httptest.NewServer(backend)
	defer ts.Close()
	keyBob := sha256.Sum256([]byte("prod_key_bob"))
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: prod_key_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key_sha256: %s, tenant: acme, actor: bob, roles: [finance]}
webhook_secret_env: E2E_WEBHOOK_SECRET
worker: {poll_interval: 100ms, lease: 5s}
metrics: {proposal_counts_every: 50ms}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance"], mode: wait}
actions:
  - name: payments.refund
    input_schema: {type: object, required: [amount, customer], additionalProperties: false,
                   properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}}
    confirmation: {title: "Refund {amount} to {customer}", verb: Refund}
    prepare: {url: %s/prepare, timeout: 5s}
    execute: {url: %s/execute, timeout: 5s}
`, store, hex.EncodeToString(keyBob[:]), ts.URL, ts.URL)
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_WEBHOOK_SECRET", secret)
	s := startServer(t, "--config", path)

	call := func() map[string]any {
		out, err := exec.Command("curl", "-s", "-X", "POST", s.base+"/v1/calls", "-H", "Authorization: Bearer prod_key_alice",
			"-H", "Content-Type: application/json",
			"-d", `{"thread_id":"t1","tool_call_id":"call_1","action":"payments.refund","input":{"amount":40,"customer":"c_9"},"wait_seconds":1}`).Output()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("call answered %s", out)
		}
		return m
	}
	first := call()
	if first["status"] != "pending" {
		t.Fatalf("first call: %v\n%s", first, s.output())
	}
	p := first["proposal"].(map[string]any)
	if p["preview"] != "Refund 40 EUR to c_9 (balance 100)" || p["state_version"] != "v7" {
		t.Fatalf("prepare not used: %v", p)
	}
	out, code := cli(t, "approve", first["proposal_id"].(string), "--server", s.base, "--token", "prod_key_bob")
	if code != 0 {
		t.Fatalf("approve: %d %s", code, out)
	}
	second := call() // the waiting caller resumes and executes
	if second["status"] != "succeeded" || second["executed"] != true {
		t.Fatalf("resumed call: %v", second)
	}
	third := call()
	if third["receipt"] != second["receipt"] {
		t.Fatalf("replay: %v, want the recorded receipt %v", third["receipt"], second["receipt"])
	}
	// The operations endpoints see it: webhook latency and the outcome. The
	// proposal counts are a background count: scrape until one has run
	// since the execution.
	var metrics []byte
	for tries := 0; !strings.Contains(string(metrics), `countersign_proposals{status="succeeded"} 1`); tries++ {
		if tries == 1000 {
			t.Fatalf("no count of the succeeded proposal in /metrics:\n%s", metrics)
		}
		out, err := exec.Command("curl", "-s", s.base+"/metrics").Output()
		if err != nil {
			t.Fatal(err)
		}
		metrics = out
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{
		`countersign_webhook_duration_seconds_count{action="payments.refund",endpoint="execute",status="200"} 1`,
		`countersign_webhook_duration_seconds_count{action="payments.refund",endpoint="prepare",status="200"} 1`,
		`countersign_proposal_transitions_total{status="succeeded"} 1`,
		`countersign_proposals{status="succeeded"} 1`,
		`countersign_proposals{status="pending"} 0`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if len(backend.execs) != 1 || len(backend.bodies) != 1 {
		t.Fatalf("executes: %v, want exactly one", backend.execs)
	}
	body := backend.bodies[0]
	op := p["operation_id"].(string)
	if backend.execs[op] != 1 || body["operation_id"] != op || body["actor"] != "alice" || body["tenant"] != "acme" ||
		body["state_version"] != "v7" || body["attempt"] != float64(1) {
		t.Fatalf("execute body %v (keys %v), want operation %s as alice with state v7", body, backend.execs, op)
	}
}

func TestWebhookActionsOnSQLite(t *testing.T) {
	testWebhookFlow(t, "sqlite:"+filepath.Join(t.TempDir(), "webhook.db"))
}

func TestWebhookActionsOnPostgreSQL(t *testing.T) {
	testWebhookFlow(t, pgStoreURL(t))
}
