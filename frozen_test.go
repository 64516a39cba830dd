package countersign_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/faultstore"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// TestNoExecuteAfterTheLeaseRanOut: the checks before Execute (here a
// preflight) take longer than the lease, as they do in a process frozen
// between its claim and Execute, and no renewal lands. Execute must not begin then, whatever the
// lapse timer has done: the proposal stays executing under the old lease,
// for its next holder to treat as uncertain.
func TestNoExecuteAfterTheLeaseRanOut(t *testing.T) {
	t.Parallel()
	var executed atomic.Int64
	const lease = 300 * time.Millisecond
	act := mustAction(t, countersign.RawActionSpec{Name: "slow.check", Hooks: countersign.Hooks{
		Preflight: func(ctx context.Context, _ *countersign.PreflightRequest) (*countersign.Preflight, error) {
			// Blind to ctx, as a frozen process is: it sleeps through the
			// lapse timer's cancellation.
			time.Sleep(2 * lease)
			return &countersign.Preflight{Verdict: countersign.PreflightReady}, nil
		},
		Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			executed.Add(1)
			return &countersign.Receipt{ID: "r"}, nil
		},
	}})
	// A frozen process renews nothing either.
	st := faultstore.New(memstore.New(nil))
	st.SetRenewals(faultstore.Fault{Hang: true})
	e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{act}, Policy: independentRule(), LeaseDuration: lease})
	if err != nil {
		t.Fatal(err)
	}
	ids := approveMany(t, e, "slow.check", 1)
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 50 * time.Millisecond, LeaseDuration: lease, NoSealer: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("RunOnce: %d, %v", n, err)
	}
	if n := executed.Load(); n != 0 {
		t.Fatalf("Execute ran %d times after the lease ran out", n)
	}
	p, err := st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: tAlice.Tenant, ID: ids[0]})
	if err != nil || p.Status != cstype.StatusExecuting {
		t.Fatalf("proposal after the lapse: %v, %v; want executing, left to the next holder", p, err)
	}
}
