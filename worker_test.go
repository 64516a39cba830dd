package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// noopAction counts executions per operation id.
type noopAction struct {
	mu    sync.Mutex
	calls map[string]int
	block chan struct{} // when set, Execute waits for it or ctx
}

func (n *noopAction) action(t testing.TB, name string, reconcile bool) *countersign.Action {
	spec := countersign.RawActionSpec{Name: name, Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			n.mu.Lock()
			n.calls[req.OperationID]++
			n.mu.Unlock()
			if n.block != nil {
				select {
				case <-n.block:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &countersign.Receipt{ID: "r_" + req.OperationID}, nil
		},
	}}
	if reconcile {
		spec.Hooks.Reconcile = func(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.calls[req.OperationID] > 0 {
				return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "r_" + req.OperationID}, nil
			}
			return &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}, nil
		}
	}
	return mustAction(t, spec)
}

func (n *noopAction) counts() (ops, total, max int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.calls {
		ops++
		total += c
		if c > max {
			max = c
		}
	}
	return ops, total, max
}

func independentRule() *countersign.Policy {
	return &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk,
		Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent}}}
}

// approveMany creates and approves n independent proposals.
func approveMany(t testing.TB, e *countersign.Engine, action string, n int) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		res, err := e.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: fmt.Sprintf("t%d", i%7), ToolCallID: fmt.Sprintf("c%d", i),
			Action: action, Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
			t.Fatal(err)
		}
		ids[i] = res.ProposalID
	}
	return ids
}

// TestWorkerDrainsConcurrentlyExactlyOnce: two workers on one store, each
// with three claim lanes and three settlement lanes, race for the same
// rows; every proposal runs once.
func TestWorkerDrainsConcurrentlyExactlyOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		st := open(t, time.Now)
		n := &noopAction{calls: map[string]int{}}
		e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{n.action(t, "noop", false)}, Policy: independentRule()})
		if err != nil {
			t.Fatal(err)
		}
		ids := approveMany(t, e, "noop", 300)
		ctx, stop := context.WithCancel(context.Background())
		// Two workers on one store race for the same rows.
		var wg sync.WaitGroup
		for range 2 {
			w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 5 * time.Millisecond, LeaseDuration: 10 * time.Second, MaxConcurrency: 16, Lanes: 3})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.Run(ctx); err != nil {
					t.Error(err)
				}
			}()
		}
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range ids {
			p, err := e.Wait(wctx, tAlice, id)
			if err != nil || p.Status != cstype.StatusSucceeded {
				t.Fatalf("proposal %s: %v, %v", id, p, err)
			}
		}
		stop()
		wg.Wait()
		if ops, total, most := n.counts(); ops != 300 || total != 300 || most != 1 {
			t.Fatalf("operations %d, executions %d, most per operation %d; want 300, 300, 1", ops, total, most)
		}
	})
}

func TestWorkerShutdownCancelsAtTheDeadline(t *testing.T) {
	t.Parallel()
	n := &noopAction{calls: map[string]int{}, block: make(chan struct{})}
	e, err := countersign.New(countersign.Options{Store: memstore.New(nil), Actions: []*countersign.Action{n.action(t, "slow", false)}, Policy: independentRule()})
	if err != nil {
		t.Fatal(err)
	}
	ids := approveMany(t, e, "slow", 1)
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 5 * time.Millisecond, LeaseDuration: 10 * time.Second, ShutdownTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	for {
		if ops, _, _ := n.counts(); ops == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the shutdown deadline")
	}
	// The cancelled execution's outcome is uncertain, and it says so.
	p, _ := e.Proposal(context.Background(), tAlice, ids[0])
	if p.Status != cstype.StatusUnknown {
		t.Fatalf("status after a cancelled execution = %s, want unknown", p.Status)
	}
}

// failingRenewals makes every lease renewal fail, as a lost database would.
type failingRenewals struct {
	store.Store
	renewals atomic.Int32
}

func (f *failingRenewals) RenewLease(ctx context.Context, p *store.RenewLeaseParams) (*cstype.Lease, error) {
	f.renewals.Add(1)
	return nil, errors.New("connection refused")
}

