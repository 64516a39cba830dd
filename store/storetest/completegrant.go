package storetest

import (
	"testing"

	"github.com/countersign/countersign/store"
)

// approveAsking records actor's approval of p, asking to remember scope (none
// when empty) with the grant the engine would describe for it.
func approveAsking(t *testing.T, fx *fixture, p *store.Proposal, actor string, scope store.Scope) *store.DecideResult {
	t.Helper()
	params := &store.DecideParams{Tenant: p.Tenant, ID: p.ID, Actor: actor, Verdict: store.VerdictApproved, Via: "api", Remember: scope}
	if scope != "" {
		params.Grant = grantFor(fx, p, scope)
		params.Grant.GrantedBy = actor
	}
	res, err := fx.store.Decide(fx.ctx, params)
	if err != nil {
		t.Fatalf("Decide(%s by %s, remember %q): %v", p.ID, actor, scope, err)
	}
	if res.Outcome != store.DecideApplied {
		t.Fatalf("Decide(%s by %s) = %s, want applied", p.ID, actor, res.Outcome)
	}
	return res
}

// testCompleteGrant pins that a grant stands for a complete approval: under
// a quorum, every counted approval must ask to remember, and the narrowest
// scope asked applies.
func testCompleteGrant(t *testing.T, newStore Factory) {
	cases := []struct {
		name   string
		quorum int
		asks   []store.Scope // one approver each, in order
		want   store.Scope   // "": no grant
	}{
		{"QuorumOneRemembers", 1, []store.Scope{store.ScopeThread}, store.ScopeThread},
		{"QuorumOneRemembersRun", 1, []store.Scope{store.ScopeRun}, store.ScopeRun},
		{"QuorumOnePlain", 1, []store.Scope{""}, ""},
		{"QuorumTwoThreadThenPlain", 2, []store.Scope{store.ScopeThread, ""}, ""},
		{"QuorumTwoPlainThenThread", 2, []store.Scope{"", store.ScopeThread}, ""},
		{"QuorumTwoThreadAndRun", 2, []store.Scope{store.ScopeThread, store.ScopeRun}, store.ScopeRun},
		{"QuorumTwoRunAndThread", 2, []store.Scope{store.ScopeRun, store.ScopeThread}, store.ScopeRun},
		{"QuorumTwoBothThread", 2, []store.Scope{store.ScopeThread, store.ScopeThread}, store.ScopeThread},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fx := setup(t, newStore)
			p := fx.createNew(withQuorum(c.quorum), withApprovers("role:finance"), func(p *store.Proposal) {
				p.RuleFingerprint = "rule_q"
			})
			var last *store.DecideResult
			for i, scope := range c.asks {
				last = approveAsking(t, fx, p, []string{approver, approver2}[i], scope)
				if i < len(c.asks)-1 {
					if gs := fx.listGrants(); len(gs) != 0 {
						t.Fatalf("after %d of %d approvals: %d grants stored, want none before the quorum", i+1, c.quorum, len(gs))
					}
				}
			}
			if last.To != store.StatusApproved {
				t.Fatalf("after the quorum: status %s, want approved", last.To)
			}
			fx.succeed(fx.claim(last.Proposal, longLease))
			gs := fx.listGrants()
			if c.want == "" {
				if len(gs) != 0 {
					t.Fatalf("grants = %+v, want none: not every counted approval asked to remember", gs)
				}
				_, err := fx.store.FindGrant(fx.ctx, withFingerprint(findParams(p), "rule_q"))
				requireErrorIs(t, err, store.ErrNotFound)
				return
			}
			if len(gs) != 1 {
				t.Fatalf("%d grants stored, want exactly one", len(gs))
			}
			g := gs[0]
			wantRun := ""
			if c.want == store.ScopeRun {
				wantRun = p.RunID
			}
			// Granted by the approver who asked for the scope it has.
			wantBy := ""
			for i, scope := range c.asks {
				if scope == c.want {
					wantBy = []string{approver, approver2}[i]
				}
			}
			if g.GrantedBy != wantBy && c.asks[len(c.asks)-1] != c.want {
				t.Errorf("grant granted by %s, want %s, who asked for %s", g.GrantedBy, wantBy, c.want)
			}
			if last := []string{approver, approver2}[len(c.asks)-1]; c.asks[len(c.asks)-1] == c.want && g.GrantedBy != last {
				t.Errorf("grant granted by %s, want %s, whose approval completed it", g.GrantedBy, last)
			}
			if g.Scope != c.want || g.RunID != wantRun || g.ActivatedAt == nil || g.OriginProposalID != p.ID || g.RuleFingerprint != "rule_q" {
				t.Errorf("grant = scope %s, run %q, activated %v, origin %s, fingerprint %q; want %s, %q, activated, %s, rule_q",
					g.Scope, g.RunID, g.ActivatedAt, g.OriginProposalID, g.RuleFingerprint, c.want, wantRun, p.ID)
			}
			found, err := fx.store.FindGrant(fx.ctx, withFingerprint(findParams(p), "rule_q"))
			if err != nil || found.ID != g.ID {
				t.Errorf("FindGrant = %v, %v; want %s", found, err, g.ID)
			}
		})
	}
}

// withFingerprint returns q asking for rule fingerprint f.
func withFingerprint(q *store.FindGrantParams, f string) *store.FindGrantParams {
	q.RuleFingerprint = f
	return q
}
