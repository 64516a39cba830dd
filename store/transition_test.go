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

// TestMayHoldGrant: a settlement activates grants only for a proposal
// mayHoldGrant names, so it must name every proposal CompleteGrant makes a
// grant for, and it names none that CompleteGrant makes none for. Every list
// of up to three decisions, each of every verdict and remembered scope, is
// checked.
func TestMayHoldGrant(t *testing.T) {
	t.Parallel()
	var choices []Decision
	for _, v := range []Verdict{VerdictApproved, VerdictRejected} {
		for _, sc := range []Scope{"", ScopeRun, ScopeThread} {
			choices = append(choices, Decision{Actor: "a", Decision: v, Remember: sc})
		}
	}
	lists, level := [][]Decision{nil}, [][]Decision{nil}
	for range 3 {
		var longer [][]Decision
		for _, l := range level {
			for _, d := range choices {
				longer = append(longer, append(append([]Decision(nil), l...), d))
			}
		}
		lists, level = append(lists, longer...), longer
	}
	grants := 0
	for _, ds := range lists {
		p := &Proposal{Decisions: ds, RunID: "run"}
		made := CompleteGrant(p, &Grant{ID: "grt_1"}) != nil
		if made {
			grants++
		}
		if got := mayHoldGrant(p); got != made {
			t.Errorf("decisions %+v: mayHoldGrant = %v, CompleteGrant made a grant: %v", ds, got, made)
		}
	}
	if grants == 0 || grants == len(lists) {
		t.Fatalf("%d of %d lists make a grant: the test tells nothing apart", grants, len(lists))
	}
}
