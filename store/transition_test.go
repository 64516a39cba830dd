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

// TestMayHoldGrant: a settlement activates grants, and CompleteGrant makes
// one, only for a proposal whose approvals, at least one, all remembered a
// scope; rejections do not count.
func TestMayHoldGrant(t *testing.T) {
	t.Parallel()
	approve := func(sc Scope) Decision { return Decision{Actor: "a", Decision: VerdictApproved, Remember: sc} }
	reject := Decision{Actor: "r", Decision: VerdictRejected}
	for name, c := range map[string]struct {
		ds   []Decision
		want bool
	}{
		"no decision":                 {nil, false},
		"a rejection only":            {[]Decision{reject}, false},
		"an approval, not remembered": {[]Decision{approve("")}, false},
		"an approval for the thread":  {[]Decision{approve(ScopeThread)}, true},
		"an approval for the run":     {[]Decision{approve(ScopeRun)}, true},
		"both scopes":                 {[]Decision{approve(ScopeThread), approve(ScopeRun)}, true},
		"one of two not remembered":   {[]Decision{approve(ScopeThread), approve("")}, false},
		"the first not remembered":    {[]Decision{approve(""), approve(ScopeRun)}, false},
		"an unknown scope":            {[]Decision{approve("forever")}, false},
		"a rejection and an approval": {[]Decision{reject, approve(ScopeThread)}, true},
	} {
		p := &Proposal{Decisions: c.ds, RunID: "run"}
		if got := mayHoldGrant(p); got != c.want {
			t.Errorf("%s: mayHoldGrant = %v, want %v", name, got, c.want)
		}
		if made := CompleteGrant(p, &Grant{ID: "grt_1"}) != nil; made != c.want {
			t.Errorf("%s: CompleteGrant made a grant: %v, want %v", name, made, c.want)
		}
	}
}
