package aguitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
)

// TestHttpAgent runs the node tests (npm test: node --test) against
// `countersign serve` on each store, SQLite and PostgreSQL, one binary
// built for both, then checks that each store's backend executed exactly
// the refunds its node tests approved.
func TestHttpAgent(t *testing.T) {
	dir := needNode(t)
	bin := servetest.Build(t)
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return servetest.SQLiteStore(t) }},
		{"PostgreSQL", func(t *testing.T) string { return servetest.PostgresStore(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each store has its own server, backend and counts.
			t.Parallel()
			runNodeTests(t, dir, bin, tc.store(t))
		})
	}
}

// wantExecutions is how often the node tests (httpagent.test.mjs) expect
// the backend to execute each customer's refund: once for each approval
// that stands, whether it came by resume, by "yes", over the API before a
// resume of either verdict (run already gone on, or not), or by a resume
// after bad ones were refused. The other customers' refunds were rejected,
// cancelled, expired or are still pending, and never ran.
var wantExecutions = map[string]int{
	"c_approved":              1,
	"c_yes":                   1,
	"c_api_approve_went_same": 1,
	"c_api_approve_went_opp":  1,
	"c_api_approve_now_same":  1,
	"c_api_approve_now_opp":   1,
	"c_invalid":               1,
}

// runNodeTests serves bin on store, runs npm test in dir against it and
// checks the backend's executions.
func runNodeTests(t *testing.T, dir, bin, store string) {
	backend := &refundBackend{execs: map[string]int{}}
	ts := httptest.NewServer(backend)
	defer ts.Close()
	base := servetest.Start(t, bin, writeConfig(t, store, ts.URL), webhookSecretEnv)
	servetest.NPMTest(t, dir, 3*time.Minute, "COUNTERSIGN_URL="+base, "COUNTERSIGN_BACKEND_URL="+ts.URL)
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if fmt.Sprint(backend.execs) != fmt.Sprint(wantExecutions) {
		t.Fatalf("executions by customer %v, want %v", backend.execs, wantExecutions)
	}
}

// writeConfig writes the server's configuration on store: alice's and
// bob's keys (bob is in finance), the refund actions executing at backend,
// and a scripted default agent calling each. Refunds ask the requester (so
// the thread's owner approves their own, as AG-UI lets only the owner run
// on a thread) and wait; by their exact names, which beat the glob, a
// quick refund's proposal expires in two seconds and a big refund asks
// finance, which alice is not in. The scripted model answers with its
// first rule whose pattern matches, so the quick and big refunds' rules
// come before the plain refund's, whose pattern they match too.
func writeConfig(t *testing.T, store, backend string) string {
	t.Helper()
	tmp := t.TempDir()
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key: key_bob, tenant: acme, actor: bob, roles: [finance]}
webhook_secret_env: AGUI_E2E_WEBHOOK_SECRET
worker: {poll_interval: 100ms, lease: 5s}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["requester"], mode: wait}
    - {match: "payments.quickrefund", effect: ask, approvers: ["requester"], mode: wait, ttl: 2s}
    - {match: "payments.bigrefund", effect: ask, approvers: ["role:finance"], mode: wait}
actions:
  - name: payments.refund
    input_schema: %[3]s
    confirmation: {title: "Refund {amount} to {customer}", verb: Refund}
    execute: {url: %[2]s/execute, timeout: 5s}
  - name: payments.quickrefund
    input_schema: %[3]s
    confirmation: {title: "Quick refund {amount} to {customer}", verb: Refund}
    execute: {url: %[2]s/execute, timeout: 5s}
  - name: payments.bigrefund
    input_schema: %[3]s
    confirmation: {title: "Big refund {amount} to {customer}", verb: Refund}
    execute: {url: %[2]s/execute, timeout: 5s}
default_agent: support
agents:
  - name: support
    actions: ["payments.*"]
    model:
      provider: scripted
      rules:
        - match: '(?i)^quick refund (?P<amount>\d+) .*to (?P<customer>\w+)'
          say: "I'll ask for that quick refund."
          call: {action: payments.quickrefund, input: '{"amount": {amount}, "customer": "{customer}"}'}
        - match: '(?i)^big refund (?P<amount>\d+) .*to (?P<customer>\w+)'
          say: "I'll ask finance for that refund."
          call: {action: payments.bigrefund, input: '{"amount": {amount}, "customer": "{customer}"}'}
        - match: '(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)'
          say: "I'll ask for that refund."
          call: {action: payments.refund, input: '{"amount": {amount}, "customer": "{customer}"}'}
        - match: '(?i)^weather in (?P<city>\w+)'
          say: "Let me look."
          call: {client_tool: get_weather, input: '{"city": "{city}"}'}
        - match: '.*'
          say: "I can refund payments."
      after_tool: "Done: {summary}"
`, store, backend, refundSchema)
	path := filepath.Join(tmp, "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// refundSchema is the input schema of every refund action.
const refundSchema = `{type: object, required: [amount, customer], additionalProperties: false,
                   properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}}`

// webhookSecretEnv is the server's webhook secret, in the variable the
// configuration names; the test backend does not check the signatures (it
// stands for the refund system, whose signature check is not under test).
const webhookSecretEnv = "AGUI_E2E_WEBHOOK_SECRET=s3cret-for-the-agui-test"

// refundBackend is the refund's webhook backend: it counts executions by
// the input's customer, and answers GET /count?customer=… with that count
// for the node tests.
type refundBackend struct {
	mu    sync.Mutex
	execs map[string]int
}

func (b *refundBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/execute":
		var body struct {
			OperationID string `json:"operation_id"`
			Input       struct {
				Customer string `json:"customer"`
			} `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		b.execs[body.Input.Customer]++
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"receipt":"rf_%s","result":{"ok":true}}`, body.OperationID)
	case r.Method == http.MethodGet && r.URL.Path == "/count":
		b.mu.Lock()
		n := b.execs[r.URL.Query().Get("customer")]
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"executions":%d}`, n)
	default:
		http.NotFound(w, r)
	}
}

// needNode returns this folder's absolute path once node and the pinned
// npm packages are there (nodetest.Need).
func needNode(t *testing.T) string {
	t.Helper()
	return nodetest.Need(t, ".", "this test runs the AG-UI HttpAgent node tests")
}
