package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// settledLog counts OnSettled calls by proposal and status.
type settledLog struct {
	mu sync.Mutex
	n  map[string]int // "id status" → calls
}

func (l *settledLog) hook(ctx context.Context, p *cstype.Proposal) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[p.ID+" "+string(p.Status)]++
	return nil
}

func (l *settledLog) count(id string, s cstype.Status) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[id+" "+string(s)]
}

// reached counts the transitions the observer saw to s.
func (o *leaseObserver) reached(s cstype.Status) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.transition[s]
}

// lapsedApprovals returns an engine on st whose calls wait for a human
// (wait mode, an hour to decide), and n of its proposals approved in time
// whose callers come back after the deadline: the claim of each finds the
// approval lapsed.
func lapsedApprovals(t *testing.T, st store.Store, clk interface {
	Now() time.Time
	Advance(time.Duration)
}, obs countersign.Observer, settled *settledLog, n int) (*countersign.Engine, []*countersign.Call, []string) {
	t.Helper()
	a := mustAction(t, countersign.RawActionSpec{Name: "pay", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			t.Errorf("a lapsed approval executed %s", req.ProposalID)
			return &countersign.Receipt{}, nil
		},
	}})
	e, err := countersign.New(countersign.Options{Store: st, Now: clk.Now, Observer: obs, Actions: []*countersign.Action{a},
		OnSettled: []countersign.SettledFunc{settled.hook}, WaitPoll: time.Hour,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeWait, TTL: time.Hour}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := make([]*countersign.Call, n)
	ids := make([]string, n)
	for i := range calls {
		calls[i] = &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: fmt.Sprintf("c%d", i), Action: "pay",
			Input: json.RawMessage(`{}`), WaitTimeout: time.Millisecond}
		res, err := e.Call(ctx, calls[i])
		if err != nil || res.Status != countersign.ResultPending {
			t.Fatalf("Call = %+v, %v; want pending", res, err)
		}
		if _, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
			t.Fatal(err)
		}
		ids[i] = res.ProposalID
	}
	clk.Advance(2 * time.Hour)
	return e, calls, ids
}

// When the caller of an approved wait-mode proposal comes back after the
// deadline, its claim expires the approval, and that expiry is seen exactly
// once: by the OnSettled hooks, by the Observer (metrics) and by waiters, on
// every driver. A later sweep or a later repeat of the call adds nothing.
func TestClaimOfLapsedApprovalReportsTheExpiryOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		clk := newClock()
		settled := &settledLog{n: map[string]int{}}
		obs := newLeaseObserver()
		e, calls, ids := lapsedApprovals(t, open(t, clk.Now), clk, obs, settled, 1)
		changes, unsubscribe := e.Subscribe()
		defer unsubscribe()
		ctx := context.Background()

		res, err := e.Call(ctx, calls[0])
		if err != nil || res.Status != countersign.ResultExpired {
			t.Fatalf("the caller's return after the deadline = %+v, %v; want expired", res, err)
		}
		select {
		case <-changes:
		default:
			t.Fatal("waiters were not woken by the expiry")
		}
		p, err := e.Proposal(ctx, tAlice, ids[0])
		if err != nil || p.Status != cstype.StatusExpired {
			t.Fatalf("stored proposal %v, %v; want expired", p, err)
		}
		if n, err := e.Sweep(ctx, 0); n != 0 || err != nil {
			t.Fatalf("Sweep = %d, %v; want nothing left to expire", n, err)
		}
		if res, err := e.Call(ctx, calls[0]); err != nil || res.Status != countersign.ResultExpired {
			t.Fatalf("a repeat = %+v, %v; want expired", res, err)
		}
		if n := settled.count(ids[0], cstype.StatusExpired); n != 1 {
			t.Fatalf("OnSettled saw the expiry %d times; want once", n)
		}
		if n := obs.reached(cstype.StatusExpired); n != 1 {
			t.Fatalf("the Observer saw %d expiries; want one", n)
		}
	})
}

// Callers coming back and sweepers in two processes race to expire the same
// lapsed approvals: each expiry is reported exactly once.
func TestLapsedApprovalExpiryReportedOnceUnderRaces(t *testing.T) {
	t.Parallel()
	const n = 24
	eachStore(t, func(t *testing.T, open storeOpener) {
		clk := newClock()
		settled := &settledLog{n: map[string]int{}}
		obs := newLeaseObserver()
		st := open(t, clk.Now)
		e, calls, ids := lapsedApprovals(t, st, clk, obs, settled, n)
		// A second process on the same store sweeps.
		other, err := countersign.New(countersign.Options{Store: st, Now: clk.Now, Observer: obs,
			OnSettled: []countersign.SettledFunc{settled.hook}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Go(func() {
				if res, err := e.Call(ctx, c); err != nil || res.Status != countersign.ResultExpired {
					t.Errorf("call %s = %+v, %v; want expired", c.ToolCallID, res, err)
				}
			})
		}
		for _, sweeper := range []*countersign.Engine{e, other, other} {
			wg.Go(func() {
				for range 4 {
					if _, err := sweeper.Sweep(ctx, 5); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			if got := settled.count(id, cstype.StatusExpired); got != 1 {
				t.Errorf("proposal %s: OnSettled saw the expiry %d times; want once", id, got)
			}
		}
		if got := obs.reached(cstype.StatusExpired); got != n {
			t.Fatalf("the Observer saw %d expiries of %d proposals", got, n)
		}
	})
}
