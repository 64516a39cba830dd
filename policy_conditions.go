package countersign

import (
	"context"
	"fmt"
	"sync"

	"github.com/countersign/countersign/internal/condition"
)

// actionRules is the policy as it applies to one registered action: the
// rules whose Match fits its name, in the order they are tried, each When
// compiled against the action's input schema. Register builds it once, so
// that a call neither matches globs nor compiles anything.
type actionRules struct {
	rules []actionRule
	// defaults is what applies when no rule does.
	defaults ruleOutcome
}

type actionRule struct {
	index int // in Policy.Rules, for logs and errors
	rule  *Rule
	prg   *condition.Program // nil without a When
	// chain, on the first of two or more consecutive rules with a When,
	// evaluates chainLen of them at once (see condition.Chain).
	chain    *condition.Chain
	chainLen int
	ruleOutcome
}

// ruleOutcome is a rule as it applies to the action, resolved once: its
// effect and terms with defaults filled in, and its fingerprint.
type ruleOutcome struct {
	m           ruleMatch
	fingerprint string
}

func outcome(m ruleMatch) ruleOutcome { return ruleOutcome{m: m, fingerprint: m.rule.fingerprint()} }

// conditional reports whether the rule has a condition.
func (r *actionRule) conditional() bool { return r.prg != nil || r.rule.Condition != nil }

// compileFor returns the rules of p that govern a, their conditions
// compiled against a's input schema.
func (p *Policy) compileFor(a *Action) (*actionRules, error) {
	ar := &actionRules{defaults: outcome(p.resolved(a, nil))}
	for _, i := range p.candidates(a.name) {
		r := &p.Rules[i]
		cr := actionRule{index: i, rule: r, ruleOutcome: outcome(p.resolved(a, r))}
		if r.When != "" {
			prg, err := condition.Compile(r.When, a.schemaJSON)
			if err != nil {
				return nil, fmt.Errorf("countersign: policy: rule %d (%q): field When %q, for action %s: %w", i, r.Match, r.When, a.name, err)
			}
			cr.prg = prg
		}
		ar.rules = append(ar.rules, cr)
	}
	for i := 0; i < len(ar.rules); {
		j := i
		for j < len(ar.rules) && ar.rules[j].prg != nil {
			j++
		}
		if j-i >= 2 {
			exprs := make([]string, 0, j-i)
			for _, cr := range ar.rules[i:j] {
				exprs = append(exprs, cr.rule.When)
			}
			chain, err := condition.NewChain(exprs, a.schemaJSON)
			if err != nil {
				return nil, fmt.Errorf("countersign: policy: action %s: %w", a.name, err)
			}
			ar.rules[i].chain, ar.rules[i].chainLen = chain, j-i
		}
		i = max(j, i+1)
	}
	return ar, nil
}

// PolicyError is why a rule's condition could not decide a call: the call
// is denied (DeniedByPolicyError), since a condition fails closed.
type PolicyError struct {
	// Rule is the rule's index in the policy, Match and When its terms.
	Rule        int
	Match, When string
	Err         error
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("rule %d (%s when %s): %v", e.Rule, e.Match, e.When, e.Err)
}

func (e *PolicyError) Unwrap() error { return e.Err }

// choose returns the rule that applies to a call (nil: none does, the
// defaults decide): the first, in order, whose condition holds or which has none.
// With in nil (the input is invalid, so no condition can be evaluated over
// it), the rules with a condition are passed over. A condition that cannot
// decide is a *PolicyError.
func (ar *actionRules) choose(ctx context.Context, in *ConditionInput) (*actionRule, error) {
	var vars *condition.Vars
	defer func() {
		if vars != nil {
			*vars = condition.Vars{} // nothing of this call stays reachable
			varsPool.Put(vars)
		}
	}()
	for i := 0; i < len(ar.rules); i++ {
		cr := &ar.rules[i]
		if !cr.conditional() {
			return cr, nil
		}
		if in == nil {
			continue
		}
		if cr.chain != nil {
			if vars == nil {
				vars = conditionVars(in)
			}
			// The chain's answer is the one of evaluating its rules in
			// turn; without one (an error, say), they are, below.
			if k, ok := cr.chain.Eval(vars); ok && k < cr.chainLen {
				if k >= 0 {
					return &ar.rules[i+k], nil
				}
				i += cr.chainLen - 1
				continue
			}
		}
		var holds bool
		var err error
		if cr.prg != nil {
			if vars == nil {
				vars = conditionVars(in)
			}
			holds, err = cr.prg.Eval(vars)
		} else {
			holds, err = cr.rule.Condition.Holds(ctx, in)
		}
		if err != nil {
			return nil, &PolicyError{Rule: cr.index, Match: cr.rule.Match, When: cr.rule.whenText(), Err: err}
		}
		if holds {
			return cr, nil
		}
	}
	return nil, nil
}

// varsPool recycles the variables of calls: they are large (the input's
// decoded fields live in them), and a call's evaluation is done with them
// when choose returns.
var varsPool = sync.Pool{New: func() any { return new(condition.Vars) }}

// conditionVars are the variables of the When expressions of one call.
func conditionVars(in *ConditionInput) *condition.Vars {
	v := varsPool.Get().(*condition.Vars)
	*v = condition.Vars{
		InputJSON: in.Input, ActorID: in.Identity.Actor, Roles: in.Identity.Roles, Tenant: in.Identity.Tenant, ThreadID: in.ThreadID,
		ActionName: in.Action.name, ActionVersion: in.Action.version, ActionKind: string(in.Action.kind),
	}
	return v
}
