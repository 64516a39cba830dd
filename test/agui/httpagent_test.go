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
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
)

// The node tools run without touching the network; npm ci alone reaches
// the registry, and only when node_modules is not what package-lock.json
// pins.
var quietEnv = nodetest.QuietEnv

var listening = regexp.MustCompile(`countersign listening on (http://127\.0\.0\.1:[0-9]+)`)

// TestHttpAgent runs the node tests (npm test: node --test) against
// `countersign serve`, then checks that the backend executed exactly the
// refunds the node tests approved.
func TestHttpAgent(t *testing.T) {
	dir := needNode(t)
	backend := &refundBackend{execs: map[string]int{}}
	ts := httptest.NewServer(backend)
	defer ts.Close()
	url := startServer(t, writeConfig(t, ts.URL))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), quietEnv...), "COUNTERSIGN_URL="+url, "COUNTERSIGN_BACKEND_URL="+ts.URL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("# fail 0")) || !bytes.Contains(out, []byte("# skipped 0")) ||
		!bytes.Contains(out, []byte("# todo 0")) || bytes.Contains(out, []byte("# pass 0\n")) {
		t.Fatalf("npm test passed with failures, skips or no tests:\n%s", out)
	}
	t.Logf("npm test:\n%s", out)
	// The customers are the node tests' (httpagent.test.mjs): one refund
	// each, approved by resume, rejected, cancelled, approved by "yes".
	backend.mu.Lock()
	defer backend.mu.Unlock()
	want := map[string]int{"c_approved": 1, "c_yes": 1}
	if fmt.Sprint(backend.execs) != fmt.Sprint(want) {
		t.Fatalf("executions by customer %v, want %v", backend.execs, want)
	}
}

// writeConfig writes the server's configuration: alice's key, refunds
// asking the requester (so the thread's owner approves their own, as AG-UI
// lets only the owner run on a thread) and waiting, the refund executing at
// backend, and a scripted default agent that calls it.
func writeConfig(t *testing.T, backend string) string {
	t.Helper()
	tmp := t.TempDir()
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, roles: [agent]}
webhook_secret_env: AGUI_E2E_WEBHOOK_SECRET
worker: {poll_interval: 100ms, lease: 5s}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["requester"], mode: wait}
actions:
  - name: payments.refund
    input_schema: {type: object, required: [amount, customer], additionalProperties: false,
                   properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}}
    confirmation: {title: "Refund {amount} to {customer}", verb: Refund}
    execute: {url: %s/execute, timeout: 5s}
default_agent: support
agents:
  - name: support
    actions: ["payments.*"]
    model:
      provider: scripted
      rules:
        - match: '(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)'
          say: "I'll ask for that refund."
          call: {action: payments.refund, input: '{"amount": {amount}, "customer": "{customer}"}'}
        - match: '.*'
          say: "I can refund payments."
      after_tool: "Done: {summary}"
`, "sqlite:"+filepath.Join(tmp, "countersign.db"), backend)
	path := filepath.Join(tmp, "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGUI_E2E_WEBHOOK_SECRET", "s3cret-for-the-agui-test")
	return path
}

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

// startServer builds cmd/countersign and serves it with the configuration
// at config, and returns its URL once it listens. The test's cleanup stops
// it with SIGTERM.
func startServer(t *testing.T, config string) string {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "countersign")
	build := exec.Command("go", "build", "-o", bin, "github.com/countersign/countersign/cmd/countersign")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/countersign: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--config", config)
	cmd.Dir = tmp
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
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
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
	case url := <-found:
		return url
	case err := <-done:
		<-read
		t.Fatalf("countersign serve exited before listening: %v\n%s", err, logs.String())
	case <-time.After(time.Minute):
		t.Fatal("countersign serve did not say where it listens")
	}
	return ""
}
