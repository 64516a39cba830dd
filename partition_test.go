package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/faultstore"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// TestPartition black-holes a worker's connections to PostgreSQL for 10s
// (nothing moves either way; connections stay open, as in a network
// partition) while it holds leases and executions are in flight, then heals
// it. Another worker, reaching the database directly, takes over what
// lapses. In the end nothing executed twice, no decision was lost (every
// proposal left approved), and every proposal is terminal or reconciling.
func TestPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("a 10s partition")
	}
	t.Parallel()
	dsn, schema := pgtest.NewSchema(t)
	proxy, via := pgtest.Proxied(t, dsn)
	ctx := context.Background()
	direct, err := pgstore.Open(ctx, pgtest.PoolDSN(dsn), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	cutStore, err := pgstore.Open(ctx, pgtest.PoolDSN(via), &pgstore.Options{Schema: schema, SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cutStore.Close()
	// The partitioned worker's store records its settlements and renewals,
	// to show each one that reached a proposal taken over was fenced.
	cut := faultstore.New(cutStore)

	var mu sync.Mutex
	execs := map[string]int{}
	newEngine := func(st store.Store) *countersign.Engine {
		act := mustAction(t, countersign.RawActionSpec{Name: "slow.write", Hooks: countersign.Hooks{
			Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				mu.Lock()
				execs[req.OperationID]++
				mu.Unlock()
				select {
				case <-time.After(500 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &countersign.Receipt{ID: "r_" + req.OperationID}, nil
			},
			Reconcile: func(_ context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
				mu.Lock()
				defer mu.Unlock()
				if execs[req.OperationID] > 0 {
					return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "r_" + req.OperationID}, nil
				}
				return &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}, nil
			},
		}})
		e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{act}, Policy: independentRule(),
			LeaseDuration: 3 * time.Second, ReconcileBackoff: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	eDirect, eCut := newEngine(direct), newEngine(cut)
	const n = 40
	ids := make([]string, n)
	for i := range ids {
		res, err := eDirect.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: fmt.Sprintf("c%d", i), Action: "slow.write", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.ProposalID
	}
	run := func(e *countersign.Engine) func() {
		w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 100 * time.Millisecond, LeaseDuration: 3 * time.Second, MaxConcurrency: 8, NoSealer: true})
		if err != nil {
			t.Fatal(err)
		}
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = w.Run(wctx) }()
		return func() { stop(); <-done }
	}
	stopCut := run(eCut)
	// Approve them all: the partitioned worker claims as they come.
	for _, id := range ids {
		if _, err := eDirect.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: id, Verdict: countersign.Approve}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // executions in flight, leases held
	proxy.BlackHole()
	stopDirect := run(eDirect)
	time.Sleep(10 * time.Second)
	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	statuses := map[cstype.Status]int{}
	takenOver := map[string]bool{}
	for _, id := range ids {
		p, err := eDirect.Wait(wctx, tAlice, id)
		if err != nil {
			t.Fatalf("proposal %s after the partition: %v, %v", id, p, err)
		}
		statuses[p.Status]++
		evs, err := direct.ListEvents(ctx, &store.ListEventsParams{Tenant: tAlice.Tenant, ProposalID: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == cstype.EventSettled && ev.Status == cstype.StatusReconciling {
				takenOver[id] = true // its lease lapsed in the partition; the other worker reconciled it
				break
			}
		}
	}
	stopCut()
	stopDirect()
	mu.Lock()
	defer mu.Unlock()
	most, total := 0, 0
	for _, c := range execs {
		most = max(most, c)
		total += c
	}
	// The fence (docs/design.md §6): once another holder took a proposal over,
	// nothing the partitioned worker wrote to it may land; what it sent
	// meanwhile was refused (lease lost) or never arrived (its context or
	// the partition ended it).
	fenced, lost := 0, 0
	for _, st := range cut.Settlements() {
		if !takenOver[st.Params.ID] {
			continue
		}
		switch {
		case st.Err == nil:
			t.Errorf("the partitioned worker settled %s (%s) after it was taken over", st.Params.ID, st.Params.Status)
		case errors.Is(st.Err, cstype.ErrLeaseLost):
			fenced++
		default:
			lost++
		}
	}
	renewedAfter := 0
	for _, r := range cut.Renewals() {
		if takenOver[r.Params.ID] && errors.Is(r.Err, cstype.ErrLeaseLost) {
			renewedAfter++
		}
	}
	t.Logf("after a 10s partition: statuses %v; %d taken over from the partitioned worker; %d executions of %d operations, at most %d each; "+
		"its settlements of those: %d refused by the fence, %d never arrived; %d renewals refused by the fence",
		statuses, len(takenOver), total, len(execs), most, fenced, lost, renewedAfter)
	if len(takenOver) == 0 {
		t.Error("no lease was taken over: the partition caught no execution in flight")
	}
	if most > 1 {
		t.Errorf("an operation executed %d times", most)
	}
	if statuses[cstype.StatusApproved] != 0 || statuses[cstype.StatusExecuting] != 0 || statuses[cstype.StatusPending] != 0 {
		t.Errorf("statuses %v: want every proposal settled", statuses)
	}
}
