package storetest

import (
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// Factory returns a fresh, empty store whose clock is now. It registers its
// own cleanup (closing the store, dropping its database) with t.Cleanup.
type Factory func(t *testing.T, now func() time.Time) store.Store

// Run runs the conformance suite against the driver newStore makes. Every
// subtest gets its own store and runs in parallel with the others. A driver
// whose SQL restates the rules of store/transition.go passes WithRuleQuery.
func Run(t *testing.T, newStore Factory, opts ...Option) {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	groups := []struct {
		name string
		run  func(*testing.T, Factory)
	}{
		{"CreateProposal", testCreateProposal},
		{"Replacement", testReplacement},
		{"Get", testGet},
		{"Threads", testThreads},
		{"Decide", testDecide},
		{"Cancel", testCancel},
		{"Expire", testExpire},
		{"ExpireDue", testExpireDue},
		{"Claim", testClaim},
		{"Fence", testFence},
		{"Settle", testSettle},
		{"SettleMany", testSettleMany},
		{"SettleManyMatchesSettle", testSettleManyMatchesSettle},
		{"ClaimBatch", testClaimBatch},
		{"CallerRelease", testCallerRelease},
		{"Resolve", testResolve},
		{"Grants", testGrants},
		{"FindGrantMatchesRule", testFindGrantMatchesRule},
		{"CompleteGrant", testCompleteGrant},
		{"GrantRecheck", testGrantRecheck},
		{"ThreadOwnership", testThreadOwnership},
		{"LookupCall", testLookupCall},
		{"Allowed", testAllowed},
		{"ListProposals", testListProposals},
		{"Events", testEvents},
		{"Audit", testAudit},
		{"ActorKinds", testActorKinds},
		{"Checkpoints", testCheckpoints},
		{"Aliasing", testAliasing},
		{"Races", testRaces},
		{"Sessions", testSessions},
		{"EmailLinks", testEmailLinks},
		{"Passkeys", testPasskeys},
		{"MCPNonces", testMCPNonces},
		{"Runs", testRuns},
		{"Escalation", testEscalation},
		{"ClientTools", testClientTools},
		{"MessageIDs", testMessageIDs},
		{"Notifications", testNotifications},
		{"SlackAnnouncements", testSlackAnnouncements},
		{"RulesMatchQueries", func(t *testing.T, f Factory) { testRulesMatchQueries(t, f, o.ruleQuery) }},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, newStore)
		})
	}
}
