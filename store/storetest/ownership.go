package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// requireNothingStored fails the test unless no proposal p.ID, no proposal
// for p's tool call and no event of p exist.
func requireNothingStored(t *testing.T, fx *fixture, p *store.Proposal) {
	t.Helper()
	if _, err := fx.store.GetProposal(fx.ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID}); !errorsIsNotFound(err) {
		t.Errorf("GetProposal(%s) after a refused creation: %v, want ErrNotFound", p.ID, err)
	}
	got, err := fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{Tenant: p.Tenant, ThreadID: p.ThreadID, ToolCallID: p.ToolCallID})
	if err == nil && got.ID == p.ID {
		t.Errorf("GetProposalByToolCall(%s) found the refused proposal", p.ToolCallID)
	}
	if evs := fx.events(p.ID); len(evs) != 0 {
		t.Errorf("a refused creation left events %v", eventTypes(evs))
	}
}

// requireOwner fails the test unless thread th of the default tenant is
// owned by owner.
func requireOwner(t *testing.T, fx *fixture, th, owner string) {
	t.Helper()
	got, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: th})
	if err != nil {
		t.Fatalf("GetThread(%s): %v", th, err)
	}
	if got.Owner != owner {
		t.Errorf("thread %s owned by %q, want %q", th, got.Owner, owner)
	}
}

func testThreadOwnership(t *testing.T, newStore Factory) {
	t.Run("OtherActorRefused", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		first := fx.createNew(withKey("c_9"))
		for _, name := range []string{"Pending", "Approved", "Allowed", "Superseding"} {
			// Superseding: the same replacement key as the owner's proposal.
			p := fx.proposal(thread, withRequester("mallory"), withKey(first.ReplacementKey))
			params := &store.CreateProposalParams{Proposal: p.Clone()}
			switch name {
			case "Approved":
				params.ApprovedBy = &store.Decision{Actor: "grant:x", Via: "grant"}
			case "Allowed":
				params.Allowed = &store.AllowedExecution{Owner: worker, LeaseDuration: longLease}
			}
			res, err := fx.store.CreateProposal(fx.ctx, params)
			if !errors.Is(err, store.ErrNotThreadOwner) || res != nil {
				t.Errorf("%s: CreateProposal by a non-owner = %v, %v; want nil, ErrNotThreadOwner", name, res, err)
			}
			requireNothingStored(t, fx, p)
		}
		requireOwner(t, fx, thread, requester)
		requireSameProposal(t, fx.get(first), first)
		if all, _ := fx.listAll(store.ListProposalsParams{}); len(all) != 1 {
			t.Errorf("listing = %v, want only the owner's proposal", ids(all))
		}
	})

	t.Run("ReplayByOtherActorRefused", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		first := fx.createNew()
		// Another actor repeating the owner's tool call gets nothing back.
		replay := NewProposal(tenant, thread, first.ToolCallID, withRequester("mallory"), withExpiresAt(first.ExpiresAt))
		res, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: replay})
		if !errors.Is(err, store.ErrNotThreadOwner) || res != nil {
			t.Fatalf("replay by a non-owner = %+v, %v; want nil, ErrNotThreadOwner", res, err)
		}
		requireSameProposal(t, fx.get(first), first)
	})

	t.Run("EnsuredThreadOwner", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		if _, err := fx.store.EnsureThread(fx.ctx, &store.EnsureThreadParams{Tenant: tenant, ID: "t-bob", Owner: "bob"}); err != nil {
			t.Fatalf("EnsureThread: %v", err)
		}
		p := fx.proposal("t-bob")
		_, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: p.Clone()})
		requireErrorIs(t, err, store.ErrNotThreadOwner)
		requireNothingStored(t, fx, p)
		if res := fx.create(fx.proposal("t-bob", withRequester("bob"))); !res.Created {
			t.Errorf("the owner's creation: Created = false, want true")
		}
		requireOwner(t, fx, "t-bob", "bob")
	})

	t.Run("SameIDOtherTenant", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.createNew()
		// A thread id names a thread within a tenant only.
		op := NewProposal(otherTenant, thread, uniqueID("call"), withRequester("mallory"), withExpiresAt(fx.clock.Now().Add(time.Hour)))
		if res := fx.create(op); !res.Created {
			t.Errorf("another tenant's thread of the same id: Created = false, want true")
		}
		requireOwner(t, fx, thread, requester)
	})

	t.Run("Race", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const n = 32
		actors := [2]string{"alice", "bob"}
		results := make([]*store.CreateProposalResult, n)
		errs := make([]error, n)
		concurrently(n, func(i int) {
			p := fx.proposal("t-new", withRequester(actors[i%2]))
			results[i], errs[i] = fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: p})
		})
		th, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: "t-new"})
		if err != nil {
			t.Fatalf("GetThread: %v", err)
		}
		if th.Owner != actors[0] && th.Owner != actors[1] {
			t.Fatalf("thread owned by %q, want alice or bob", th.Owner)
		}
		created := 0
		for i := range n {
			actor := actors[i%2]
			switch {
			case actor == th.Owner && errs[i] != nil:
				t.Errorf("creator %d (%s, the owner): %v", i, actor, errs[i])
			case actor == th.Owner && !results[i].Created:
				t.Errorf("creator %d (%s, the owner): Created = false", i, actor)
			case actor == th.Owner:
				created++
			case !errors.Is(errs[i], store.ErrNotThreadOwner):
				t.Errorf("creator %d (%s, not the owner) = %v, %v; want ErrNotThreadOwner", i, actor, results[i], errs[i])
			}
		}
		all, _ := fx.listAll(store.ListProposalsParams{ThreadID: "t-new"})
		for _, p := range all {
			if p.Requester != th.Owner {
				t.Errorf("stored proposal %s of %s in %s's thread", p.ID, p.Requester, th.Owner)
			}
		}
		if len(all) != created || created != n/2 {
			t.Errorf("%d proposals stored, %d created; want %d", len(all), created, n/2)
		}
	})
}
