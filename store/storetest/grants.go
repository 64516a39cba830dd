package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// grantFor returns the grant an approval of p would remember in scope.
func grantFor(fx *fixture, p *store.Proposal, scope store.Scope) *store.Grant {
	g := &store.Grant{
		ID:               uniqueID("grt"),
		Tenant:           p.Tenant,
		Requester:        p.Requester,
		Scope:            scope,
		ThreadID:         p.ThreadID,
		Action:           p.Action,
		ActionVersion:    p.ActionVersion,
		InputDigest:      p.InputDigest,
		OriginProposalID: p.ID,
		GrantedBy:        approver,
		CreatedAt:        fx.clock.Now(),
	}
	if scope == store.ScopeRun {
		g.RunID = p.RunID
	}
	return g
}

// approveWithGrant approves p, asking to remember g.
func approveWithGrant(t *testing.T, fx *fixture, p *store.Proposal, g *store.Grant) {
	t.Helper()
	res, err := fx.store.Decide(fx.ctx, &store.DecideParams{
		Tenant: p.Tenant, ID: p.ID, Actor: approver, Verdict: store.VerdictApproved, Via: "api",
		Remember: g.Scope, Grant: g,
	})
	if err != nil {
		t.Fatalf("Decide with grant: %v", err)
	}
	if res.Outcome != store.DecideApplied || res.To != store.StatusApproved {
		t.Fatalf("Decide with grant = %s → %s, want applied → approved", res.Outcome, res.To)
	}
}

// liveGrant runs a proposal through approval (remembering a grant that edit
// may change) and a successful execution, and returns the grant.
func liveGrant(t *testing.T, fx *fixture, scope store.Scope, popts []func(*store.Proposal), edit func(*store.Grant)) *store.Grant {
	t.Helper()
	p := fx.create(fx.proposal(thread, popts...)).Proposal
	g := grantFor(fx, p, scope)
	if edit != nil {
		edit(g)
	}
	approveWithGrant(t, fx, p, g)
	fx.succeed(fx.claim(p, longLease))
	return g
}

// findParams describes a call identical to p's.
func findParams(p *store.Proposal) *store.FindGrantParams {
	return &store.FindGrantParams{
		Tenant: p.Tenant, Requester: p.Requester, ThreadID: p.ThreadID, RunID: p.RunID,
		Action: p.Action, ActionVersion: p.ActionVersion, InputDigest: p.InputDigest,
		RuleFingerprint: p.RuleFingerprint,
	}
}

// listGrants lists the default tenant's grants.
func (fx *fixture) listGrants() []*store.Grant {
	fx.t.Helper()
	gs, err := fx.store.ListGrants(fx.ctx, &store.ListGrantsParams{Tenant: tenant})
	if err != nil {
		fx.t.Fatalf("ListGrants: %v", err)
	}
	return gs
}

// callLike is a FindGrant query edited from a base call.
type callLike struct {
	name  string
	edit  func(*store.FindGrantParams)
	match bool
}

func requireFindGrant(t *testing.T, fx *fixture, base *store.FindGrantParams, g *store.Grant, cases []callLike) {
	t.Helper()
	for _, c := range cases {
		q := *base
		if c.edit != nil {
			c.edit(&q)
		}
		got, err := fx.store.FindGrant(fx.ctx, &q)
		switch {
		case c.match && err != nil:
			t.Errorf("%s: FindGrant: %v, want grant %s", c.name, err, g.ID)
		case c.match && got.ID != g.ID:
			t.Errorf("%s: FindGrant = %s, want %s", c.name, got.ID, g.ID)
		case !c.match && !errorsIsNotFound(err):
			t.Errorf("%s: FindGrant = %v, %v; want ErrNotFound", c.name, got, err)
		}
	}
}

