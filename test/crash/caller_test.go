package crash

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/store"
)

// Caller-executed actions, with real processes: a caller process makes the
// call, gets the execute answer (the claim), performs the side effect
// (recorded in the ledger) and is killed with SIGKILL before it settles.
// The server's workers notice the lapsed lease: the non-idempotent action
// ends unknown, the one that can reconcile is reconciled, the idempotent one
// is claimed again by the next caller process's identical call (same
// operation id, attempt 2). No attempt ever executes twice.

// Environment of a caller process (CS_CRASH_ROLE=caller).
const (
	envURL    = "CS_CRASH_URL"    // the server
	envTool   = "CS_CRASH_TOOL"   // the tool call id
	envName   = "CS_CRASH_NAME"   // the action
	envSettle = "CS_CRASH_SETTLE" // "1": settle after the effect; else hang
)

const (
	callerToken = "ck_crash_alice"
	callerLease = 2 * time.Second
)

// callerMain is a caller process: one call; on an execute answer, the side
// effect (a ledger row keyed by operation id, and attempt after the first),
// then a settlement or a hang until SIGKILL.
func callerMain() int {
	led, err := openLedger(os.Getenv(envLedger))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open ledger:", err)
		return 2
	}
	defer led.Close()
	base := os.Getenv(envURL)
	var res struct {
		Status      string `json:"status"`
		ProposalID  string `json:"proposal_id"`
		OperationID string `json:"operation_id"`
		Lease       struct {
			Token   string `json:"token"`
			Attempt int    `json:"attempt"`
		} `json:"lease"`
	}
	if err := post(base+"/v1/calls", map[string]any{
		"thread_id": "t_crash", "tool_call_id": os.Getenv(envTool), "action": os.Getenv(envName),
		"input": map[string]any{"n": 1}, "wait_seconds": 0,
	}, &res); err != nil {
		fmt.Fprintln(os.Stderr, "call:", err)
		return 2
	}
	if res.Status != "execute" {
		fmt.Printf("ANSWER %s\n", res.Status)
		return 0
	}
	key := res.OperationID
	if res.Lease.Attempt > 1 {
		key += "#" + strconv.Itoa(res.Lease.Attempt)
	}
	if err := led.record(context.Background(), key, res.ProposalID); err != nil {
		fmt.Fprintln(os.Stderr, "effect:", err)
		return 2
	}
	fmt.Printf("EFFECT %s %s %d\n", res.ProposalID, res.OperationID, res.Lease.Attempt)
	if os.Getenv(envSettle) != "1" {
		select {} // until the test kills this process
	}
	var settled struct {
		Status string `json:"status"`
	}
	if err := post(base+"/v1/proposals/"+res.ProposalID+"/settle", map[string]any{
		"lease_token": res.Lease.Token, "outcome": "succeeded", "receipt": "rc_" + key,
	}, &settled); err != nil {
		fmt.Fprintln(os.Stderr, "settle:", err)
		return 2
	}
	fmt.Printf("SETTLED %s\n", settled.Status)
	return 0
}

func post(url string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest("POST", url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+callerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, rb)
	}
	return json.Unmarshal(rb, out)
}

