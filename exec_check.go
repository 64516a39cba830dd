package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/cstype"
)

// authorize runs the action's Authorize hook.
func (e *Engine) authorize(ctx context.Context, a *Action, id Identity, phase Phase, input json.RawMessage, proposalID string) error {
	if a.hooks.Authorize == nil {
		return nil
	}
	if err := a.hooks.Authorize(ctx, &AuthorizeRequest{Identity: id, Phase: phase, Action: a.name, Input: input, ProposalID: proposalID}); err != nil {
		var d *DeniedError
		if errors.As(err, &d) {
			return d
		}
		return &DeniedError{Code: DeniedByAuthorize, Action: a.name, Reason: err.Error()}
	}
	return nil
}

// checked is what the checks before an execution found: the identity the
// action runs as; or why it fails without executing; or, from a preflight
// that found the change made already, that change.
type checked struct {
	id        Identity
	fail      string
	completed *Preflight
}

// checkBeforeExecute re-checks an approved proposal p of action a (nil when
// not registered) before it executes, whoever executes it (docs/design.md §6):
// the requester still resolves, the action is registered at the approved
// version, authorization, the stored input still parses to the approved
// snapshot, and preflight. ctx bounds the resolver, lctx the hooks. An
// error is no verdict (a resolver outage): nothing may execute, and the
// lease is left to lapse.
func (e *Engine) checkBeforeExecute(ctx, lctx context.Context, p *cstype.Proposal, a *Action, registered bool) (*checked, error) {
	id := requesterIdentity(p)
	if e.resolver != nil {
		got, err := e.resolver.ResolveActor(ctx, p.Tenant, p.Requester)
		switch {
		case errors.Is(err, cstype.ErrNotFound):
			return &checked{fail: "the requester no longer exists"}, nil
		case err != nil:
			// A resolver outage is not a verdict: leave the lease to lapse
			// and the proposal to be retried.
			return nil, fmt.Errorf("resolve requester of %s: %w", p.ID, err)
		case got.Tenant != p.Tenant:
			return &checked{fail: "the requester no longer belongs to the tenant"}, nil
		}
		id = *got
	}
	if !registered || a.version != p.ActionVersion {
		return &checked{id: id, fail: fmt.Sprintf("%s: action %s version %s is no longer registered; a new version needs a new proposal", CodeActionVersionChanged, p.Action, p.ActionVersion)}, nil
	}
	if err := e.authorize(lctx, a, id, PhaseExecute, p.Input, p.ID); err != nil {
		var d *DeniedError
		errors.As(err, &d)
		return &checked{id: id, fail: "authorization refused: " + d.Reason}, nil
	}
	// Drift: the original input, re-parsed by today's schema, must still be
	// exactly what was approved.
	if _, digest, err := a.prepareInput(p.RawInput); err != nil || digest != p.InputDigest {
		reason := "the input no longer parses to the approved snapshot"
		if err != nil {
			reason += ": " + err.Error()
		}
		return &checked{id: id, fail: reason}, nil
	}
	if a.hooks.Preflight != nil {
		pf, err := a.hooks.Preflight(lctx, &PreflightRequest{Identity: id, Phase: PhaseExecute, Action: a.name, Input: p.Input, ProposalID: p.ID, StateVersion: p.StateVersion})
		switch {
		case err != nil:
			return &checked{id: id, fail: "preflight failed: " + err.Error()}, nil
		case pf.Verdict == PreflightDenied:
			return &checked{id: id, fail: "preflight denied: " + pf.Reason}, nil
		case pf.Verdict == PreflightCompleted:
			return &checked{id: id, completed: pf}, nil
		}
	}
	return &checked{id: id}, nil
}
