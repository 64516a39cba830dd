package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/webhook"
)

// slowBackend answers execute after a pause (or never, until the request
// ends), and reconcile with unknown; it records when each request came and
// whether the caller gave an execute up.
type slowBackend struct {
	pause             time.Duration // execute's; 0: hang until the request ends
	mu                sync.Mutex
	execs, reconciles []time.Time
	gaveUp            int // executes whose request context ended first
}

func (b *slowBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	if err := webhook.Verify(testSecret, r.Header.Get(webhook.SignatureHeader), raw, time.Now(), 0); err != nil {
		http.Error(w, `{"reason":"bad signature"}`, http.StatusUnauthorized)
		return
	}
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/execute":
		b.mu.Lock()
		b.execs = append(b.execs, time.Now())
		b.mu.Unlock()
		var wait <-chan time.Time
		if b.pause > 0 {
			wait = time.After(b.pause)
		}
		select {
		case <-wait:
			io.WriteString(w, `{"receipt":"rf_`+body["operation_id"].(string)+`"}`)
		case <-r.Context().Done():
			b.mu.Lock()
			b.gaveUp++
			b.mu.Unlock()
		}
	case "/reconcile":
		b.mu.Lock()
		b.reconciles = append(b.reconciles, time.Now())
		b.mu.Unlock()
		io.WriteString(w, `{"status":"unknown"}`)
	default:
		http.NotFound(w, r)
	}
}

// awaitGaveUp waits for the backend to see n executes given up: the
// server notices a cancelled request a moment after the client did.
func (b *slowBackend) awaitGaveUp(n int) {
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, _, g := b.counts(); g >= n {
			return
		}
	}
}

func (b *slowBackend) counts() (execs, reconciles, gaveUp int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.execs), len(b.reconciles), b.gaveUp
}

