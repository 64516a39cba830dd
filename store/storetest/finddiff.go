package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// testFindGrantMatchesRule pins FindGrant (a query on the durable drivers)
// to the rule it restates, store.Grant.Live and store.GrantMatches: over
// grants that differ in every matched field, live or not, and every call a
// few values of each field make, FindGrant answers the newest listed grant
// that the rule says is live and matching, or ErrNotFound.
func testFindGrantMatchesRule(t *testing.T, newStore Factory) {
	fx := setup(t, newStore)
	otherInput := `{"amount":41,"customer":"c_9"}`
	rule := func(f string) func(*store.Proposal) { return func(p *store.Proposal) { p.RuleFingerprint = f } }
	run := func(r string) func(*store.Proposal) { return func(p *store.Proposal) { p.RunID = r } }
	version := func(v string) func(*store.Proposal) { return func(p *store.Proposal) { p.ActionVersion = v } }
	bobs := func(p *store.Proposal) { p.Requester, p.ThreadID = "bob", "t-bob" }
	soon := fx.clock.Now().Add(30 * time.Minute)

	liveGrant(t, fx, store.ScopeThread, opts(rule("rule_a")), nil)
	liveGrant(t, fx, store.ScopeRun, opts(rule("rule_b"), run("run_2"), withInput(otherInput)), nil)
	liveGrant(t, fx, store.ScopeRun, opts(rule("rule_a"), version("2")), func(g *store.Grant) { g.InputDigest = "" })
	liveGrant(t, fx, store.ScopeThread, opts(bobs), nil)
	liveGrant(t, fx, store.ScopeThread, opts(rule("rule_a"), withInput(otherInput)), func(g *store.Grant) { g.ExpiresAt = &soon })
	revoked := liveGrant(t, fx, store.ScopeThread, nil, nil)
	if _, err := fx.store.RevokeGrant(fx.ctx, &store.RevokeGrantParams{Tenant: tenant, ID: revoked.ID, Actor: requester}); err != nil {
		t.Fatalf("RevokeGrant: %v", err)
	}
	// Asked for, never activated: its execution has not succeeded.
	inactive := fx.create(fx.proposal(thread, rule("rule_b"))).Proposal
	approveWithGrant(t, fx, inactive, grantFor(fx, inactive, store.ScopeThread))
	// The expiring grant is judged at both sides of its expiry.
	for _, advance := range []time.Duration{0, time.Hour} {
		fx.clock.Advance(advance)
		now := fx.clock.Now()
		grants := fx.listGrants() // newest first
		if len(grants) != 7 {
			t.Fatalf("%d grants listed, want 7", len(grants))
		}
		matched := 0
		for _, requester := range []string{"alice", "bob"} {
			for _, th := range []string{thread, "t-bob"} {
				for _, runID := range []string{"run_1", "run_2", ""} {
					for _, input := range []string{digest([]byte(`{"amount":40,"customer":"c_9"}`)), digest([]byte(otherInput))} {
						for _, fp := range []string{"", "rule_a", "rule_b"} {
							for _, v := range []string{"1", "2"} {
								q := &store.FindGrantParams{
									Tenant: tenant, Requester: requester, ThreadID: th, RunID: runID,
									Action: "payments.refund", ActionVersion: v, InputDigest: input, RuleFingerprint: fp,
								}
								want := ""
								for _, g := range grants {
									if g.Live(now) && store.GrantMatches(g, q) {
										want = g.ID
										break
									}
								}
								got, err := fx.store.FindGrant(fx.ctx, q)
								switch {
								case want == "" && !errors.Is(err, store.ErrNotFound):
									t.Errorf("%s: FindGrant = %v, %v; the rule matches none", describeFind(q), got, err)
								case want != "" && (err != nil || got.ID != want):
									t.Errorf("%s: FindGrant = %v, %v; the rule matches %s", describeFind(q), got, err, want)
								case want != "":
									matched++
								}
							}
						}
					}
				}
			}
		}
		// The calls above do match something: the comparison is not of
		// two empty answers.
		if matched == 0 {
			t.Errorf("at +%v: no call matched a grant", advance)
		}
	}
}

func describeFind(q *store.FindGrantParams) string {
	return fmt.Sprintf("call by %s in %s/%s, version %s, input %.16s…, rule %q", q.Requester, q.ThreadID, q.RunID, q.ActionVersion, q.InputDigest, q.RuleFingerprint)
}
