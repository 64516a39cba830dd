package store

import "testing"

// TestCompleteGrantWithoutApprovals: the rule is exported, so a proposal
// that holds no approval (none yet, or only a rejection) makes no grant
// rather than a panic.
func TestCompleteGrantWithoutApprovals(t *testing.T) {
	t.Parallel()
	asked := &Grant{ID: "grt_1", Scope: ScopeThread}
	for name, ds := range map[string][]Decision{
		"None":     nil,
		"Rejected": {{Actor: "bob", Decision: VerdictRejected}},
	} {
		if g := CompleteGrant(&Proposal{Decisions: ds}, asked); g != nil {
			t.Errorf("%s: CompleteGrant = %+v, want nil", name, g)
		}
	}
	if g := CompleteGrant(&Proposal{Decisions: []Decision{{Actor: "bob", Decision: VerdictApproved, Remember: ScopeThread}}}, nil); g != nil {
		t.Errorf("nothing asked: CompleteGrant = %+v, want nil", g)
	}
}
