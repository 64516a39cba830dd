package countersign

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/countersign/countersign/internal/condition"
)

// CallableAction is an action a caller may call, with what the policy does
// with the caller's calls of it (Engine.CallableActions).
type CallableAction struct {
	Action *Action
	// Effect is EffectAllow when every call the caller may make of the
	// action is allowed, whatever its input and thread; otherwise
	// EffectAsk: some or all of its calls ask, or which rule applies
	// depends on what the call carries.
	Effect Effect
}

// CallableActions lists, sorted by name, the registered actions id may
// call (docs/api.md Part 3, "Listing actions"). It is a read: a person's and an
// agent's credential may both ask, and nothing is stored.
//
// The policy decides it as it decides a call, as far as it can before the
// call is made. Each action's rules are walked in the order a call tries
// them. A rule without a condition decides every call that reaches it. A
// When that reads only actor, tenant and action is evaluated now, for id:
// it applies or not to every call of id; if it cannot be evaluated, every
// call that reaches it is denied, as at call time. A When that reads input
// or thread_id, and a Go Condition, may or may not apply to a call: the
// action's effect then depends on the call, and is EffectAsk unless every
// outcome the walk can reach is a denial. An action every call of which id
// would have denied is not listed. Authorize and Preflight hooks need a
// call's input, and are not run.
func (e *Engine) CallableActions(ctx context.Context, id Identity) ([]CallableAction, error) {
	if id.Tenant == "" || id.Actor == "" {
		return nil, fmt.Errorf("%w: identity needs a tenant and an actor", ErrInvalidCall)
	}
	type registered struct {
		a     *Action
		rules *actionRules
	}
	e.mu.RLock()
	regs := make([]registered, 0, len(e.actions))
	for name, a := range e.actions {
		regs = append(regs, registered{a, e.rules[name]})
	}
	e.mu.RUnlock()
	slices.SortFunc(regs, func(x, y registered) int { return cmp.Compare(x.a.name, y.a.name) })
	var out []CallableAction
	for _, r := range regs {
		effect, pe := r.rules.forCaller(id, r.a)
		if pe != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "policy condition failed: action not listed for its caller",
				slog.String("action", r.a.name), slog.String("tenant", id.Tenant), slog.String("actor", id.Actor),
				slog.Int("rule", pe.Rule), slog.String("match", pe.Match), slog.String("when", pe.When),
				slog.String("error", pe.Err.Error()))
		}
		if effect != EffectDeny {
			out = append(out, CallableAction{Action: r.a, Effect: effect})
		}
	}
	return out, nil
}

// callerVars are the variables of the When expressions that read only the
// caller and the action, without a call.
func callerVars(id Identity, a *Action) *condition.Vars {
	return &condition.Vars{
		ActorID: id.Actor, Roles: id.Roles, Tenant: id.Tenant,
		ActionName: a.name, ActionVersion: a.version, ActionKind: string(a.kind),
	}
}

// readsCallerOnly reports whether a compiled When reads nothing but actor,
// tenant and action: then it decides every call of one caller alike.
func readsCallerOnly(prg *condition.Program) bool {
	for _, v := range prg.Variables() {
		if v != condition.VarActor && v != condition.VarTenant && v != condition.VarAction {
			return false
		}
	}
	return true
}

// forCaller returns what the rules of a do with id's calls, before any is
// made (see CallableActions): EffectAllow when every call is allowed,
// EffectDeny when every call is denied, EffectAsk otherwise. pe is the
// failure of a condition over the caller alone, which denies every call
// that reaches its rule.
func (ar *actionRules) forCaller(id Identity, a *Action) (effect Effect, pe *PolicyError) {
	var vars *condition.Vars
	// dependent is whether a rule that may or may not apply, by the call,
	// was passed; onlyDeny whether every such rule denies.
	dependent, onlyDeny := false, true
	decided := ar.defaults.m.effect
	for i := range ar.rules {
		cr := &ar.rules[i]
		if !cr.conditional() {
			decided = cr.m.effect
			break
		}
		if cr.prg != nil && readsCallerOnly(cr.prg) {
			if vars == nil {
				vars = callerVars(id, a)
			}
			holds, err := cr.prg.Eval(vars)
			if err != nil {
				// As at call time: a condition fails closed.
				decided = EffectDeny
				pe = &PolicyError{Rule: cr.index, Match: cr.rule.Match, When: cr.rule.whenText(), Err: err}
				break
			}
			if holds {
				decided = cr.m.effect
				break
			}
			continue
		}
		// Reads input or thread_id, or is Go: it applies to some calls
		// (and denies those it cannot decide), perhaps not to others.
		dependent = true
		onlyDeny = onlyDeny && cr.m.effect == EffectDeny
	}
	switch {
	case decided == EffectDeny && onlyDeny:
		return EffectDeny, pe
	case dependent:
		return EffectAsk, pe
	}
	return decided, pe
}