// faultEngine is an engine on st whose independent refunds run on the
// backend, with the given execute timeout and reconcile endpoint.
func faultEngine(t *testing.T, st store.Store, b *slowBackend, timeout time.Duration, reconcile bool, lease time.Duration) *countersign.Engine {
	t.Helper()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	spec := webhook.Spec{
		Name: "payments.refund", Version: "1", Kind: "write",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Execute:     &webhook.Endpoint{URL: srv.URL + "/execute", Timeout: timeout},
	}
	if reconcile {
		spec.Reconcile = &webhook.Endpoint{URL: srv.URL + "/reconcile", Timeout: time.Second}
	}
	a, err := webhook.NewAction(spec, webhook.Options{Secret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	e, err := countersign.New(countersign.Options{
		Store: st, Actions: []*countersign.Action{a}, LeaseDuration: lease,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent}}},
		ReconcileBackoff: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// approvedRefund makes an independent refund call and approves it.
func approvedRefund(t *testing.T, e *countersign.Engine) string {
	t.Helper()
	ctx := context.Background()
	res, err := e.Call(ctx, &countersign.Call{Identity: alice, ThreadID: "t1", ToolCallID: "c1", Action: "payments.refund",
		Input: json.RawMessage(`{"amount":40}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
		t.Fatal(err)
	}
	return res.ProposalID
}

// runWorker runs a worker on e for as long as the test lasts.
func runWorker(t *testing.T, e *countersign.Engine, lease time.Duration) {
	t.Helper()
	runWorkerPolling(t, e, lease, lease/10)
}

func runWorkerPolling(t *testing.T, e *countersign.Engine, lease, poll time.Duration) {
	t.Helper()
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: poll, LeaseDuration: lease, NoSealer: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// TestExecuteSlowerThanTheLease: an execute that takes three leases is kept
// alive by the renewals and succeeds, sent once.
func TestExecuteSlowerThanTheLease(t *testing.T) {
	t.Parallel()
	const lease = 400 * time.Millisecond
	b := &slowBackend{pause: 3 * lease}
	e := faultEngine(t, memstore.New(nil), b, 5*time.Second, false, lease)
	id := approvedRefund(t, e)
	runWorker(t, e, lease)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := e.Wait(ctx, alice, id)
	if err != nil || p.Status != cstype.StatusSucceeded || p.Outcome.Receipt != "rf_"+p.OperationID {
		t.Fatalf("proposal %v, %v: want succeeded", p, err)
	}
	if execs, _, gaveUp := b.counts(); execs != 1 || gaveUp != 0 {
		t.Fatalf("%d executes, %d given up; want 1, 0", execs, gaveUp)
	}
}

// TestExecuteHangingPastItsTimeout: an execute that never answers is given
// up at its timeout; the outcome is uncertain, and a non-idempotent action
// without reconcile ends unknown, sent once.
func TestExecuteHangingPastItsTimeout(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	b := &slowBackend{}
	e := faultEngine(t, memstore.New(nil), b, 200*time.Millisecond, false, lease)
	id := approvedRefund(t, e)
	runWorker(t, e, lease)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := e.Wait(ctx, alice, id)
	if err != nil || p.Status != cstype.StatusUnknown {
		t.Fatalf("proposal %v, %v: want unknown", p, err)
	}
	b.awaitGaveUp(1)
	if execs, _, gaveUp := b.counts(); execs != 1 || gaveUp != 1 {
		t.Fatalf("%d executes, %d given up; want 1, 1", execs, gaveUp)
	}
}

// TestLostLeaseCancelsExecute: when the lease is taken over while execute
// runs (here another holder's claim after the renewals stop landing), the
// request to the backend is cancelled.
func TestLostLeaseCancelsExecute(t *testing.T) {
	t.Parallel()
	const lease = 400 * time.Millisecond
	st := &noRenewals{Store: memstore.New(nil)}
	b := &slowBackend{} // hangs until cancelled
	e := faultEngine(t, st, b, 30*time.Second, false, lease)
	id := approvedRefund(t, e)
	runWorker(t, e, lease)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The execution is given up before the lease can lapse; its request
	// ends, and the next claim finds the outcome uncertain: unknown.
	p, err := e.Wait(ctx, alice, id)
	if err != nil || p.Status != cstype.StatusUnknown {
		t.Fatalf("proposal %v, %v: want unknown", p, err)
	}
	b.awaitGaveUp(1)
	if execs, _, gaveUp := b.counts(); execs != 1 || gaveUp != 1 {
		t.Fatalf("%d executes, %d given up; want 1 cancelled", execs, gaveUp)
	}
}

// noRenewals refuses every renewal as a store that cannot be reached would.
type noRenewals struct{ store.Store }

func (noRenewals) RenewLease(context.Context, *store.RenewLeaseParams) (*cstype.Lease, error) {
	return nil, store.Unavailable(io.ErrUnexpectedEOF)
}

// TestReconcileUnknownForALongTime: a reconcile that keeps answering unknown
// is retried with a pause that doubles (capped), not at every poll, and each
// unknown answer is counted on the outcome.
func TestReconcileUnknownForALongTime(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	b := &slowBackend{} // execute hangs past its timeout: uncertain, reconciled
	e := faultEngine(t, memstore.New(nil), b, 100*time.Millisecond, true, lease)
	id := approvedRefund(t, e)
	const poll = 5 * time.Millisecond
	runWorkerPolling(t, e, lease, poll)
	time.Sleep(1500 * time.Millisecond)
	p, err := e.Proposal(context.Background(), alice, id)
	if err != nil {
		t.Fatal(err)
	}
	_, reconciles, _ := b.counts()
	b.mu.Lock()
	var gaps []time.Duration
	for i := 1; i < len(b.reconciles); i++ {
		gaps = append(gaps, b.reconciles[i].Sub(b.reconciles[i-1]))
	}
	b.mu.Unlock()
	t.Logf("%d reconciles in 1.5s (polling every %v), gaps %v; outcome counts %d", reconciles, poll, gaps, p.Outcome.Reconciles)
	if p.Status != cstype.StatusReconciling || p.Outcome == nil || p.Outcome.Reconciles != reconciles {
		t.Fatalf("proposal %s, outcome %+v: want reconciling with %d attempts counted", p.Status, p.Outcome, reconciles)
	}
	// 10ms doubling: 10, 20, 40, … 640ms fit about 7 in 1.5s, where
	// reconciling at every 5ms poll would make some 300.
	if reconciles < 4 || reconciles > 12 {
		t.Fatalf("%d reconciles in 1.5s, want about 7 (a doubling pause)", reconciles)
	}
	// Each pause at least doubles the base once more (a poll's slack aside).
	for i := 1; i < len(gaps); i++ {
		if want := 10 * time.Millisecond << i; gaps[i] < want-poll {
			t.Errorf("gap %d is %v, want at least %v: the pause does not grow", i, gaps[i], want)
		}
	}
}
