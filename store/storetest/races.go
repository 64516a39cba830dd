package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// The races run many goroutines against one store, released together by a
// start barrier. Run them under -race; they also hold the drivers to their
// compare-and-set: whatever the interleaving, the invariants below hold.

func testRaces(t *testing.T, newStore Factory) {
	t.Run("DecideOneProposal", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		const n = 64
		verdict := func(i int) store.Verdict {
			if i%2 == 0 {
				return store.VerdictApproved
			}
			return store.VerdictRejected
		}
		results := make([]*store.DecideResult, n)
		errs := make([]error, n)
		concurrently(n, func(i int) {
			results[i], errs[i] = fx.store.Decide(fx.ctx, &store.DecideParams{
				Tenant: tenant, ID: p.ID, Actor: fmt.Sprintf("actor-%02d", i), Verdict: verdict(i), Via: "api",
			})
		})
		final := fx.get(p)
		if final.Status != store.StatusApproved && final.Status != store.StatusRejected {
			t.Fatalf("final status %s, want approved or rejected", final.Status)
		}
		applied := 0
		for i, res := range results {
			if errs[i] != nil {
				t.Errorf("decider %d: %v", i, errs[i])
				continue
			}
			switch {
			case res.Outcome == store.DecideApplied:
				applied++
				if res.From != store.StatusPending || res.To != final.Status {
					t.Errorf("the applied decision moved %s→%s, want pending→%s", res.From, res.To, final.Status)
				}
				if len(final.Decisions) == 0 || verdict(i) != final.Decisions[0].Decision || final.Decisions[0].Actor != fmt.Sprintf("actor-%02d", i) {
					t.Errorf("applied decision by actor-%02d (%s), but recorded %+v", i, verdict(i), final.Decisions)
				}
			// Agreeing with the standing decision is unchanged; disagreeing is
			// a conflict.
			case (verdict(i) == store.VerdictApproved) == (final.Status == store.StatusApproved):
				if res.Outcome != store.DecideUnchanged {
					t.Errorf("decider %d (%s) on %s: %s, want unchanged", i, verdict(i), final.Status, res.Outcome)
				}
			default:
				if res.Outcome != store.DecideConflict {
					t.Errorf("decider %d (%s) on %s: %s, want conflict", i, verdict(i), final.Status, res.Outcome)
				}
			}
		}
		if applied != 1 {
			t.Errorf("%d decisions applied, want exactly 1", applied)
		}
		if len(final.Decisions) != 1 {
			t.Errorf("%d decisions recorded, want 1", len(final.Decisions))
		}
		want := 0
		if final.Status == store.StatusRejected {
			want = 1
		}
		if n := len(fx.messages(thread)); n != want {
			t.Errorf("thread has %d messages, want %d", n, want)
		}
	})

	t.Run("QuorumApprovals", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withQuorum(2))
		const n = 16
		results := make([]*store.DecideResult, n)
		concurrently(n, func(i int) {
			res, err := fx.store.Decide(fx.ctx, &store.DecideParams{
				Tenant: tenant, ID: p.ID, Actor: fmt.Sprintf("actor-%02d", i%8), Verdict: store.VerdictApproved, Via: "api",
			})
			if err != nil {
				t.Errorf("decider %d: %v", i, err)
				return
			}
			results[i] = res
		})
		var applied, toApproved int
		for _, res := range results {
			if res == nil {
				continue
			}
			if res.Outcome == store.DecideApplied {
				applied++
				if res.To == store.StatusApproved {
					toApproved++
				}
			} else if res.Outcome != store.DecideUnchanged {
				t.Errorf("approval: %s, want applied or unchanged", res.Outcome)
			}
		}
		final := fx.get(p)
		requireStatus(t, final, store.StatusApproved)
		if applied != 2 || toApproved != 1 || len(final.Decisions) != 2 || final.Approvals() != 2 {
			t.Errorf("applied %d (%d to approved), decisions %d, approvals %d; want 2 (1), 2, 2",
				applied, toApproved, len(final.Decisions), final.Approvals())
		}
	})

	t.Run("DecideVersusCancel", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		const n = 16
		var mu sync.Mutex
		moves := 0
		concurrently(n, func(i int) {
			if i%2 == 0 {
				res, err := fx.store.Decide(fx.ctx, &store.DecideParams{Tenant: tenant, ID: p.ID, Actor: fmt.Sprintf("actor-%02d", i), Verdict: store.VerdictApproved, Via: "api"})
				if err != nil {
					t.Errorf("decide: %v", err)
					return
				}
				if res.Outcome == store.DecideApplied {
					mu.Lock()
					moves++
					mu.Unlock()
				}
				return
			}
			res, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: p.ID, Actor: requester, Via: "api"})
			var ce *store.ConflictError
			switch {
			case err == nil && res.Changed:
				mu.Lock()
				moves++
				mu.Unlock()
			case err == nil:
			case errors.As(err, &ce) && ce.Got == store.StatusApproved:
			default:
				t.Errorf("cancel: %v", err)
			}
		})
		if moves != 1 {
			t.Errorf("%d transitions out of pending, want exactly 1", moves)
		}
		if s := fx.get(p).Status; s != store.StatusApproved && s != store.StatusCancelled {
			t.Errorf("final status %s, want approved or cancelled", s)
		}
	})

	t.Run("ClaimOneProposal", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved()
		const n = 16
		claimed := make([]*store.Proposal, n)
		errs := make([]error, n)
		concurrently(n, func(i int) {
			claimed[i], errs[i] = fx.store.Claim(fx.ctx, &store.ClaimParams{
				Tenant: tenant, ID: p.ID, Owner: fmt.Sprintf("claimer-%02d", i), LeaseDuration: longLease, ConsumedBy: p.ToolCallID,
			})
		})
		winner := -1
		for i := range n {
			if errs[i] == nil {
				if winner >= 0 {
					t.Errorf("claimers %d and %d both won", winner, i)
				}
				winner = i
				continue
			}
			requireConflict(t, errs[i], p.ID, store.StatusExecuting, []store.Status{store.StatusApproved}, false)
		}
		if winner < 0 {
			t.Fatal("no claimer won")
		}
		got := fx.get(p)
		requireStatus(t, got, store.StatusExecuting)
		if got.Attempt != 1 || got.Lease == nil || got.Lease.Token != claimed[winner].Lease.Token ||
			got.Lease.Owner != fmt.Sprintf("claimer-%02d", winner) {
			t.Errorf("stored lease %+v (attempt %d), want the winner's %+v (attempt 1)", got.Lease, got.Attempt, claimed[winner].Lease)
		}
	})

	t.Run("StaleLeaseHolder", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		old := fx.claim(fx.approved(independent), shortLease)
		fx.elapse(shortLease + leaseSlack)
		rescued := fx.claimBatch(worker2, longLease, 10)
		if len(rescued) != 1 || rescued[0].From != store.StatusExecuting {
			t.Fatalf("ClaimBatch = %v, want the executing proposal", claimedIDs(rescued))
		}
		fresh := rescued[0].Proposal

		// The old holder keeps trying to renew and settle while the new one
		// renews and settles.
		const n = 16
		errs := make([]error, n)
		concurrently(n, func(i int) {
			switch {
			case i == 0:
				if _, err := fx.store.RenewLease(fx.ctx, &store.RenewLeaseParams{Tenant: tenant, ID: old.ID, Fence: fenceOf(fresh), LeaseDuration: longLease}); err != nil {
					errs[i] = err
					return
				}
				sp := settleParams(fresh, store.StatusSucceeded)
				sp.Executed = ptr(true)
				sp.Receipt = "rcpt_new"
				_, errs[i] = fx.store.Settle(fx.ctx, sp)
			case i%3 == 0:
				_, errs[i] = fx.store.RenewLease(fx.ctx, &store.RenewLeaseParams{Tenant: tenant, ID: old.ID, Fence: fenceOf(old), LeaseDuration: longLease})
			case i%3 == 1:
				_, errs[i] = fx.store.BeginRetry(fx.ctx, &store.BeginRetryParams{Tenant: tenant, ID: old.ID, Fence: fenceOf(old), LeaseDuration: longLease})
			default:
				sp := settleParams(old, store.StatusFailed)
				sp.Error = ptr("stale")
				_, errs[i] = fx.store.Settle(fx.ctx, sp)
			}
		})
		if errs[0] != nil {
			t.Fatalf("the new holder: %v", errs[0])
		}
		for i := 1; i < n; i++ {
			if errs[i] == nil {
				t.Errorf("stale holder call %d succeeded", i)
				continue
			}
			requireLeaseLost(t, errs[i])
		}
		got := fx.get(old)
		requireStatus(t, got, store.StatusSucceeded)
		if got.Outcome == nil || got.Outcome.Receipt != "rcpt_new" {
			t.Errorf("outcome = %+v, want the new holder's", got.Outcome)
		}
		if n := len(fx.messages(thread)); n != 1 {
			t.Errorf("thread has %d messages, want 1", n)
		}
	})

	t.Run("StaleSettleVersusRecovery", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		old := fx.claim(fx.approved(independent), shortLease)
		fx.elapse(shortLease + leaseSlack)

		// The old holder settles while a worker recovers the expired lease:
		// exactly one of them gets the proposal.
		var settleErr error
		var rescued []*store.Claimed
		concurrently(2, func(i int) {
			if i == 0 {
				sp := settleParams(old, store.StatusSucceeded)
				sp.Executed = ptr(true)
				sp.Receipt = "rcpt_old"
				_, settleErr = fx.store.Settle(fx.ctx, sp)
				return
			}
			var err error
			rescued, err = fx.store.ClaimBatch(fx.ctx, &store.ClaimBatchParams{Owner: worker2, LeaseDuration: longLease, Limit: 10})
			if err != nil {
				t.Errorf("ClaimBatch: %v", err)
			}
		})
		switch {
		case settleErr == nil && len(rescued) == 0:
			requireStatus(t, fx.get(old), store.StatusSucceeded)
		case settleErr != nil && len(rescued) == 1:
			requireLeaseLost(t, settleErr)
			fx.succeed(rescued[0].Proposal)
		default:
			t.Fatalf("old holder's settle: %v; rescued %v; want exactly one of them to get the proposal", settleErr, claimedIDs(rescued))
		}
		if n := len(fx.messages(thread)); n != 1 {
			t.Errorf("thread has %d messages, want 1", n)
		}
	})

	t.Run("CreateSameToolCall", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const n = 32
		call := uniqueID("call")
		exp := fx.clock.Now().Add(time.Hour)
		results := make([]*store.CreateProposalResult, n)
		concurrently(n, func(i int) {
			p := NewProposal(tenant, thread, call, withExpiresAt(exp), withKey("k"), withInput(fmt.Sprintf(`{"amount":%d}`, i)))
			res, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: p})
			if err != nil {
				t.Errorf("creator %d: %v", i, err)
				return
			}
			results[i] = res
		})
		created, id := 0, ""
		for i, res := range results {
			if res == nil {
				continue
			}
			if res.Created {
				created++
			}
			if len(res.Superseded) != 0 {
				t.Errorf("creator %d superseded %v", i, ids(res.Superseded))
			}
			if id == "" {
				id = res.Proposal.ID
			} else if res.Proposal.ID != id {
				t.Errorf("creator %d got proposal %s, another got %s", i, res.Proposal.ID, id)
			}
		}
		if created != 1 {
			t.Errorf("%d creations, want exactly 1", created)
		}
		all, _ := fx.listAll(store.ListProposalsParams{})
		if len(all) != 1 || all[0].ID != id {
			t.Errorf("listing = %v, want [%s]", ids(all), id)
		}
	})

	t.Run("CreateSameReplacementKey", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const n = 32
		results := make([]*store.CreateProposalResult, n)
		concurrently(n, func(i int) {
			res, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: fx.proposal(thread, withKey("c_9"))})
			if err != nil {
				t.Errorf("creator %d: %v", i, err)
				return
			}
			results[i] = res
		})
		superseded := map[string]int{}
		for _, res := range results {
			if res == nil {
				continue
			}
			if !res.Created {
				t.Errorf("proposal %s: Created = false", res.Proposal.ID)
			}
			for _, s := range res.Superseded {
				superseded[s.ID]++
				requireStatus(t, s, store.StatusSuperseded)
			}
		}
		all, _ := fx.listAll(store.ListProposalsParams{})
		if len(all) != n {
			t.Fatalf("%d proposals listed, want %d", len(all), n)
		}
		pending := 0
		for _, p := range all {
			switch p.Status {
			case store.StatusPending:
				pending++
				if superseded[p.ID] != 0 {
					t.Errorf("pending %s was reported superseded", p.ID)
				}
			case store.StatusSuperseded:
				if superseded[p.ID] != 1 {
					t.Errorf("%s reported superseded %d times, want once", p.ID, superseded[p.ID])
				}
			default:
				t.Errorf("%s is %s, want pending or superseded", p.ID, p.Status)
			}
		}
		if pending != 1 {
			t.Errorf("%d pending proposals with the key, want exactly 1", pending)
		}
		if msgs := fx.messages(thread); len(msgs) != n-1 {
			t.Errorf("thread has %d messages, want %d (one per superseded proposal)", len(msgs), n-1)
		}
	})

	t.Run("ClaimBatchWorkers", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const total, workers = 200, 8
		want := map[string]bool{}
		for range total {
			want[fx.approved(independent).ID] = true
		}
		claims := make([][]string, workers)
		concurrently(workers, func(i int) {
			// Bounded, so that a driver that hands out held leases fails
			// instead of spinning.
			for range total + 1 {
				got, err := fx.store.ClaimBatch(fx.ctx, &store.ClaimBatchParams{Owner: fmt.Sprintf("worker-%d", i), LeaseDuration: longLease, Limit: 7})
				if err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
				if len(got) == 0 {
					return
				}
				if len(got) > 7 {
					t.Errorf("worker %d: batch of %d, limit 7", i, len(got))
				}
				for _, c := range got {
					if c.From != store.StatusApproved || c.Proposal.Status != store.StatusExecuting {
						t.Errorf("worker %d claimed %s from %s into %s", i, c.Proposal.ID, c.From, c.Proposal.Status)
					}
					claims[i] = append(claims[i], c.Proposal.ID)
				}
			}
			t.Errorf("worker %d: ClaimBatch never ran out of work", i)
		})
		count := map[string]int{}
		for _, ids := range claims {
			for _, id := range ids {
				count[id]++
			}
		}
		for id := range want {
			if count[id] != 1 {
				t.Errorf("proposal %s claimed %d times, want once", id, count[id])
			}
		}
		if len(count) != total {
			t.Errorf("%d proposals claimed, want %d", len(count), total)
		}
	})

	t.Run("ExpireDueSweepers", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const total, sweepers = 40, 4
		deadline := fx.clock.Now().Add(time.Minute)
		for range total {
			fx.createNew(withExpiresAt(deadline))
		}
		fx.clock.Advance(time.Minute)
		swept := make([][]string, sweepers)
		concurrently(sweepers, func(i int) {
			for range total + 1 {
				got, err := fx.store.ExpireDue(fx.ctx, &store.ExpireDueParams{Limit: 3})
				if err != nil {
					t.Errorf("sweeper %d: %v", i, err)
					return
				}
				if len(got) == 0 {
					return
				}
				swept[i] = append(swept[i], ids(got)...)
			}
			t.Errorf("sweeper %d: ExpireDue never ran out of work", i)
		})
		count := map[string]int{}
		for _, ids := range swept {
			for _, id := range ids {
				count[id]++
			}
		}
		if len(count) != total {
			t.Errorf("%d proposals expired, want %d", len(count), total)
		}
		for id, c := range count {
			if c != 1 {
				t.Errorf("proposal %s returned by %d sweeps, want 1", id, c)
			}
		}
		if msgs := fx.messages(thread); len(msgs) != total {
			t.Errorf("thread has %d messages, want %d", len(msgs), total)
		}
	})
}