func TestLostLeaseStopsWithoutSettling(t *testing.T) {
	t.Parallel()
	n := &noopAction{calls: map[string]int{}, block: make(chan struct{})}
	st := &failingRenewals{Store: memstore.New(nil)}
	e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{n.action(t, "slow", false)}, Policy: independentRule()})
	if err != nil {
		t.Fatal(err)
	}
	ids := approveMany(t, e, "slow", 1)
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Millisecond, LeaseDuration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The execution blocks; renewals fail; when the lease runs out locally
	// the execution is cancelled and must not settle.
	if n, err := w.RunOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	p, _ := e.Proposal(context.Background(), tAlice, ids[0])
	if p.Status != cstype.StatusExecuting || st.renewals.Load() == 0 {
		t.Fatalf("status %s after %d failed renewals, want executing (never settled)", p.Status, st.renewals.Load())
	}
	// Another worker recovers it: the first attempt's outcome is unknown,
	// and a non-idempotent action is never executed again.
	time.Sleep(350 * time.Millisecond)
	close(n.block)
	if n, err := w.RunOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("recovery RunOnce = %d, %v", n, err)
	}
	p, _ = e.Proposal(context.Background(), tAlice, ids[0])
	if _, total, _ := n.counts(); p.Status != cstype.StatusUnknown || total != 1 {
		t.Fatalf("after recovery: %s with %d executions; want unknown with 1", p.Status, total)
	}
}

func TestWorkerRecoversDeadCallers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		reconcile  bool
		idempotent bool
		executed   bool // whether the dead caller's attempt reached the backend
		want       cstype.Status
		executions int
	}{
		{name: "reconcile: applied", reconcile: true, executed: true, want: cstype.StatusSucceeded, executions: 1},
		{name: "reconcile: not applied", reconcile: true, executed: false, want: cstype.StatusFailed, executions: 0},
		{name: "idempotent: retried once more", idempotent: true, executed: true, want: cstype.StatusSucceeded, executions: 2},
		{name: "neither: unknown", executed: true, want: cstype.StatusUnknown, executions: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := newClock()
			st := memstore.New(&memstore.Options{Now: clk.Now})
			n := &noopAction{calls: map[string]int{}}
			a := n.action(t, "op", tc.reconcile)
			if tc.idempotent {
				spec := countersign.RawActionSpec{Name: "op", Idempotent: true, Hooks: countersign.Hooks{Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
					n.mu.Lock()
					defer n.mu.Unlock()
					n.calls[req.OperationID]++
					return &countersign.Receipt{ID: "r"}, nil
				}}}
				a = mustAction(t, spec)
			}
			e, err := countersign.New(countersign.Options{Store: st, Now: clk.Now, Actions: []*countersign.Action{a},
				Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}}}}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			res, err := e.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: "c", Action: "op", Input: json.RawMessage(`{}`), WaitTimeout: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
				t.Fatal(err)
			}
			// The waiting caller claims it, (maybe) reaches the backend, and dies.
			claimed, err := st.Claim(ctx, &store.ClaimParams{Tenant: "acme", ID: res.ProposalID, Owner: "dead-caller", LeaseDuration: time.Second, ConsumedBy: "c"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.executed {
				n.calls[claimed.OperationID]++
			}
			clk.Advance(2 * time.Second)
			w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: time.Second, LeaseDuration: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := w.RunOnce(ctx); got != 1 || err != nil {
				t.Fatalf("RunOnce = %d, %v", got, err)
			}
			p, _ := e.Proposal(ctx, tAlice, res.ProposalID)
			if _, total, _ := n.counts(); p.Status != tc.want || total != tc.executions {
				t.Fatalf("status %s, executions %d; want %s, %d", p.Status, total, tc.want, tc.executions)
			}
		})
	}
}

