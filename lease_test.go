package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/faultstore"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// leaseObserver counts what the engine reports.
type leaseObserver struct {
	mu         sync.Mutex
	leaseLost  int
	transition map[cstype.Status]int // by the status reached
}

func newLeaseObserver() *leaseObserver {
	return &leaseObserver{transition: map[cstype.Status]int{}}
}

func (o *leaseObserver) Transition(p *cstype.Proposal, from cstype.Status) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p.Status != from {
		o.transition[p.Status]++
	}
}

func (o *leaseObserver) Executed(string, time.Duration, error) {}

func (o *leaseObserver) LeaseLost(string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leaseLost++
}

func (o *leaseObserver) losses() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leaseLost
}

// leaseEngine returns an engine on st that proposes every call of action
// independently (a worker executes it), and one approved proposal.
func leaseEngine(t *testing.T, st store.Store, owner string, obs countersign.Observer, actions ...*countersign.Action) *countersign.Engine {
	t.Helper()
	e, err := countersign.New(countersign.Options{Store: st, Owner: owner, Observer: obs, Actions: actions, Policy: independentRule()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// leaseWorker returns a worker of e with the given lease.
func leaseWorker(t *testing.T, e *countersign.Engine, lease time.Duration) *countersign.Worker {
	t.Helper()
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: lease / 4, LeaseDuration: lease})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// checkRenewalDeadlines fails t unless every renewal was asked with a
// deadline before the lease then in force ran out.
func checkRenewalDeadlines(t *testing.T, fs *faultstore.Store) {
	t.Helper()
	for i, r := range fs.Renewals() {
		switch {
		case r.Deadline.IsZero():
			t.Errorf("renewal %d was asked without a deadline", i+1)
		case !r.Deadline.Before(r.InForce):
			t.Errorf("renewal %d: deadline %v is not before the lease in force ran out (%v)", i+1, r.Deadline, r.InForce)
		}
	}
}

// A lease whose renewals hang, fail or answer late is given up before it
// can run out by the store's clock: every renewal carries a deadline before
// the lease in force runs out, and Execute's context is cancelled before
// the store's lease expiry. The lease is reckoned from before the claim or
// the last successful renewal was asked for, so a slow answer does not
// stretch it. The bubble's clock makes the times exact: the engine and the
// store read the same fake clock, and it moves only when every goroutine
// waits.
func TestLeaseGivenUpBeforeItCanLapse(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	failed := errors.New("connection refused")
	cases := []struct {
		name       string
		claimDelay time.Duration
		renewals   []faultstore.Fault
	}{
		{name: "renewals hang", renewals: []faultstore.Fault{{Hang: true}}},
		{name: "renewals fail", renewals: []faultstore.Fault{{Err: failed}}},
		{name: "a slow renewal, then failures", renewals: []faultstore.Fault{{Delay: lease / 5}, {Err: failed}}},
		{name: "slow renewals, then one hangs", renewals: []faultstore.Fault{{Delay: lease / 5}, {Delay: lease / 5}, {Hang: true}}},
		{name: "a slow claim, then failures", claimDelay: lease / 5, renewals: []faultstore.Fault{{Err: failed}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fs := faultstore.New(memstore.New(nil))
				obs := newLeaseObserver()
				var cancelledAt time.Time
				var executions int
				a := mustAction(t, countersign.RawActionSpec{Name: "slow", Hooks: countersign.Hooks{
					Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
						executions++
						<-ctx.Done()
						cancelledAt = time.Now()
						fs.Note("execute: context ended")
						return nil, ctx.Err()
					},
				}})
				e := leaseEngine(t, fs, "w1", obs, a)
				id := approveMany(t, e, "slow", 1)[0]
				fs.SetClaimDelay(tc.claimDelay)
				fs.SetRenewals(tc.renewals...)

				if n, err := leaseWorker(t, e, lease).RunOnce(context.Background()); n != 1 || err != nil {
					t.Fatalf("RunOnce = %d, %v", n, err)
				}
				l, _ := fs.Lease(id)
				if cancelledAt.IsZero() || !cancelledAt.Before(l.ExpiresAt) {
					t.Fatalf("Execute's context ended at %v; the store's lease ran out at %v: it must end before", cancelledAt, l.ExpiresAt)
				}
				checkRenewalDeadlines(t, fs)
				if fs.Calls("RenewLease") == 0 || obs.losses() != 1 {
					t.Fatalf("%d renewals, %d lease losses reported; want some renewals and one loss", fs.Calls("RenewLease"), obs.losses())
				}
				// The outcome is uncertain and the lease gone: nothing is
				// settled, and the proposal waits for recovery.
				p, _ := e.Proposal(context.Background(), tAlice, id)
				if p.Status != cstype.StatusExecuting || len(fs.Settlements()) != 0 {
					t.Fatalf("status %s after %d settlements; want executing and none", p.Status, len(fs.Settlements()))
				}
				// Once the lease ran out, another worker recovers it; a
				// non-idempotent action is never executed again.
				time.Sleep(time.Until(l.ExpiresAt))
				fs.SetRenewals()
				if n, err := leaseWorker(t, leaseEngine(t, fs, "w2", nil, a), lease).RunOnce(context.Background()); n != 1 || err != nil {
					t.Fatalf("recovery RunOnce = %d, %v", n, err)
				}
				p, _ = e.Proposal(context.Background(), tAlice, id)
				if p.Status != cstype.StatusUnknown || executions != 1 {
					t.Fatalf("after recovery: %s after %d executions; want unknown after 1", p.Status, executions)
				}
			})
		})
	}
}

