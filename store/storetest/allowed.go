package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// allowedProposal is a write the policy allowed: nobody to ask.
func (fx *fixture) allowedProposal(th string, o ...func(*store.Proposal)) *store.Proposal {
	return fx.proposal(th, append([]func(*store.Proposal){func(p *store.Proposal) {
		p.Approvers = nil
		p.Quorum = 0
		p.RememberScopes = nil
	}}, o...)...)
}

// createAllowed records p as an allowed execution leased to owner.
func (fx *fixture) createAllowed(p *store.Proposal, owner string, lease time.Duration) (*store.CreateProposalResult, error) {
	return fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{
		Proposal: p.Clone(),
		Allowed:  &store.AllowedExecution{Owner: owner, LeaseDuration: lease},
	})
}

// testAllowed pins the record of an allowed write: created executing under a
// lease, replayed without a second lease, settled and recovered like any
// execution.
func testAllowed(t *testing.T, newStore Factory) {
	t.Run("CreatedExecuting", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.allowedProposal(thread)
		res, err := fx.createAllowed(p, worker, longLease)
		if err != nil {
			t.Fatalf("CreateProposal allowed: %v", err)
		}
		got := res.Proposal
		if !res.Created {
			t.Errorf("Created = false, want true")
		}
		requireStatus(t, got, store.StatusExecuting)
		requireLease(t, fx, got, worker, longLease)
		if got.Attempt != 1 || got.ConsumedBy != p.ToolCallID || len(got.Decisions) != 0 ||
			len(got.Approvers) != 0 || got.Quorum != 0 || got.OperationID != p.OperationID || got.Version != 1 {
			t.Errorf("allowed record: attempt %d, consumed by %q, decisions %v, approvers %v, quorum %d, operation %s, version %d; "+
				"want 1, %s, none, none, 0, %s, 1",
				got.Attempt, got.ConsumedBy, got.Decisions, got.Approvers, got.Quorum, got.OperationID, got.Version, p.ToolCallID, p.OperationID)
		}
		requireSameProposal(t, fx.get(p), got)
		evs := fx.events(p.ID)
		if typ := eventTypes(evs); !slices.Equal(typ, []store.EventType{store.EventCreated, store.EventClaimed}) {
			t.Errorf("events = %v, want created, claimed", typ)
		} else if evs[1].Actor != worker || evs[1].Status != store.StatusExecuting {
			t.Errorf("claimed event = %+v, want by %s, status executing", evs[1], worker)
		}
		// Listed in its thread, like any record.
		if page := fx.list(store.ListProposalsParams{ThreadID: thread}); len(page.Proposals) != 1 || page.Proposals[0].ID != p.ID {
			t.Errorf("thread listing = %v, want [%s]", ids(page.Proposals), p.ID)
		}
		// Nothing but its holder may move it: a worker's claim finds nothing.
		if claimed := fx.claimBatch(worker2, longLease, 10); len(claimed) != 0 {
			t.Errorf("ClaimBatch claimed %v of a held allowed record", claimedIDs(claimed))
		}
		_, err = fx.store.Claim(fx.ctx, &store.ClaimParams{Tenant: tenant, ID: p.ID, Owner: worker2, LeaseDuration: longLease, ConsumedBy: "call_x"})
		requireConflict(t, err, p.ID, store.StatusExecuting, []store.Status{store.StatusApproved}, false)

		// It settles under its lease, and its outcome reaches the thread.
		settled := fx.succeed(got)
		requireStatus(t, settled.Proposal, store.StatusSucceeded)
		if msgs := fx.messages(thread); len(msgs) != 1 || msgs[0].ProposalID != p.ID {
			t.Errorf("thread messages = %+v, want the outcome of %s", msgs, p.ID)
		}
	})

	t.Run("ReplayGrantsNoLease", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.allowedProposal(thread)
		first, err := fx.createAllowed(p, worker, longLease)
		if err != nil {
			t.Fatalf("CreateProposal allowed: %v", err)
		}
		fx.clock.Advance(time.Minute)
		replay := NewProposal(tenant, thread, p.ToolCallID, withExpiresAt(fx.clock.Now().Add(time.Hour)))
		again, err := fx.createAllowed(replay, worker2, longLease)
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
		if again.Created {
			t.Errorf("replay: Created = true, want false")
		}
		requireSameProposal(t, again.Proposal, first.Proposal)
		requireSameProposal(t, fx.get(p), first.Proposal)
		if n := len(fx.events(p.ID)); n != 2 {
			t.Errorf("%d events after the replay, want 2", n)
		}
		// A replay of a settled record returns the settled record.
		fx.succeed(first.Proposal)
		settled, err := fx.createAllowed(replay, worker2, longLease)
		if err != nil || settled.Created {
			t.Fatalf("replay after settling = %+v, %v; want the record, not created", settled, err)
		}
		requireStatus(t, settled.Proposal, store.StatusSucceeded)
	})

	t.Run("LapsedLeaseRecovered", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.allowedProposal(thread)
		res, err := fx.createAllowed(p, worker, shortLease)
		if err != nil {
			t.Fatalf("CreateProposal allowed: %v", err)
		}
		fx.elapse(shortLease + leaseSlack)
		claimed := fx.claimBatch(worker2, longLease, 10)
		if len(claimed) != 1 || claimed[0].Proposal.ID != p.ID || claimed[0].From != store.StatusExecuting {
			t.Fatalf("ClaimBatch = %v, want %s recovered from executing", claimedIDs(claimed), p.ID)
		}
		rec := claimed[0].Proposal
		requireLease(t, fx, rec, worker2, longLease)
		if rec.Attempt != 1 || rec.Lease.Generation <= res.Proposal.Lease.Generation {
			t.Errorf("recovered: attempt %d, generation %d; want 1, above %d", rec.Attempt, rec.Lease.Generation, res.Proposal.Lease.Generation)
		}
		// The first holder lost its lease; the new one settles.
		_, err = fx.store.Settle(fx.ctx, settleParams(res.Proposal, store.StatusSucceeded))
		requireLeaseLost(t, err)
		sp := settleParams(rec, store.StatusUnknown)
		requireStatus(t, fx.settle(sp).Proposal, store.StatusUnknown)
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		cases := map[string]*store.CreateProposalParams{
			"NoOwner":      {Allowed: &store.AllowedExecution{LeaseDuration: longLease}},
			"NoLease":      {Allowed: &store.AllowedExecution{Owner: worker}},
			"WithApproval": {Allowed: &store.AllowedExecution{Owner: worker, LeaseDuration: longLease}, ApprovedBy: &store.Decision{Actor: "grant:x", Via: "grant"}},
		}
		for name, params := range cases {
			p := fx.allowedProposal(thread)
			params.Proposal = p.Clone()
			if _, err := fx.store.CreateProposal(fx.ctx, params); !isInvalidParams(err) {
				t.Errorf("%s: %v, want ErrInvalidParams", name, err)
			}
			requireNothingStored(t, fx, p)
		}
	})

	t.Run("RaceIdenticalCreations", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const n = 32
		call := uniqueID("call")
		exp := fx.clock.Now().Add(time.Hour)
		results := make([]*store.CreateProposalResult, n)
		errs := make([]error, n)
		concurrently(n, func(i int) {
			p := NewProposal(tenant, thread, call, withExpiresAt(exp), withApprovers())
			results[i], errs[i] = fx.createAllowed(p, worker, longLease)
		})
		created := 0
		var first *store.Proposal
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("creator %d: %v", i, errs[i])
			}
			if results[i].Created {
				created++
			}
			if first == nil {
				first = results[i].Proposal
			} else if results[i].Proposal.ID != first.ID || results[i].Proposal.Lease == nil ||
				results[i].Proposal.Lease.Token != first.Lease.Token {
				t.Errorf("creator %d got %s (lease %+v), another %s (lease %+v)", i, results[i].Proposal.ID, results[i].Proposal.Lease, first.ID, first.Lease)
			}
		}
		if created != 1 {
			t.Errorf("%d creations, want exactly 1", created)
		}
		all, _ := fx.listAll(store.ListProposalsParams{})
		if len(all) != 1 {
			t.Fatalf("listing = %v, want one record", ids(all))
		}
		claims := 0
		for _, e := range fx.events(all[0].ID) {
			if e.Type == store.EventClaimed {
				claims++
			}
		}
		if claims != 1 {
			t.Errorf("%d claimed events, want 1: one lease", claims)
		}
	})
}