func testGrants(t *testing.T, newStore Factory) {
	otherDigest := digest([]byte(`{"amount":41,"customer":"c_9"}`))

	t.Run("ThreadScope", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeThread, nil, nil)
		base := findParams(fx.proposal(thread))
		requireFindGrant(t, fx, base, g, []callLike{
			{name: "SameCall", match: true},
			{name: "OtherRunSameThread", edit: func(q *store.FindGrantParams) { q.RunID = "run_2" }, match: true},
			{name: "OtherThread", edit: func(q *store.FindGrantParams) { q.ThreadID = "t2" }},
			{name: "OtherDigest", edit: func(q *store.FindGrantParams) { q.InputDigest = otherDigest }},
			{name: "OtherVersion", edit: func(q *store.FindGrantParams) { q.ActionVersion = "2" }},
			{name: "OtherAction", edit: func(q *store.FindGrantParams) { q.Action = "payments.charge" }},
			{name: "OtherRequester", edit: func(q *store.FindGrantParams) { q.Requester = "bob" }},
			{name: "OtherTenant", edit: func(q *store.FindGrantParams) { q.Tenant = otherTenant }},
		})
	})

	t.Run("RunScope", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeRun, nil, nil)
		if g.RunID != "run_1" {
			t.Fatalf("run grant for run %q, want run_1", g.RunID)
		}
		base := findParams(fx.proposal(thread))
		requireFindGrant(t, fx, base, g, []callLike{
			{name: "SameRun", match: true},
			{name: "OtherRun", edit: func(q *store.FindGrantParams) { q.RunID = "run_2" }},
			{name: "NoRun", edit: func(q *store.FindGrantParams) { q.RunID = "" }},
			{name: "OtherThread", edit: func(q *store.FindGrantParams) { q.ThreadID = "t2" }},
			{name: "OtherDigest", edit: func(q *store.FindGrantParams) { q.InputDigest = otherDigest }},
		})
	})

	t.Run("WidenedToAnyInput", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeThread, nil, func(g *store.Grant) { g.InputDigest = "" })
		base := findParams(fx.proposal(thread))
		requireFindGrant(t, fx, base, g, []callLike{
			{name: "SameDigest", match: true},
			{name: "OtherDigest", edit: func(q *store.FindGrantParams) { q.InputDigest = otherDigest }, match: true},
			{name: "OtherVersion", edit: func(q *store.FindGrantParams) { q.ActionVersion = "2" }},
			{name: "OtherAction", edit: func(q *store.FindGrantParams) { q.Action = "payments.charge" }},
			{name: "OtherRequester", edit: func(q *store.FindGrantParams) { q.Requester = "bob" }},
			{name: "OtherThread", edit: func(q *store.FindGrantParams) { q.ThreadID = "t2" }},
		})
	})

	t.Run("RuleFingerprint", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fingerprint := func(p *store.Proposal) { p.RuleFingerprint = "rule_a" }
		// The grant takes the proposal's fingerprint, whatever the asked-for
		// grant said.
		g := liveGrant(t, fx, store.ScopeThread, opts(fingerprint), func(g *store.Grant) { g.RuleFingerprint = "rule_forged" })
		if gs := fx.listGrants(); len(gs) != 1 || gs[0].RuleFingerprint != "rule_a" {
			t.Fatalf("ListGrants = %+v, want one grant of fingerprint rule_a", gs)
		}
		base := findParams(fx.proposal(thread, fingerprint))
		requireFindGrant(t, fx, base, g, []callLike{
			{name: "SameRule", match: true},
			{name: "ChangedRule", edit: func(q *store.FindGrantParams) { q.RuleFingerprint = "rule_b" }},
			{name: "NoRule", edit: func(q *store.FindGrantParams) { q.RuleFingerprint = "" }},
			{name: "ForgedRule", edit: func(q *store.FindGrantParams) { q.RuleFingerprint = "rule_forged" }},
		})
	})

	t.Run("Expired", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		expiresAt := fx.clock.Now().Add(time.Hour)
		g := liveGrant(t, fx, store.ScopeThread, nil, func(g *store.Grant) { g.ExpiresAt = &expiresAt })
		base := findParams(fx.proposal(thread))
		requireFindGrant(t, fx, base, g, []callLike{{name: "BeforeExpiry", match: true}})
		fx.clock.Advance(time.Hour)
		requireFindGrant(t, fx, base, g, []callLike{{name: "AtExpiry"}})
		gs := fx.listGrants()
		if len(gs) != 1 || gs[0].ExpiresAt == nil || !gs[0].ExpiresAt.Equal(expiresAt) {
			t.Errorf("ListGrants = %+v, want the expired grant with its ExpiresAt", gs)
		}
	})

	t.Run("Revoke", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeThread, nil, nil)
		fx.clock.Advance(time.Second)
		revokedAt := fx.clock.Now()
		got, err := fx.store.RevokeGrant(fx.ctx, &store.RevokeGrantParams{Tenant: tenant, ID: g.ID, Actor: "alice"})
		if err != nil {
			t.Fatalf("RevokeGrant: %v", err)
		}
		if got.ID != g.ID || got.RevokedAt == nil || got.RevokedBy != "alice" {
			t.Fatalf("RevokeGrant = %+v, want %s revoked by alice", got, g.ID)
		}
		requireTime(t, "RevokedAt", *got.RevokedAt, revokedAt)
		_, err = fx.store.FindGrant(fx.ctx, findParams(fx.proposal(thread)))
		requireErrorIs(t, err, store.ErrNotFound)

		fx.clock.Advance(time.Second)
		again, err := fx.store.RevokeGrant(fx.ctx, &store.RevokeGrantParams{Tenant: tenant, ID: g.ID, Actor: "bob"})
		if err != nil {
			t.Fatalf("RevokeGrant again: %v", err)
		}
		if again.RevokedAt == nil || !again.RevokedAt.Equal(revokedAt) || again.RevokedBy != "alice" {
			t.Errorf("RevokeGrant again = revoked at %v by %q, want the first revocation (%v by alice)", again.RevokedAt, again.RevokedBy, revokedAt)
		}
		gs := fx.listGrants()
		if len(gs) != 1 || gs[0].RevokedAt == nil || !gs[0].RevokedAt.Equal(revokedAt) || gs[0].RevokedBy != "alice" {
			t.Errorf("ListGrants = %+v, want the grant revoked at %v by alice", gs, revokedAt)
		}
	})

	t.Run("RevokeNotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeThread, nil, nil)
		_, err := fx.store.RevokeGrant(fx.ctx, &store.RevokeGrantParams{Tenant: tenant, ID: "grt_missing", Actor: "alice"})
		requireErrorIs(t, err, store.ErrNotFound)
		_, err = fx.store.RevokeGrant(fx.ctx, &store.RevokeGrantParams{Tenant: otherTenant, ID: g.ID, Actor: "alice"})
		requireErrorIs(t, err, store.ErrNotFound)
		if _, err := fx.store.FindGrant(fx.ctx, findParams(fx.proposal(thread))); err != nil {
			t.Errorf("FindGrant after another tenant's revocation: %v", err)
		}
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g1 := liveGrant(t, fx, store.ScopeThread, nil, nil)
		fx.clock.Advance(time.Second)
		// Bob's call is in a thread of his own: he may not call in alice's.
		g2 := liveGrant(t, fx, store.ScopeRun, opts(withRequester("bob"), func(p *store.Proposal) { p.ThreadID = "t-bob" }), nil)
		fx.clock.Advance(time.Second)
		g3 := liveGrant(t, fx, store.ScopeThread, nil, func(g *store.Grant) { g.ThreadID = "t2" })
		fx.clock.Advance(time.Second)
		// Another tenant's grant is never listed.
		op := NewProposal(otherTenant, thread, uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour)))
		fx.create(op)
		approveWithGrant(t, fx, op, grantFor(fx, op, store.ScopeThread))

		grantIDs := func(gs []*store.Grant) []string {
			out := make([]string, len(gs))
			for i, g := range gs {
				out[i] = g.ID
			}
			return out
		}
		cases := []struct {
			name   string
			params store.ListGrantsParams
			want   []*store.Grant
		}{
			{"All", store.ListGrantsParams{Tenant: tenant}, []*store.Grant{g3, g2, g1}},
			{"Requester", store.ListGrantsParams{Tenant: tenant, Requester: "alice"}, []*store.Grant{g3, g1}},
			{"Thread", store.ListGrantsParams{Tenant: tenant, ThreadID: thread}, []*store.Grant{g1}},
			{"Both", store.ListGrantsParams{Tenant: tenant, Requester: "bob", ThreadID: "t-bob"}, []*store.Grant{g2}},
			{"BothOtherThread", store.ListGrantsParams{Tenant: tenant, Requester: "bob", ThreadID: thread}, nil},
			{"None", store.ListGrantsParams{Tenant: tenant, Requester: "zed"}, nil},
		}
		for _, c := range cases {
			got, err := fx.store.ListGrants(fx.ctx, &c.params)
			if err != nil {
				t.Fatalf("%s: ListGrants: %v", c.name, err)
			}
			if g, w := grantIDs(got), grantIDs(c.want); !slices.Equal(g, w) {
				t.Errorf("%s: ListGrants = %v, want %v (newest first)", c.name, g, w)
			}
		}
		got := fx.listGrants()
		if len(got) == 3 {
			if g := got[2]; g.Scope != store.ScopeThread || g.Requester != "alice" || g.ThreadID != thread ||
				g.Action != "payments.refund" || g.ActionVersion != "1" || g.InputDigest != g1.InputDigest ||
				g.OriginProposalID != g1.OriginProposalID || g.GrantedBy != approver || g.ActivatedAt == nil {
				t.Errorf("listed grant = %+v, want the fields of %+v, activated", g, g1)
			}
			if g := got[1]; g.Scope != store.ScopeRun || g.RunID != "run_1" || g.Requester != "bob" {
				t.Errorf("listed run grant = %+v, want bob's run grant for run_1", g)
			}
		}
	})
}