// A caller that executes its own call holds the lease the same way as a
// worker: reckoned from before its claim (or its allowed write's record,
// created executing) was asked for, given up before the store's lease can
// run out; and it is then told where the proposal stands, not handed an
// error.
func TestCallerLeaseGivenUpBeforeItCanLapse(t *testing.T) {
	t.Parallel()
	for _, allowed := range []bool{false, true} {
		name := "approved, the waiting caller executes"
		if allowed {
			name = "an allowed write"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				const lease = 30 * time.Second
				fs := faultstore.New(memstore.New(nil))
				obs := newLeaseObserver()
				var cancelledAt time.Time
				a := mustAction(t, countersign.RawActionSpec{Name: "slow", Hooks: countersign.Hooks{
					Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
						<-ctx.Done()
						cancelledAt = time.Now()
						return nil, ctx.Err()
					},
				}})
				rule := countersign.Rule{Match: "*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}}
				if allowed {
					rule = countersign.Rule{Match: "*", Effect: countersign.EffectAllow}
				}
				e, err := countersign.New(countersign.Options{Store: fs, Observer: obs, Actions: []*countersign.Action{a}, LeaseDuration: lease,
					Policy: &countersign.Policy{Rules: []countersign.Rule{rule}}})
				if err != nil {
					t.Fatal(err)
				}
				fs.SetClaimDelay(lease / 5)
				fs.SetRenewals(faultstore.Fault{Err: errors.New("connection refused")})
				ctx := context.Background()
				call := &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: "c", Action: "slow", Input: json.RawMessage(`{}`), WaitTimeout: 10 * lease}
				if !allowed {
					first := *call
					first.WaitTimeout = time.Second
					res, err := e.Call(ctx, &first)
					if err != nil || res.Status != countersign.ResultPending {
						t.Fatalf("Call = %+v, %v; want pending", res, err)
					}
					if _, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
						t.Fatal(err)
					}
				}
				// The caller (back, for the approved call) executes; its
				// lease is lost and nobody has recovered the proposal yet.
				res, err := e.Call(ctx, call)
				if err != nil || res.Status != countersign.ResultPending || res.ProposalID == "" {
					t.Fatalf("Call after the lease was lost = %+v, %v; want pending", res, err)
				}
				l, ok := fs.Lease(res.ProposalID)
				if !ok || cancelledAt.IsZero() || !cancelledAt.Before(l.ExpiresAt) {
					t.Fatalf("Execute's context ended at %v; the store's lease ran out at %v: it must end before", cancelledAt, l.ExpiresAt)
				}
				checkRenewalDeadlines(t, fs)
				if fs.Calls("RenewLease") == 0 || obs.losses() != 1 {
					t.Fatalf("%d renewals, %d lease losses reported; want some renewals and one loss", fs.Calls("RenewLease"), obs.losses())
				}
			})
		})
	}
}