// TestWorkerSweepOnce: one SweepOnce runs a batch of each sweeping job a
// worker runs, and counts what each did: three stale refunds escalate and
// are reminded of, in batches of two, and expire at their TTL; an expired
// inbox session is removed. On every store.
func TestWorkerSweepOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open, rules: escalationRules})
		ctx := t.Context()
		var ids []string
		for i := range 3 {
			res := h.call(refundCall(fmt.Sprint("c_sweep", i), countersign.ModeWait, fmt.Sprintf(`{"amount": %d, "customer": "c_%d"}`, 10+i, i)))
			if res.Status != countersign.ResultPending {
				t.Fatalf("call %d: %s, want pending", i, res.Status)
			}
			ids = append(ids, res.ProposalID)
		}
		if _, _, err := h.engine.StartSession(ctx, &countersign.StartSessionParams{Identity: tBob, Credential: "k", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		w, err := h.engine.NewWorker(countersign.WorkerOptions{SweepBatch: 2, NoSealer: true})
		if err != nil {
			t.Fatal(err)
		}
		sweep := func(want countersign.SweepCounts) {
			t.Helper()
			if got, err := w.SweepOnce(ctx); err != nil || got != want {
				t.Fatalf("SweepOnce = %+v, %v; want %+v", got, err, want)
			}
		}
		sweep(countersign.SweepCounts{})
		h.clock.Advance(30 * time.Minute)
		sweep(countersign.SweepCounts{Escalated: 2, Reminded: 2, Sessions: 1})
		sweep(countersign.SweepCounts{Escalated: 1, Reminded: 1})
		for _, id := range ids {
			if p, err := h.engine.Proposal(ctx, tMona, id); err != nil || p.Status != cstype.StatusPending {
				t.Fatalf("after the escalation, as a manager: %+v, %v", p, err)
			}
		}
		// Expiry runs first: the one it leaves pending is reminded.
		h.clock.Advance(2 * time.Hour)
		sweep(countersign.SweepCounts{Expired: 2, Reminded: 1})
		sweep(countersign.SweepCounts{Expired: 1})
		for _, id := range ids {
			if p, err := h.engine.Proposal(ctx, tBob, id); err != nil || p.Status != cstype.StatusExpired {
				t.Fatalf("past the TTL: %+v, %v; want expired", p, err)
			}
		}
	})
}

func TestClaimShare(t *testing.T) {
	for _, c := range []struct{ free, idle, want int }{
		{1000, 2, 500}, // a drain's first claims: one half each
		{500, 1, 500},  // the last idle lane takes the rest
		{63, 2, 63},    // too few to split
		{64, 2, 32},
		{65, 2, 33},
		{100, 4, 32}, // never below the smallest share
		{7, 4, 7},
		{1, 1, 1},
	} {
		if got := countersign.ClaimShare(c.free, c.idle); got != c.want {
			t.Errorf("claimShare(%d free, %d idle lanes) = %d, want %d", c.free, c.idle, got, c.want)
		}
	}
}

// claimCounter counts the claims a worker makes.
type claimCounter struct {
	store.Store
	claims atomic.Int64
}

func (c *claimCounter) ClaimBatch(ctx context.Context, params *store.ClaimBatchParams) ([]*store.Claimed, error) {
	c.claims.Add(1)
	return c.Store.ClaimBatch(ctx, params)
}

// TestIdleWorkerDoesNotSpin: once its work is done and every slot is free,
// a worker with several claim lanes claims again only when something wakes
// it (here at most one poll in the window), not in a loop on claims that
// come back empty.
func TestIdleWorkerDoesNotSpin(t *testing.T) {
	t.Parallel()
	st := &claimCounter{Store: memstore.New(nil)}
	n := &noopAction{calls: map[string]int{}}
	e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{n.action(t, "noop", false)}, Policy: independentRule()})
	if err != nil {
		t.Fatal(err)
	}
	ids := approveMany(t, e, "noop", 20)
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: time.Second, LeaseDuration: time.Minute, MaxConcurrency: 8, Lanes: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range ids {
		if p, err := e.Wait(wctx, tAlice, id); err != nil || p.Status != cstype.StatusSucceeded {
			t.Fatalf("proposal %s: %v, %v", id, p, err)
		}
	}
	before := st.claims.Load()
	<-time.After(300 * time.Millisecond)
	idle := st.claims.Load() - before
	stop()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	// The last settlements may still free slots (one claim), and a poll may
	// fall in the window (one more per lane).
	if idle > 3 {
		t.Fatalf("an idle worker claimed %d times in 300 ms", idle)
	}
}
