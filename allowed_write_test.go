package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// allowedHarness allows payments.refund without a human, with hook as its
// Execute (the backend's by default), and has the read action crm.lookup.
func allowedHarness(t *testing.T, open storeOpener, reads *atomic.Int32, hook func(b *backend, h **harness) executeFunc) *harness {
	var h *harness
	h = newHarness(t, harnessOpts{open: open,
		engineOpts: func(o *countersign.Options) { o.LeaseDuration = allowedLease },
		rules:      []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAllow}},
		actions: func(b *backend) []*countersign.Action {
			spec := refundSpec(b)
			if hook != nil {
				spec.Hooks.Execute = hook(b, &h)
			}
			lookup := mustAction(t, countersign.RawActionSpec{Name: "crm.lookup", Kind: countersign.KindRead,
				Hooks: countersign.Hooks{Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
					reads.Add(1)
					return &countersign.Receipt{ID: "found"}, nil
				}}})
			return []*countersign.Action{mustAction(t, spec), lookup}
		}})
	return h
}

// A write the policy allows is recorded before it runs — executing, under a
// lease, with no decisions and no approvers — and repeating the call replays
// the recorded outcome with the same operation id, never executing again. A
// read leaves no record and runs again.
func TestAllowedWriteIsRecordedBeforeItRuns(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		var reads atomic.Int32
		var seen atomic.Pointer[cstype.Proposal]
		h := allowedHarness(t, open, &reads, func(b *backend, h **harness) executeFunc {
			return func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				// What the store holds while it runs.
				p, err := (*h).store.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: req.ProposalID})
				if err == nil {
					seen.Store(p)
				}
				return b.execute(req)
			}
		})
		ctx := context.Background()
		c := refundCall("call_1", "", `{"amount":40,"customer":"c_9"}`)
		first := h.call(c)
		if first.Status != countersign.ResultSucceeded || first.Proposal == nil || first.ProposalID == "" {
			t.Fatalf("allowed write = %+v", first)
		}
		during := seen.Load()
		if during == nil || during.Status != cstype.StatusExecuting || during.Lease == nil || during.OperationID != first.Proposal.OperationID {
			t.Fatalf("while Execute ran the store held %+v, want the record executing under a lease", during)
		}
		p := first.Proposal
		if p.Status != cstype.StatusSucceeded || len(p.Decisions) != 0 || len(p.Approvers) != 0 || p.OperationID == "" || p.ToolCallID != "call_1" {
			t.Fatalf("record = %+v, want succeeded with no decisions and no approvers", p)
		}
		again := h.call(c)
		if again.Status != countersign.ResultSucceeded || again.ProposalID != first.ProposalID || again.Receipt != first.Receipt ||
			again.Proposal.OperationID != p.OperationID || h.backend.total() != 1 {
			t.Fatalf("repeat = %+v (%d executions), want the recorded outcome of %s", again, h.backend.total(), first.ProposalID)
		}
		// Listed in its thread like any proposal.
		page, err := h.engine.List(ctx, tAlice, countersign.ListParams{ThreadID: "t1"})
		if err != nil || len(page.Proposals) != 1 || page.Proposals[0].ID != first.ProposalID {
			t.Fatalf("thread listing = %+v, %v", page, err)
		}

		look := &countersign.Call{Identity: tAlice, ThreadID: "t1", ToolCallID: "look_1", Action: "crm.lookup", Input: json.RawMessage(`{}`)}
		for range 2 {
			if res := h.call(look); res.Status != countersign.ResultSucceeded || res.Proposal != nil || res.ProposalID != "" {
				t.Fatalf("read = %+v, want no record", res)
			}
		}
		if _, err := h.store.GetProposalByToolCall(ctx, &store.GetProposalByToolCallParams{Tenant: "acme", ThreadID: "t1", ToolCallID: "look_1"}); !errors.Is(err, cstype.ErrNotFound) {
			t.Fatalf("a read left a record: %v", err)
		}
		if n := reads.Load(); n != 2 {
			t.Fatalf("the read ran %d times, want 2 (reads may run again)", n)
		}
	})
}