// A healthy holder, even one whose renewals answer slowly, renews often
// enough never to reach the lapse timer, however long Execute runs.
func TestHealthyLeaseIsNeverGivenUp(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	for _, delay := range []time.Duration{0, lease / 10} {
		t.Run(fmt.Sprintf("renewals answer after %v", delay), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				fs := faultstore.New(memstore.New(nil))
				obs := newLeaseObserver()
				a := mustAction(t, countersign.RawActionSpec{Name: "long", Hooks: countersign.Hooks{
					Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
						select {
						case <-ctx.Done():
							return nil, ctx.Err()
						case <-time.After(10 * lease):
							return &countersign.Receipt{ID: "done"}, nil
						}
					},
				}})
				e := leaseEngine(t, fs, "w1", obs, a)
				id := approveMany(t, e, "long", 1)[0]
				fs.SetRenewals(faultstore.Fault{Delay: delay})
				if n, err := leaseWorker(t, e, lease).RunOnce(context.Background()); n != 1 || err != nil {
					t.Fatalf("RunOnce = %d, %v", n, err)
				}
				p, _ := e.Proposal(context.Background(), tAlice, id)
				if p.Status != cstype.StatusSucceeded || obs.losses() != 0 {
					t.Fatalf("status %s with %d lease losses; want succeeded with none", p.Status, obs.losses())
				}
				// Ten leases' worth of execution, renewed every third of one.
				if n := fs.Calls("RenewLease"); n < 25 {
					t.Fatalf("%d renewals over ten leases; want about 30", n)
				}
				checkRenewalDeadlines(t, fs)
			})
		})
	}
}

// A renewal that the store refuses because the execution's own last
// settlement landed first is no lost lease: nothing is reported, nothing
// cancelled.
func TestRenewalRefusedAfterTheLastSettlementIsNoLoss(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const lease = 30 * time.Second
		fs := faultstore.New(memstore.New(nil))
		obs := newLeaseObserver()
		gate := make(chan struct{})
		fs.SetRenewals(faultstore.Fault{Gate: gate}, faultstore.Fault{})
		a := mustAction(t, countersign.RawActionSpec{Name: "quick", Hooks: countersign.Hooks{
			Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				// Finish while a renewal is on its way.
				for fs.Calls("RenewLease") == 0 {
					time.Sleep(lease / 30)
				}
				return &countersign.Receipt{ID: "done"}, nil
			},
		}})
		// The settlement has landed: let the renewal reach the store now,
		// and wait until its refusal has been handled.
		letRenewalIn := func(ctx context.Context, p *cstype.Proposal) error {
			close(gate)
			synctest.Wait()
			return nil
		}
		e, err := countersign.New(countersign.Options{Store: fs, Observer: obs, Actions: []*countersign.Action{a},
			Policy: independentRule(), OnSettled: []countersign.SettledFunc{letRenewalIn}})
		if err != nil {
			t.Fatal(err)
		}
		id := approveMany(t, e, "quick", 1)[0]
		if n, err := leaseWorker(t, e, lease).RunOnce(context.Background()); n != 1 || err != nil {
			t.Fatalf("RunOnce = %d, %v", n, err)
		}
		r := fs.Renewals()
		p, _ := e.Proposal(context.Background(), tAlice, id)
		if len(r) != 1 || !errors.Is(r[0].Err, cstype.ErrLeaseLost) || p.Status != cstype.StatusSucceeded {
			t.Fatalf("renewals %+v, status %s; want one refused renewal after the success", r, p.Status)
		}
		if obs.losses() != 0 {
			t.Fatalf("%d lease losses reported; want none", obs.losses())
		}
	})
}

// fencedBackend is an action whose Execute outlives its cancelled context:
// it waits for the lease to be given up, optionally applies its change, then
// waits for release and answers success, as a backend that finished the
// request anyway would.
type fencedBackend struct {
	fs        *faultstore.Store
	cancelled chan struct{}
	release   chan struct{}

	mu         sync.Mutex
	executions int
	applied    map[string]bool
}

func newFencedBackend(fs *faultstore.Store) *fencedBackend {
	return &fencedBackend{fs: fs, cancelled: make(chan struct{}), release: make(chan struct{}), applied: map[string]bool{}}
}

