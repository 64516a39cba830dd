package aguitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/pgtest"
)

// The node tools run without touching the network; npm ci alone reaches
// the registry, and only when node_modules is not what package-lock.json
// pins.
var quietEnv = nodetest.QuietEnv

var listening = regexp.MustCompile(`countersign listening on (http://127\.0\.0\.1:[0-9]+)`)

// TestHttpAgent runs the node tests (npm test: node --test) against
// `countersign serve` on each store, SQLite and PostgreSQL, one binary
// built for both, then checks that each store's backend executed exactly
// the refunds its node tests approved.
func TestHttpAgent(t *testing.T) {
	dir := needNode(t)
	bin := buildServer(t)
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"SQLite", sqliteStore},
		{"PostgreSQL", postgresStore},
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

// nodeSummary finds the counts node --test's TAP reporter ends with.
var nodeSummary = regexp.MustCompile(`(?m)^# (pass|fail|skipped|todo|cancelled) ([0-9]+)$`)

// runNodeTests serves bin on store, runs npm test in dir against it and
// checks the backend's executions.
func runNodeTests(t *testing.T, dir, bin, store string) {
	backend := &refundBackend{execs: map[string]int{}}
	ts := httptest.NewServer(backend)
	defer ts.Close()
	base := startServer(t, bin, writeConfig(t, store, ts.URL))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), quietEnv...), "COUNTERSIGN_URL="+base, "COUNTERSIGN_BACKEND_URL="+ts.URL)
	// npm starts node as its child: on the deadline the whole group is
	// killed, so that a hung node test cannot keep the output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test: %v\n%s", err, out)
	}
	counts := map[string]string{}
	for _, m := range nodeSummary.FindAllStringSubmatch(string(out), -1) {
		counts[m[1]] = m[2]
	}
	if counts["fail"] != "0" || counts["skipped"] != "0" || counts["todo"] != "0" || counts["cancelled"] != "0" ||
		counts["pass"] == "" || counts["pass"] == "0" {
		t.Fatalf("npm test passed with failures, skips or no tests (%v):\n%s", counts, out)
	}
	t.Logf("npm test: %s node tests pass\n%s", counts["pass"], out)
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if fmt.Sprint(backend.execs) != fmt.Sprint(wantExecutions) {
		t.Fatalf("executions by customer %v, want %v", backend.execs, wantExecutions)
	}
}

// sqliteStore is a store setting for a new SQLite file of t's own.
func sqliteStore(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "countersign.db")
}

// postgresStore is a store setting for the test server (pgtest) on a
// schema of t's own, dropped when t ends, after the server stopped (that
// cleanup is registered later, so it runs first). pgtest's DSN sets
// search_path to the schema, but the store names its schema in every
// statement, so the URL's schema parameter, which serve takes out and
// gives the store, is what puts the tables there. The pool is sized for a
// test (pgtest.PoolDSN). Without a reachable PostgreSQL t skips, except in
// CI, where it fails (pgtest.NewSchema).
func postgresStore(t *testing.T) string {
	dsn, schema := pgtest.NewSchema(t)
	u, err := url.Parse(pgtest.PoolDSN(dsn))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s must be a postgres:// URL, the form a configuration's store takes", pgtest.EnvDSN)
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return u.String()
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

// buildServer builds cmd/countersign once for every subtest.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "countersign")
	build := exec.Command("go", "build", "-o", bin, "github.com/countersign/countersign/cmd/countersign")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/countersign: %v\n%s", err, out)
	}
	return bin
}

// startServer serves bin with the configuration at config, and returns
// its URL once it listens. The test's cleanup stops it with SIGTERM.
func startServer(t *testing.T, bin, config string) string {
	t.Helper()
	tmp := t.TempDir()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--config", config)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), webhookSecretEnv)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	found := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	// done is closed once the process exited, with its error in waitErr:
	// both the wait for it to listen and the cleanup read it.
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-read
		if t.Failed() {
			t.Logf("countersign serve:\n%s", logs.String())
		}
	})
	select {
	case base := <-found:
		return base
	case <-done:
		<-read
		t.Fatalf("countersign serve exited before listening: %v\n%s", waitErr, logs.String())
	case <-time.After(time.Minute):
		t.Fatal("countersign serve did not say where it listens")
	}
	return ""
}