// Identical allowed writes sent at once execute once: one record, one
// operation id, every caller answered with its outcome.
func TestConcurrentIdenticalAllowedWritesExecuteOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		var reads atomic.Int32
		release := make(chan struct{})
		h := allowedHarness(t, open, &reads, func(b *backend, _ **harness) executeFunc {
			return func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				<-release // the others arrive while it runs
				return b.execute(req)
			}
		})
		const n = 8
		results := make([]*countersign.Result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := refundCall("call_1", "", `{"amount":40,"customer":"c_9"}`)
				c.WaitTimeout = 0 // a repeat waits for the execution it found
				res, err := h.engine.Call(context.Background(), c)
				if err != nil {
					t.Error(err)
				}
				results[i] = res
			}()
		}
		// Every caller but the executing one finds the record and waits on it.
		waitRecords(t, h, 1)
		close(release)
		wg.Wait()
		for _, r := range results {
			if r == nil || r.Status != countersign.ResultSucceeded || r.ProposalID != results[0].ProposalID || r.Receipt != results[0].Receipt {
				t.Fatalf("results differ: %+v vs %+v", r, results[0])
			}
		}
		if got := h.backend.total(); got != 1 {
			t.Fatalf("%d executions of one allowed write, want 1", got)
		}
	})
}

// waitRecords polls until the store holds n proposals in thread t1.
func waitRecords(t *testing.T, h *harness, n int) {
	t.Helper()
	for {
		page, err := h.store.ListProposals(context.Background(), &store.ListProposalsParams{Tenant: "acme", ThreadID: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Proposals) >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// An allowed write whose process stops while Execute runs is left executing
// under its lease; once the lease lapses a worker recovers it as any
// interrupted execution (here: unknown, the action being neither idempotent
// nor reconcilable), and repeating the call answers that outcome without
// executing again.
func TestAllowedWriteInterruptedIsRecoveredLikeAnyExecution(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		var reads atomic.Int32
		var crash atomic.Bool
		crash.Store(true)
		h := allowedHarness(t, open, &reads, func(b *backend, _ **harness) executeFunc {
			return func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				rec, err := b.execute(req)
				if crash.Load() {
					runtime.Goexit() // the caller's process stops before it records anything
				}
				return rec, err
			}
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = h.engine.Call(context.Background(), refundCall("call_1", "", `{"amount":40,"customer":"c_9"}`))
		}()
		<-done
		crash.Store(false)
		p, err := h.store.GetProposalByToolCall(context.Background(), &store.GetProposalByToolCallParams{Tenant: "acme", ThreadID: "t1", ToolCallID: "call_1"})
		if err != nil || p.Status != cstype.StatusExecuting {
			t.Fatalf("after the crash the record is %+v, %v; want executing", p, err)
		}
		// The lease lapses: by the fake clock, and (PostgreSQL judges leases
		// by the database's clock) in real time.
		h.clock.Advance(allowedLease + time.Second)
		w, err := h.engine.NewWorker(countersign.WorkerOptions{PollInterval: allowedLease / 4, LeaseDuration: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for {
			n, err := w.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			time.Sleep(allowedLease / 10)
		}
		res := h.call(refundCall("call_1", "", `{"amount":40,"customer":"c_9"}`))
		if res.Status != countersign.ResultUnknown || res.Executed != nil || res.ProposalID != p.ID {
			t.Fatalf("repeat after recovery = %+v, want unknown", res)
		}
		if got := h.backend.total(); got != 1 {
			t.Fatalf("%d executions, want 1: nothing re-issues a write whose outcome is unknown", got)
		}
	})
}

// allowedLease is the execution lease of allowedHarness's engine: short, so
// that an interrupted execution's lease lapses soon in real time too.
const allowedLease = 600 * time.Millisecond

// executeFunc is an Execute hook.
type executeFunc = func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error)