func (b *fencedBackend) action(t *testing.T, reconcile bool) *countersign.Action {
	spec := countersign.RawActionSpec{Name: "pay", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			b.mu.Lock()
			b.executions++
			b.mu.Unlock()
			<-ctx.Done()
			b.mu.Lock()
			b.applied[req.OperationID] = true
			b.mu.Unlock()
			b.fs.Note("execute: context ended")
			close(b.cancelled)
			<-b.release
			return &countersign.Receipt{ID: "r_" + req.OperationID}, nil
		},
	}}
	if reconcile {
		spec.Hooks.Reconcile = func(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.applied[req.OperationID] {
				return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "r_" + req.OperationID}, nil
			}
			return &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}, nil
		}
	}
	return mustAction(t, spec)
}

func (b *fencedBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.executions
}

// awaitOr fails t if ch is not closed within a generous bound: a guard
// against a hang, not a measurement.
func awaitOr(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never happened", what)
	}
}

// A known outcome that arrives after the lease was lost is not thrown away:
// it goes through the fenced settle with the old fence, and the store's
// fence decides. If nobody took the lease over, the outcome lands; if
// another worker reclaimed the proposal, the store refuses it (lease lost)
// and the new holder's uncertain-outcome path decides, and the action ran
// exactly once either way. Real leases, on every driver: the fence is the
// store's.
func TestKnownOutcomeAfterLostLeaseGoesThroughTheFence(t *testing.T) {
	t.Parallel()
	const lease = 400 * time.Millisecond
	cases := []struct {
		name      string
		reclaim   bool // a second worker claims the proposal after the lapse
		reconcile bool
		// viaRun runs the first worker with Run, which settles in groups
		// (SettleMany), instead of RunOnce (Settle).
		viaRun    bool
		want      cstype.Status
		settleErr error // what the store answers the first holder's settle
	}{
		{name: "nobody reclaimed: it lands", want: cstype.StatusSucceeded},
		{name: "nobody reclaimed: it lands from a settlement group", viaRun: true, want: cstype.StatusSucceeded},
		{name: "reclaimed, no reconcile: unknown", reclaim: true, want: cstype.StatusUnknown, settleErr: cstype.ErrLeaseLost},
		{name: "reclaimed, no reconcile: unknown, from a settlement group", reclaim: true, viaRun: true, want: cstype.StatusUnknown, settleErr: cstype.ErrLeaseLost},
		{name: "reclaimed and reconciled: succeeded once", reclaim: true, reconcile: true, want: cstype.StatusSucceeded, settleErr: cstype.ErrLeaseLost},
	}
	eachStore(t, func(t *testing.T, open storeOpener) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				inner := open(t, nil)
				fs := faultstore.New(inner)
				b := newFencedBackend(fs)
				a := b.action(t, tc.reconcile)
				var settled sync.Map // proposal id → settlements seen by OnSettled
				onSettled := func(ctx context.Context, p *cstype.Proposal) error {
					n, _ := settled.LoadOrStore(p.ID, new(int))
					*n.(*int)++
					return nil
				}
				eA, err := countersign.New(countersign.Options{Store: fs, Owner: "a", Actions: []*countersign.Action{a},
					Policy: independentRule(), OnSettled: []countersign.SettledFunc{onSettled}})
				if err != nil {
					t.Fatal(err)
				}
				id := approveMany(t, eA, "pay", 1)[0]
				fs.SetRenewals(faultstore.Fault{Err: errors.New("connection refused")})

				doneA := make(chan struct{})
				runCtx, stopRun := context.WithCancel(context.Background())
				defer stopRun()
				go func() {
					defer close(doneA)
					if tc.viaRun {
						// One slot: the worker cannot reclaim its own
						// proposal while the execution is busy.
						w, err := eA.NewWorker(countersign.WorkerOptions{PollInterval: lease / 4, LeaseDuration: lease, MaxConcurrency: 1})
						if err == nil {
							err = w.Run(runCtx)
						}
						if err != nil {
							t.Error(err)
						}
						return
					}
					if n, err := leaseWorker(t, eA, lease).RunOnce(context.Background()); n != 1 || err != nil {
						t.Errorf("RunOnce = %d, %v", n, err)
					}
				}()
				awaitOr(t, b.cancelled, "Execute's context ending")
				fence, _ := fs.Lease(id)
				// Let the lease run out by the store's clock, so that the
				// settle comes after the lapse.
				time.Sleep(time.Until(fence.ExpiresAt) + 20*time.Millisecond)
				if tc.reclaim {
					eB, err := countersign.New(countersign.Options{Store: inner, Owner: "b", Actions: []*countersign.Action{a},
						Policy: independentRule(), OnSettled: []countersign.SettledFunc{onSettled}})
					if err != nil {
						t.Fatal(err)
					}
					wB := leaseWorker(t, eB, 10*time.Second)
					reclaimed := make(chan struct{})
					go func() {
						defer close(reclaimed)
						for {
							n, err := wB.RunOnce(context.Background())
							if err != nil {
								t.Error(err)
								return
							}
							if n == 1 {
								return
							}
							time.Sleep(10 * time.Millisecond)
						}
					}()
					awaitOr(t, reclaimed, "the second worker's reclaim")
				}
				close(b.release)
				if tc.viaRun {
					// Run goes on working: stop it once the first holder's
					// settlement was answered.
					answered := make(chan struct{})
					go func() {
						defer close(answered)
						for !slices.ContainsFunc(fs.Settlements(), func(s faultstore.Settlement) bool { return s.Params.Fence.Token == fence.Token }) {
							select {
							case <-runCtx.Done():
								return
							case <-time.After(5 * time.Millisecond):
							}
						}
					}()
					awaitOr(t, answered, "the first holder's settlement")
					stopRun()
				}
				awaitOr(t, doneA, "the first worker's end")

				// The first holder asked to settle its known success with
				// its old fence, after Execute's context ended.
				var mine []faultstore.Settlement
				for _, s := range fs.Settlements() {
					if s.Params.Fence.Token == fence.Token {
						mine = append(mine, s)
					}
				}
				if len(mine) != 1 || mine[0].Params.Status != cstype.StatusSucceeded || mine[0].Params.Fence.Generation != fence.Generation {
					t.Fatalf("settlements under the first fence: %+v; want one, succeeded", mine)
				}
				if got := mine[0].Err; (tc.settleErr == nil) != (got == nil) || (tc.settleErr != nil && !errors.Is(got, tc.settleErr)) {
					t.Fatalf("the first holder's settle answered %v; want %v (events %q)", got, tc.settleErr, fs.Events())
				}
				ev := fs.Events()
				ended := slices.Index(ev, "execute: context ended")
				settle := slices.IndexFunc(ev, func(s string) bool { return strings.HasPrefix(s, "settle "+id+" succeeded") })
				if ended < 0 || settle < ended {
					t.Fatalf("events %q: the settle must follow Execute's context ending", ev)
				}

				p, err := inner.GetProposal(context.Background(), &store.GetProposalParams{Tenant: "acme", ID: id})
				if err != nil {
					t.Fatal(err)
				}
				if p.Status != tc.want || b.count() != 1 {
					t.Fatalf("status %s after %d executions; want %s after exactly 1", p.Status, b.count(), tc.want)
				}
				if tc.want == cstype.StatusSucceeded && (p.Outcome == nil || p.Outcome.Receipt != "r_"+p.OperationID) {
					t.Fatalf("outcome %+v; want the backend's receipt", p.Outcome)
				}
				if n, _ := settled.Load(id); n == nil || *n.(*int) != 1 {
					t.Fatalf("OnSettled ran %v times; want once", n)
				}
			})
		}
	})
}

