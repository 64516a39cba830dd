package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store/pgstore"
)

// startProcess runs the binary with args, collecting its output, and stops
// it with SIGTERM when t ends.
func startProcess(t *testing.T, args ...string) *running {
	t.Helper()
	s := &running{done: make(chan error, 1), read: make(chan struct{})}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Dir = t.TempDir()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	go func() {
		defer close(s.read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			_, _ = s.Write([]byte(sc.Text() + "\n"))
		}
	}()
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(func() {
		stopping := time.Now()
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(40 * time.Second):
			_ = s.cmd.Process.Kill()
		}
		t.Logf("%s stopped in %v", args[0], time.Since(stopping).Round(time.Millisecond))
		if t.Failed() {
			t.Logf("%v:\n%s", args, s.output())
		}
	})
	return s
}

// waitOutput waits until the process printed want, failing t if it exits
// first or takes longer than d.
func waitOutput(t *testing.T, s *running, want string, d time.Duration) {
	t.Helper()
	end := time.After(d)
	for !strings.Contains(s.output(), want) {
		select {
		case err := <-s.done:
			s.done <- err
			<-s.read
			t.Fatalf("exited (%v) before printing %q:\n%s", err, want, s.output())
		case <-end:
			t.Fatalf("did not print %q within %v:\n%s", want, d, s.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestStartWaitsForTheStore starts `serve` and `worker` while PostgreSQL
// cannot be reached (a proxy between them and the server refuses
// connections): both wait, saying so, instead of exiting; once the proxy
// lets them through, serve answers /readyz and the worker executes an
// approval it finds in the store. A worker whose connect_timeout runs out
// exits with a message naming it.
func TestStartWaitsForTheStore(t *testing.T) {
	dsn, schema := pgtest.NewSchema(t)
	proxy, via := pgtest.Proxied(t, pgtest.PoolDSN(dsn))
	u, err := url.Parse(via)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	q.Del("search_path")
	u.RawQuery = q.Encode()

	backend := &testBackend{t: t, secret: []byte("s3cret-of-the-wait-test"), execs: map[string]int{}}
	ts := httptest.NewServer(backend)
	defer ts.Close()
	t.Setenv("WAIT_WEBHOOK_SECRET", string(backend.secret))
	cfg := func(timeout string) string {
		path := filepath.Join(t.TempDir(), "countersign.yaml")
		body := fmt.Sprintf(`store:
  url: %q
  connect_timeout: %s
auth:
  api_keys:
    - {key: wait_key_alice, tenant: acme, actor: alice, roles: [agent]}
webhook_secret_env: WAIT_WEBHOOK_SECRET
worker: {poll_interval: 100ms, lease: 5s}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance"], mode: independent}
actions:
  - name: payments.refund
    execute: {url: %s/execute, timeout: 5s}
`, u.String(), timeout, ts.URL)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	began := time.Now()
	t.Cleanup(func() { t.Logf("test body and cleanups took %v", time.Since(began).Round(time.Millisecond)) })
	proxy.Down()
	// A connect_timeout that runs out ends the start with a reason.
	short := startProcess(t, "worker", "--config", cfg("1s"))
	select {
	case err := <-short.done:
		short.done <- err // for the cleanup
		<-short.read
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(short.output(), "could not be reached within store.connect_timeout (1s") {
			t.Fatalf("worker with connect_timeout 1s: %v\n%s", err, short.output())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a worker with connect_timeout 1s still waits after 20s")
	}

	path := cfg("60s")
	srv := startProcess(t, "serve", "--listen", "127.0.0.1:0", "--config", path)
	wrk := startProcess(t, "worker", "--config", path)
	waitOutput(t, srv, "waiting for the store", 20*time.Second)
	waitOutput(t, wrk, "waiting for the store", 20*time.Second)
	time.Sleep(1500 * time.Millisecond) // several attempts, and still waiting
	for _, p := range []*running{srv, wrk} {
		select {
		case err := <-p.done:
			t.Fatalf("exited while the store was down: %v\n%s", err, p.output())
		default:
		}
	}
	if n := strings.Count(wrk.output(), "waiting for the store"); n < 2 {
		t.Errorf("the worker logged %d waits in 1.5s, want at least 2", n)
	}
	downFor := time.Now()
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, srv, "listening on", 30*time.Second)
	waitOutput(t, wrk, "countersign worker running", 30*time.Second)
	t.Logf("started %v after the store came back", time.Since(downFor).Round(time.Millisecond))
	base := listening.FindStringSubmatch(srv.output())[1]
	if resp, err := http.Get(base + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz after the wait: %v %v", resp, err)
	}

	// An approval the worker processes execute (serve runs a worker too:
	// either may take it; the backend sees it once).
	ctx := context.Background()
	st, err := pgstore.Open(ctx, pgtest.PoolDSN(dsn), &pgstore.Options{Schema: schema, SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	act, err := countersign.NewRawAction(countersign.RawActionSpec{Name: "payments.refund", Hooks: countersign.Hooks{
		Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			t.Error("the test's own engine executed")
			return nil, errors.New("not here")
		}}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{act},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent}}}})
	if err != nil {
		t.Fatal(err)
	}
	alice := countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	res, err := e.Call(ctx, &countersign.Call{Identity: alice, ThreadID: "t1", ToolCallID: "c1", Action: "payments.refund", Input: json.RawMessage(`{"amount":5}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Decide(ctx, &countersign.Decision{Identity: countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}},
		ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := e.Wait(wctx, alice, res.ProposalID)
	t.Logf("executed %v after the start", time.Since(began).Round(time.Millisecond))
	if err != nil || p.Status != cstype.StatusSucceeded {
		t.Fatalf("the approval after the wait: %v %v", p, err)
	}
	backend.mu.Lock()
	defer backend.mu.Unlock()
	if n := backend.execs[p.OperationID]; n != 1 || len(backend.execs) != 1 {
		t.Fatalf("backend executions %v, want operation %s once", backend.execs, p.OperationID)
	}
}
