package countersign

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/countersign/countersign/cstype"
)

// applyPolicy finds the rule that applies to the call r resolved, now that
// its input is validated (or refused), and applies it: a deny rule refuses
// the call, and so does a condition that cannot decide, which is logged
// with its rule. Both happen before anything is read or stored.
func (e *Engine) applyPolicy(ctx context.Context, c *Call, r *callRun) error {
	var in *ConditionInput
	if r.inputErr == nil {
		in = &ConditionInput{Identity: c.Identity, ThreadID: c.ThreadID, Action: r.a, Input: r.input}
	}
	cr, err := r.rules.choose(ctx, in)
	if err != nil {
		pe := err.(*PolicyError)
		e.log.LogAttrs(ctx, slog.LevelWarn, "policy condition failed: call denied",
			slog.String("action", r.a.name), slog.String("tenant", c.Identity.Tenant),
			slog.String("actor", c.Identity.Actor), slog.String("thread_id", c.ThreadID),
			slog.Int("rule", pe.Rule), slog.String("match", pe.Match), slog.String("when", pe.When),
			slog.String("error", pe.Err.Error()))
		return &DeniedError{Code: DeniedByPolicyError, Action: r.a.name, Reason: "the policy could not decide: " + pe.Error()}
	}
	o := &r.rules.defaults
	if cr != nil {
		o = &cr.ruleOutcome
	}
	r.m = o.m
	if r.m.effect == EffectDeny {
		return &DeniedError{Code: DeniedByPolicy, Action: r.a.name, Reason: "the policy denies " + r.a.name}
	}
	if r.a.callerExecuted && c.Mode == ModeIndependent {
		return fmt.Errorf("%w: mode independent: %s is executed by its caller, not by a worker", ErrInvalidCall, r.a.name)
	}
	r.mode = askedMode(c, r)
	if r.asked() {
		r.fingerprint = o.fingerprint
	}
	return nil
}

// resolve validates the call and finds its action and the rules that may
// govern it.
func (e *Engine) resolve(c *Call, r *callRun) error {
	if err := c.validate(); err != nil {
		return err
	}
	if err := mayNameThread(c.Identity, c.ThreadID, c.ThreadOrigin); err != nil {
		return err
	}
	e.mu.RLock()
	r.a, r.rules = e.actions[c.Action], e.rules[c.Action]
	e.mu.RUnlock()
	if r.a == nil {
		return fmt.Errorf("%w: %q", ErrActionNotFound, c.Action)
	}
	return nil
}

// findGrant lets g, the live grant lookup found (nil when none), made
// under the call's rule as it stands, approve the call. The call still gets
// a proposal (and so an operation id, an outcome, a replay record), and
// still runs preflight and prepare; the grant is checked again in the
// transaction that creates the proposal (see record), so that one revoked
// since lookup read it never approves.
func (e *Engine) findGrant(r *callRun, g *cstype.Grant) {
	if g == nil || !grantMayApprove(&r.m.rule) {
		return
	}
	r.grantID = g.ID
	r.approvedBy = &cstype.Decision{Actor: grantActor + g.ID, Via: viaGrant, Reason: "remembered approval by " + g.GrantedBy}
	if r.mode == ModeTwoPhase {
		r.mode = ModeWait // there is nothing to confirm: the caller executes now
	}
}

// askedMode is the call's mode without a grant: its own, or its rule's. A
// caller-executed action is never independent (nobody but its caller can
// execute it): under an independent rule it waits.
func askedMode(c *Call, r *callRun) Mode {
	m := c.Mode
	if m == "" {
		m = r.m.rule.Mode
	}
	if m == ModeIndependent && r.a.callerExecuted {
		return ModeWait
	}
	return m
}

// A decision taken by a remembered approval names the grant as its actor and
// comes via a channel no human decision may use (Decide refuses it).
const (
	grantActor = "grant:"
	viaGrant   = "grant"
)
