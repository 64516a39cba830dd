package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// A caller-executed action's execution is held by its calling agent under a
// lease. When that lease lapses and the action is idempotent, the worker
// that notices releases the execution (Settle with status executing) for the
// caller's next identical call to claim again: the next attempt, same
// operation id. Until NextAttemptAt no worker takes it; after it, a worker
// claims it to settle it as unknown.

// release releases p's execution under its lease until until.
func (fx *fixture) release(p *store.Proposal, until time.Time) *store.TransitionResult {
	fx.t.Helper()
	sp := settleParams(p, store.StatusExecuting)
	sp.ReleaseLease = true
	sp.NextAttemptAt = &until
	return fx.settle(sp)
}

func testCallerRelease(t *testing.T, newStore Factory) {
	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		until := fx.clock.Now().Add(time.Hour).Truncate(time.Millisecond)
		res := fx.release(p, until)
		if res.From != store.StatusExecuting || !res.Changed {
			t.Errorf("release: from %s, changed %v; want executing, true", res.From, res.Changed)
		}
		got := fx.get(p)
		requireSameProposal(t, got, res.Proposal)
		requireStatus(t, got, store.StatusExecuting)
		if !store.ReleasedToCaller(got) || got.Lease != nil || got.NextAttemptAt == nil {
			t.Fatalf("released: lease %+v, next attempt %v; want no lease and a next attempt", got.Lease, got.NextAttemptAt)
		}
		requireTime(t, "NextAttemptAt", *got.NextAttemptAt, until)
		if got.Attempt != p.Attempt || got.Outcome != nil || got.OperationID != p.OperationID {
			t.Errorf("released: attempt %d, outcome %+v, operation %s; want %d, none, %s", got.Attempt, got.Outcome, got.OperationID, p.Attempt, p.OperationID)
		}
		evs := fx.events(p.ID)
		if last := evs[len(evs)-1]; last.Type != store.EventReleased || last.Actor != worker || last.Status != store.StatusExecuting {
			t.Errorf("last event = %+v, want %s by %s, status executing", last, store.EventReleased, worker)
		}
		if msgs := fx.messages(thread); len(msgs) != 0 {
			t.Errorf("a release admitted %d messages, want none (no outcome)", len(msgs))
		}
		// The released lease fences nothing any more.
		for name, op := range fencedOps(fx, p) {
			if err := op(fenceOf(p)); err == nil {
				t.Errorf("%s with the released fence: no error", name)
			} else {
				requireLeaseLost(t, err)
			}
		}
	})

	t.Run("ReleaseNeedsDeadlineAndLease", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		until := fx.clock.Now().Add(time.Hour)
		for name, sp := range map[string]*store.SettleParams{
			"no ReleaseLease":  {Tenant: tenant, ID: p.ID, Fence: fenceOf(p), Status: store.StatusExecuting, NextAttemptAt: &until},
			"no NextAttemptAt": {Tenant: tenant, ID: p.ID, Fence: fenceOf(p), Status: store.StatusExecuting, ReleaseLease: true},
		} {
			_, err := fx.store.Settle(fx.ctx, sp)
			if !isInvalidParams(err) {
				t.Errorf("%s: err = %v, want ErrInvalidParams", name, err)
			}
		}
		requireSameProposal(t, fx.get(p), p)
		// A reconciling proposal is not released: nothing re-executes from
		// reconciling.
		sp := settleParams(p, store.StatusReconciling)
		fx.settle(sp)
		rec := fx.get(p)
		_, err := fx.store.Settle(fx.ctx, &store.SettleParams{Tenant: tenant, ID: p.ID, Fence: fenceOf(rec), Status: store.StatusExecuting, ReleaseLease: true, NextAttemptAt: &until})
		requireConflict(t, err, p.ID, store.StatusReconciling, []store.Status{store.StatusExecuting}, true)
		requireSameProposal(t, fx.get(p), rec)
	})

	t.Run("ClaimTakesNextAttempt", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claim(fx.approved(), shortLease)
		fx.elapse(shortLease + leaseSlack)
		// The worker that noticed the lapse releases it.
		got := fx.claimBatch(worker2, longLease, 10)
		if len(got) != 1 || got[0].From != store.StatusExecuting {
			t.Fatalf("ClaimBatch = %v, want the lapsed execution", claimedIDs(got))
		}
		recovered := got[0].Proposal
		fx.release(recovered, fx.clock.Now().Add(time.Hour))
		if again := fx.claimBatch(worker2, longLease, 10); len(again) != 0 {
			t.Fatalf("ClaimBatch took an execution released to its caller: %v", claimedIDs(again))
		}
		res, err := fx.store.Claim(fx.ctx, &store.ClaimParams{Tenant: tenant, ID: p.ID, Owner: "caller:" + requester, LeaseDuration: longLease, ConsumedBy: p.ToolCallID})
		if err != nil {
			t.Fatalf("Claim of a released execution: %v", err)
		}
		requireStatus(t, res, store.StatusExecuting)
		requireLease(t, fx, res, "caller:"+requester, longLease)
		if res.Attempt != p.Attempt+1 || res.OperationID != p.OperationID || res.NextAttemptAt != nil {
			t.Errorf("re-claimed: attempt %d, operation %s, next attempt %v; want %d, %s, none", res.Attempt, res.OperationID, res.NextAttemptAt, p.Attempt+1, p.OperationID)
		}
		if res.Lease.Generation <= recovered.Lease.Generation {
			t.Errorf("generation %d, want above %d", res.Lease.Generation, recovered.Lease.Generation)
		}
		requireSameProposal(t, fx.get(p), res)
		// Held again: no second claim, no worker.
		_, err = fx.store.Claim(fx.ctx, &store.ClaimParams{Tenant: tenant, ID: p.ID, Owner: "caller:" + requester, LeaseDuration: longLease, ConsumedBy: p.ToolCallID})
		requireConflict(t, err, p.ID, store.StatusExecuting, []store.Status{store.StatusApproved}, false)
		if again := fx.claimBatch(worker2, longLease, 10); len(again) != 0 {
			t.Errorf("ClaimBatch took a held lease: %v", claimedIDs(again))
		}
		fx.succeed(res)
		requireStatus(t, fx.get(p), store.StatusSucceeded)
	})

	t.Run("WorkerTakesItBackAfterDeadline", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		fx.release(p, fx.clock.Now().Add(time.Minute))
		if got := fx.claimBatch(worker2, longLease, 10); len(got) != 0 {
			t.Fatalf("ClaimBatch before the caller's deadline = %v, want none", claimedIDs(got))
		}
		fx.clock.Advance(time.Minute)
		got := fx.claimBatch(worker2, longLease, 10)
		if len(got) != 1 || got[0].Proposal.ID != p.ID || got[0].From != store.StatusExecuting {
			t.Fatalf("ClaimBatch after the caller's deadline = %v, want [%s] from executing", claimedIDs(got), p.ID)
		}
		c := got[0].Proposal
		// The deadline stays on the claimed row, so that its claimer knows
		// the caller never came back.
		if c.NextAttemptAt == nil || c.Attempt != p.Attempt {
			t.Errorf("claimed: next attempt %v, attempt %d; want the deadline kept, attempt %d", c.NextAttemptAt, c.Attempt, p.Attempt)
		}
		requireLease(t, fx, c, worker2, longLease)
		fx.settle(settleParams(c, store.StatusUnknown))
		final := fx.get(p)
		requireStatus(t, final, store.StatusUnknown)
		if final.NextAttemptAt != nil || final.Lease != nil {
			t.Errorf("unknown: next attempt %v, lease %+v; want neither", final.NextAttemptAt, final.Lease)
		}
	})

	t.Run("SettleManyReleases", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		a, b := fx.claimed(), fx.claimed()
		until := fx.clock.Now().Add(time.Hour)
		rel := settleParams(a, store.StatusExecuting)
		rel.ReleaseLease, rel.NextAttemptAt = true, &until
		ok := settleParams(b, store.StatusSucceeded)
		ok.Executed = ptr(true)
		results, errs, err := fx.store.SettleMany(fx.ctx, []*store.SettleParams{rel, ok})
		if err != nil || errs[0] != nil || errs[1] != nil {
			t.Fatalf("SettleMany: %v, %v", err, errs)
		}
		if !store.ReleasedToCaller(results[0].Proposal) || results[1].Proposal.Status != store.StatusSucceeded {
			t.Errorf("SettleMany: %s released %v, %s %s", a.ID, store.ReleasedToCaller(results[0].Proposal), b.ID, results[1].Proposal.Status)
		}
		requireSameProposal(t, fx.get(a), results[0].Proposal)
	})

	t.Run("RaceToClaimRelease", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		fx.release(p, fx.clock.Now().Add(time.Hour))
		const n = 16
		got := make([]*store.Proposal, n)
		errs := make([]error, n)
		concurrently(n, func(i int) {
			got[i], errs[i] = fx.store.Claim(fx.ctx, &store.ClaimParams{
				Tenant: tenant, ID: p.ID, Owner: fmt.Sprintf("caller-%02d", i), LeaseDuration: longLease, ConsumedBy: p.ToolCallID,
			})
		})
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Errorf("claims %d and %d both won", won, i)
			case err == nil:
				won = i
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("claim %d: %v, want a conflict", i, err)
			}
		}
		if won < 0 {
			t.Fatal("no claim won")
		}
		final := fx.get(p)
		requireSameProposal(t, final, got[won])
		if final.Attempt != p.Attempt+1 {
			t.Errorf("attempt %d, want %d: one claim, one more attempt", final.Attempt, p.Attempt+1)
		}
		claims := 0
		for _, e := range fx.events(p.ID) {
			if e.Type == store.EventClaimed {
				claims++
			}
		}
		if claims != 2 {
			t.Errorf("%d claim events, want 2 (the first claim and the winner's)", claims)
		}
	})
}
