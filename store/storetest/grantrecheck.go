package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// byGrant returns the parameters of a creation of p approved by grant g.
func byGrant(p *store.Proposal, g *store.Grant) *store.CreateProposalParams {
	return &store.CreateProposalParams{
		Proposal:   p.Clone(),
		ApprovedBy: &store.Decision{Actor: "grant:" + g.ID, Via: "grant", Reason: "remembered approval by " + g.GrantedBy},
		GrantID:    g.ID,
	}
}

// requireGrantNotLive fails the test unless creating p approved by g is
// refused with ErrGrantNotLive and stores nothing.
func requireGrantNotLive(t *testing.T, fx *fixture, name string, p *store.Proposal, params *store.CreateProposalParams) {
	t.Helper()
	res, err := fx.store.CreateProposal(fx.ctx, params)
	if !errors.Is(err, store.ErrGrantNotLive) || res != nil {
		t.Errorf("%s: CreateProposal = %+v, %v; want nil, ErrGrantNotLive", name, res, err)
	}
	requireNothingStored(t, fx, p)
}

// testGrantRecheck pins that a proposal approved by a grant re-checks the
// grant in the transaction that creates it.
func testGrantRecheck(t *testing.T, newStore Factory) {
	rule := func(p *store.Proposal) { p.RuleFingerprint = "rule_a" }

	t.Run("LiveGrantApproves", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeRun, opts(rule), nil)
		p := fx.proposal(thread, rule)
		res, err := fx.store.CreateProposal(fx.ctx, byGrant(p, g))
		if err != nil {
			t.Fatalf("CreateProposal approved by a live grant: %v", err)
		}
		requireStatus(t, res.Proposal, store.StatusApproved)
		if len(res.Proposal.Decisions) != 1 || res.Proposal.Decisions[0].Actor != "grant:"+g.ID {
			t.Errorf("decisions = %+v, want the grant's", res.Proposal.Decisions)
		}
	})

	t.Run("ReplayAnswersWithoutTheGrant", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		expiresAt := fx.clock.Now().Add(time.Hour)
		g := liveGrant(t, fx, store.ScopeRun, opts(rule), func(g *store.Grant) { g.ExpiresAt = &expiresAt })
		p := fx.proposal(thread, rule)
		first, err := fx.store.CreateProposal(fx.ctx, byGrant(p, g))
		if err != nil {
			t.Fatalf("CreateProposal approved by a live grant: %v", err)
		}
		// The grant lapses; the call is replayed, still naming it: the
		// replay gets the proposal its tool call has, not a refusal.
		fx.clock.Advance(2 * time.Hour)
		replay := NewProposal(tenant, thread, p.ToolCallID, rule, withExpiresAt(fx.clock.Now().Add(time.Hour)))
		res, err := fx.store.CreateProposal(fx.ctx, byGrant(replay, g))
		if err != nil {
			t.Fatalf("replay of a call approved by a grant that lapsed since: %v, want its proposal", err)
		}
		if res.Created || res.Proposal.ID != first.Proposal.ID {
			t.Errorf("replay: Created %t, id %s; want false, %s", res.Created, res.Proposal.ID, first.Proposal.ID)
		}
		requireSameProposal(t, res.Proposal, first.Proposal)
	})

	t.Run("NotLiveRefused", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		expiresAt := fx.clock.Now().Add(time.Hour)
		live := liveGrant(t, fx, store.ScopeRun, opts(rule), func(g *store.Grant) { g.ExpiresAt = &expiresAt })
		// An approval that asked for a grant whose execution never succeeded.
		inactive := fx.create(fx.proposal(thread, rule)).Proposal
		inactiveGrant := grantFor(fx, inactive, store.ScopeThread)
		approveWithGrant(t, fx, inactive, inactiveGrant)

		cases := []struct {
			name  string
			grant *store.Grant
			edit  func(*store.Proposal)
		}{
			{"NeverActivated", inactiveGrant, nil},
			{"Missing", &store.Grant{ID: "grt_missing"}, nil},
			{"OtherRule", live, func(p *store.Proposal) { p.RuleFingerprint = "rule_b" }},
			{"OtherRun", live, func(p *store.Proposal) { p.RunID = "run_2" }},
			{"OtherInput", live, withInput(`{"amount":41,"customer":"c_9"}`)},
			{"OtherAction", live, withAction("payments.charge")},
		}
		for _, c := range cases {
			p := fx.proposal(thread, rule)
			if c.edit != nil {
				c.edit(p)
			}
			requireGrantNotLive(t, fx, c.name, p, byGrant(p, c.grant))
		}
		// Another requester, in a thread of its own, cannot borrow the grant.
		bobs := fx.proposal("t-bob", rule, withRequester("bob"))
		requireGrantNotLive(t, fx, "OtherRequester", bobs, byGrant(bobs, live))
		// Another tenant cannot name it.
		other := NewProposal(otherTenant, thread, uniqueID("call"), rule, withExpiresAt(fx.clock.Now().Add(2*time.Hour)))
		requireGrantNotLive(t, fx, "OtherTenant", other, byGrant(other, live))

		// Expired by the store's clock.
		fx.clock.Advance(time.Hour)
		p := fx.proposal(thread, rule)
		requireGrantNotLive(t, fx, "Expired", p, byGrant(p, live))
	})

	t.Run("RevokedRefused", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeThread, opts(rule), nil)
		if _, err := fx.store.RevokeGrant(fx.ctx, &store.RevokeGrantParams{Tenant: tenant, ID: g.ID, Actor: requester}); err != nil {
			t.Fatalf("RevokeGrant: %v", err)
		}
		p := fx.proposal(thread, rule)
		requireGrantNotLive(t, fx, "Revoked", p, byGrant(p, g))
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.proposal(thread, rule)
		params := &store.CreateProposalParams{Proposal: p.Clone(), GrantID: "grt_1"}
		if _, err := fx.store.CreateProposal(fx.ctx, params); !isInvalidParams(err) {
			t.Errorf("a grant id without an approval: %v, want ErrInvalidParams", err)
		}
		requireNothingStored(t, fx, p)
	})

	// Creations race one revocation. Each creation that succeeded must have
	// committed before the revocation did: its created event precedes a
	// marker event written once RevokeGrant returned. Every other creation is
	// refused.
	t.Run("RaceRevocation", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeThread, opts(rule), nil)
		const n = 32
		results := make([]*store.CreateProposalResult, n)
		errs := make([]error, n)
		var marker *store.Proposal
		concurrently(n, func(i int) {
			if i == 0 {
				if _, err := fx.store.RevokeGrant(fx.ctx, &store.RevokeGrantParams{Tenant: tenant, ID: g.ID, Actor: requester}); err != nil {
					errs[0] = err
					return
				}
				res, err := fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: fx.proposal(thread, rule)})
				if err != nil {
					errs[0] = err
					return
				}
				marker = res.Proposal
				return
			}
			results[i], errs[i] = fx.store.CreateProposal(fx.ctx, byGrant(fx.proposal(thread, rule), g))
		})
		if errs[0] != nil || marker == nil {
			t.Fatalf("revoke, then the marker: %v", errs[0])
		}
		markerEvent := fx.events(marker.ID)[0].ID
		for i := 1; i < n; i++ {
			switch {
			case errors.Is(errs[i], store.ErrGrantNotLive):
			case errs[i] != nil:
				t.Errorf("creator %d: %v, want success or ErrGrantNotLive", i, errs[i])
			default:
				requireStatus(t, results[i].Proposal, store.StatusApproved)
				if ev := fx.events(results[i].Proposal.ID)[0].ID; ev > markerEvent {
					t.Errorf("creator %d: created (event %d) after the revocation returned (marker event %d)", i, ev, markerEvent)
				}
			}
		}
		p := fx.proposal(thread, rule)
		requireGrantNotLive(t, fx, "AfterRace", p, byGrant(p, g))
	})
}