// An allowed call of the Go API (no proposal) and an approved one (claimed,
// leased, settled) route an uncertain outcome by the same rule.
func TestUncertainOutcomeRoutedAlikeOnBothPaths(t *testing.T) {
	t.Parallel()
	errLost := errors.New("connection reset after the request was sent")
	cases := []struct {
		name       string
		reconcile  func(executed int) countersign.ReconcileStatus // nil: no Reconcile
		idempotent bool
		fail       int // Execute fails (uncertain) this many times, then succeeds
		// want is the outcome on each path: the claimed path keeps an
		// unanswered reconciliation open, the direct path has nowhere to
		// keep it.
		wantDirect, wantClaimed countersign.ResultStatus
		executions              int
		reconciles              int
	}{
		{name: "reconcile: applied", reconcile: func(int) countersign.ReconcileStatus { return countersign.ReconcileApplied },
			fail: 1, wantDirect: countersign.ResultSucceeded, wantClaimed: countersign.ResultSucceeded, executions: 1, reconciles: 1},
		{name: "reconcile: not applied", reconcile: func(int) countersign.ReconcileStatus { return countersign.ReconcileNotApplied },
			fail: 1, wantDirect: countersign.ResultFailed, wantClaimed: countersign.ResultFailed, executions: 1, reconciles: 1},
		{name: "reconcile: unknown", reconcile: func(int) countersign.ReconcileStatus { return countersign.ReconcileUnknown },
			fail: 1, wantDirect: countersign.ResultUnknown, wantClaimed: countersign.ResultReconciling, executions: 1, reconciles: 1},
		{name: "reconcile wins over idempotent", idempotent: true, reconcile: func(int) countersign.ReconcileStatus { return countersign.ReconcileApplied },
			fail: 1, wantDirect: countersign.ResultSucceeded, wantClaimed: countersign.ResultSucceeded, executions: 1, reconciles: 1},
		{name: "idempotent: retried with the same operation id", idempotent: true,
			fail: 2, wantDirect: countersign.ResultSucceeded, wantClaimed: countersign.ResultSucceeded, executions: 3},
		{name: "idempotent: unknown after MaxAttempts", idempotent: true,
			fail: 99, wantDirect: countersign.ResultUnknown, wantClaimed: countersign.ResultUnknown, executions: 3},
		{name: "neither: unknown", fail: 1, wantDirect: countersign.ResultUnknown, wantClaimed: countersign.ResultUnknown, executions: 1},
	}
	for _, tc := range cases {
		for _, path := range []string{"direct", "claimed"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				t.Parallel()
				var mu sync.Mutex
				executions, reconciles := 0, 0
				ops := map[string]bool{}
				kind := countersign.KindWrite
				if path == "direct" {
					kind = countersign.KindRead // allowed by the empty policy
				}
				spec := countersign.RawActionSpec{Name: "op", Kind: kind, Idempotent: tc.idempotent, Hooks: countersign.Hooks{
					Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
						mu.Lock()
						defer mu.Unlock()
						executions++
						ops[req.OperationID] = true
						if executions <= tc.fail {
							return nil, errLost
						}
						return &countersign.Receipt{ID: "r"}, nil
					},
				}}
				if tc.reconcile != nil {
					spec.Hooks.Reconcile = func(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
						mu.Lock()
						defer mu.Unlock()
						reconciles++
						return &countersign.Reconciliation{Status: tc.reconcile(executions), Receipt: "r"}, nil
					}
				}
				opts := countersign.Options{Store: memstore.New(nil), Actions: []*countersign.Action{mustAction(t, spec)},
					MaxAttempts: 3, RetryBackoff: time.Microsecond}
				if path == "claimed" {
					opts.Policy = independentRule()
				}
				e, err := countersign.New(opts)
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				var got countersign.ResultStatus
				want := tc.wantDirect
				if path == "direct" {
					res, err := e.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: "c", Action: "op", Input: json.RawMessage(`{}`)})
					if err != nil {
						t.Fatal(err)
					}
					got = res.Status
				} else {
					want = tc.wantClaimed
					id := approveMany(t, e, "op", 1)[0]
					w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: time.Second, LeaseDuration: time.Minute})
					if err != nil {
						t.Fatal(err)
					}
					if n, err := w.RunOnce(ctx); n != 1 || err != nil {
						t.Fatalf("RunOnce = %d, %v", n, err)
					}
					p, err := e.Proposal(ctx, tAlice, id)
					if err != nil {
						t.Fatal(err)
					}
					got = countersign.ResultStatus(p.Status)
				}
				mu.Lock()
				defer mu.Unlock()
				if got != want || executions != tc.executions || reconciles != tc.reconciles || len(ops) != 1 {
					t.Fatalf("%s after %d executions (%d operation ids), %d reconciliations; want %s after %d (1), %d",
						got, executions, len(ops), reconciles, want, tc.executions, tc.reconciles)
				}
			})
		}
	}
}