// callerServer serves the API on st with the three caller-executed actions
// and a worker, until the test ends.
func callerServer(t *testing.T, st store.Store, led ledger) string {
	t.Helper()
	mk := func(name string, idempotent bool, hooks countersign.Hooks) *countersign.Action {
		a, err := countersign.NewRawAction(countersign.RawActionSpec{Name: name, CallerExecuted: true, Idempotent: idempotent, Hooks: hooks})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	actions := []*countersign.Action{
		mk("caller.once", false, countersign.Hooks{}),
		mk("caller.idem", true, countersign.Hooks{}),
		mk("caller.recon", false, countersign.Hooks{Reconcile: func(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
			ok, err := led.has(ctx, req.OperationID)
			switch {
			case err != nil:
				return nil, err
			case ok:
				return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "rc_" + req.OperationID}, nil
			}
			return &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}, nil
		}}),
	}
	policy := &countersign.Policy{Rules: []countersign.Rule{{Match: "caller.*", Effect: countersign.EffectAllow}}}
	e, err := countersign.New(countersign.Options{Store: st, Policy: policy, Actions: actions, LeaseDuration: callerLease, WaitPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := auth.NewAPIKeys([]auth.APIKey{{Key: callerToken, Tenant: tenant, Actor: "alice", Roles: []string{"agent"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Engine: e, Auth: keys, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: pollTick, LeaseDuration: callerLease, NoSealer: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		ts.Close()
	})
	return ts.URL
}

// caller runs one caller process and returns its first line of output. With
// kill, the process is killed with SIGKILL once it has said it made the
// effect.
func runCaller(t *testing.T, url, ledgerSpec, name, tool string, kill bool) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=caller", envURL+"="+url, envLedger+"="+ledgerSpec, envName+"="+name, envTool+"="+tool)
	if !kill {
		cmd.Env = append(cmd.Env, envSettle+"=1")
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	var first, all []string
	for lines.Scan() {
		all = append(all, lines.Text())
		if first == nil {
			first = all
			if kill && strings.HasPrefix(lines.Text(), "EFFECT ") {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	err = cmd.Wait()
	if kill {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("caller %s: %v (output %q), want it killed by SIGKILL after its effect", name, err, all)
		}
	} else if err != nil {
		t.Fatalf("caller %s: %v (output %q)", name, err, all)
	}
	return strings.Join(all, "\n")
}

// waitFor polls the proposal of (thread, tool) until ok says it is done.
func waitFor(t *testing.T, st store.Store, tool string, limit time.Duration, ok func(*store.Proposal) bool) *store.Proposal {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		p, err := st.GetProposalByToolCall(context.Background(), &store.GetProposalByToolCallParams{Tenant: tenant, ThreadID: "t_crash", ToolCallID: tool})
		if err == nil && ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("proposal of %s after %v: %+v (%v)", tool, limit, p, err)
		}
		time.Sleep(pollTick)
	}
}

func testCallerKilled(t *testing.T, b backend) {
	st := b.open(t)
	led, ledgerSpec := newLedger(t, b)
	url := callerServer(t, st, led)

	// Three callers claim, make their effect, and are killed at once.
	var wg sync.WaitGroup
	for _, name := range []string{"caller.once", "caller.idem", "caller.recon"} {
		wg.Go(func() {
			if out := runCaller(t, url, ledgerSpec, name, "call_"+name, true); !strings.HasPrefix(out, "EFFECT ") {
				t.Errorf("caller %s said %q, want its effect", name, out)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	killed := time.Now()
	limit := callerLease + 10*time.Second // the lease, a poll, and a busy machine
	once := waitFor(t, st, "call_caller.once", limit, func(p *store.Proposal) bool { return p.Status.Terminal() })
	recon := waitFor(t, st, "call_caller.recon", limit, func(p *store.Proposal) bool { return p.Status.Terminal() })
	idem := waitFor(t, st, "call_caller.idem", limit, store.ReleasedToCaller)
	t.Logf("%s: lapses routed %v after the kill", b.name, time.Since(killed).Round(time.Millisecond))
	if once.Status != store.StatusUnknown || once.Outcome == nil || once.Outcome.Executed != nil {
		t.Errorf("non-idempotent: %s (outcome %+v), want unknown, executed unknown", once.Status, once.Outcome)
	}
	if recon.Status != store.StatusSucceeded || recon.Outcome.Receipt != "rc_"+recon.OperationID {
		t.Errorf("reconcilable: %s (outcome %+v), want succeeded by reconciliation", recon.Status, recon.Outcome)
	}

	// The next caller processes repeat the calls: the uncertain one is
	// answered, never claimed again; the idempotent one claims attempt 2.
	if out := runCaller(t, url, ledgerSpec, "caller.once", "call_caller.once", false); out != "ANSWER unknown" {
		t.Errorf("repeat of the non-idempotent call: %q, want ANSWER unknown", out)
	}
	if out := runCaller(t, url, ledgerSpec, "caller.recon", "call_caller.recon", false); out != "ANSWER succeeded" {
		t.Errorf("repeat of the reconciled call: %q, want ANSWER succeeded", out)
	}
	want := fmt.Sprintf("EFFECT %s %s 2\nSETTLED applied", idem.ID, idem.OperationID)
	if out := runCaller(t, url, ledgerSpec, "caller.idem", "call_caller.idem", false); out != want {
		t.Errorf("repeat of the idempotent call: %q, want %q", out, want)
	}
	final, err := st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: tenant, ID: idem.ID})
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != store.StatusSucceeded || final.Attempt != 2 || final.Outcome.Receipt != "rc_"+idem.OperationID+"#2" {
		t.Errorf("idempotent: %s attempt %d (outcome %+v), want succeeded at attempt 2", final.Status, final.Attempt, final.Outcome)
	}
	executions, violations := ledgerCounts(t, led)
	// once: 1, recon: 1, idem: attempts 1 and 2.
	if executions != 4 || violations != 0 {
		t.Errorf("ledger: %d executions, %d violations; want 4, 0 (no attempt twice)", executions, violations)
	}
}

func TestCallerKilledSQLite(t *testing.T) { testCallerKilled(t, sqliteBackend(t)) }

func TestCallerKilledPostgreSQL(t *testing.T) { testCallerKilled(t, pgBackend(t)) }
