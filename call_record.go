package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// preflightCall runs the Preflight hook and fills in the confirmation copy.
// A completed call is answered with its result; a denied one is refused.
func (e *Engine) preflightCall(ctx context.Context, c *Call, r *callRun) (*Result, error) {
	r.conf = Confirmation{Title: fill(r.a.confirmation.Title, r.input), Verb: r.a.confirmation.Verb}
	override, done, err := e.preflight(ctx, c.Identity, r.a, r.input)
	switch {
	case err != nil || done != nil:
		return done, err
	case override != nil:
		r.conf = *override
	}
	if r.conf.Title == "" {
		r.conf.Title = r.a.name + " " + string(r.input)
	}
	return nil, nil
}

// preflight runs the action's Preflight hook in phase prepare. A ready call
// may get a confirmation override; a completed one gets its result; a denied
// one is a *DeniedError.
func (e *Engine) preflight(ctx context.Context, id Identity, a *Action, input json.RawMessage) (*Confirmation, *Result, error) {
	if a.hooks.Preflight == nil {
		return nil, nil, nil
	}
	pf, err := a.hooks.Preflight(ctx, &PreflightRequest{Identity: id, Phase: PhasePrepare, Action: a.name, Input: input})
	if err != nil {
		return nil, nil, fmt.Errorf("call %s: preflight: %w", a.name, err)
	}
	switch pf.Verdict {
	case PreflightDenied:
		return nil, nil, &DeniedError{Code: DeniedByPreflight, Action: a.name, Reason: pf.Reason}
	case PreflightCompleted:
		return nil, &Result{Status: ResultSucceeded, Executed: ptr(false), Receipt: pf.Receipt, Result: pf.Result,
			Summary: store.DefaultSummary(a.name, cstype.StatusSucceeded, "It was already done.")}, nil
	case PreflightReady:
		return pf.Confirmation, nil, nil
	}
	return nil, nil, fmt.Errorf("call %s: preflight verdict %q: want ready, denied or completed", a.name, pf.Verdict)
}

// prepare runs the action's Prepare hook: the preview of the exact change
// and the state version it depends on.
func (e *Engine) prepare(ctx context.Context, c *Call, r *callRun) error {
	r.prep = &Prepared{Preview: r.conf.Title}
	if r.a.hooks.Prepare == nil {
		return nil
	}
	prep, err := r.a.hooks.Prepare(ctx, &PrepareRequest{Identity: c.Identity, Action: r.a.name, Input: r.input})
	if err != nil {
		return prepareErr(r.a, err)
	}
	r.prep = prep
	return nil
}

// prepareErr passes a Prepare hook's denial through as it is (a webhook
// backend answering 403/409/422 denies the call) and wraps anything else.
func prepareErr(a *Action, err error) error {
	var d *DeniedError
	if errors.As(err, &d) {
		return d
	}
	return fmt.Errorf("call %s: prepare: %w", a.name, err)
}

// confirmationIDFor returns a new proposal's confirmation id in mode: a
// fresh one in two-phase mode, none in the others. Only a two-phase caller
// spends one (its evidence: call_evidence.go, resume), and a proposal
// without one stays out of the confirmation's unique index, which the
// store then need not write (docs/profiles/scale.md, change 17).
func confirmationIDFor(m Mode) string {
	if m != ModeTwoPhase {
		return ""
	}
	return "cnf_" + newID()
}

// record stores the call's proposal in one transaction, creating the thread
// if needed: a pending proposal; one approved by the grant findGrant found,
// if the grant still approves it in that transaction (else the call asks
// after all, as if no grant existed, so that a revocation already answered
// is never outrun); or, for a write the policy allows, a record already
// executing under this process' lease. created is false when a concurrent
// identical call stored it first: p is then that call's.
func (e *Engine) record(ctx context.Context, c *Call, r *callRun) (p *cstype.Proposal, created bool, err error) {
	a := r.a
	key, err := a.replacementKeyFor(r.input)
	if err != nil {
		return nil, false, fmt.Errorf("call %s: replacement key: %w", a.name, err)
	}
	now := e.clock()
	rule, confirmationID := &r.m.rule, confirmationIDFor(r.mode)
	var allowed *store.AllowedExecution
	if !r.asked() {
		// Nobody decides an allowed write, and its caller executes it now.
		rule, confirmationID = &Rule{TTL: r.m.rule.TTL, Approvers: []string{}}, ""
		r.mode = ModeWait
		allowed = &store.AllowedExecution{Owner: e.owner, LeaseDuration: e.lease}
		if a.callerExecuted {
			allowed.Owner = callerOwner(c.Identity.Actor)
		}
	}
	p = &cstype.Proposal{
		ID:                 "prp_" + newID(),
		Tenant:             c.Identity.Tenant,
		Requester:          c.Identity.Actor,
		RequesterRoles:     c.Identity.Roles,
		RequesterKind:      string(c.Identity.KindOrHuman()),
		ThreadID:           c.ThreadID,
		RunID:              c.RunID,
		ToolCallID:         c.ToolCallID,
		Action:             a.name,
		ActionVersion:      a.version,
		Input:              r.input,
		RawInput:           c.Input,
		InputDigest:        r.digest,
		Preview:            r.prep.Preview,
		StateVersion:       r.prep.StateVersion,
		Confirmation:       r.conf,
		ConfirmationID:     confirmationID,
		Mode:               r.mode,
		Approvers:          rule.Approvers,
		Quorum:             rule.Quorum,
		ForbidSelfApproval: rule.ForbidSelfApproval,
		Channels:           rule.Channels,
		Notify:             rule.Notify,
		StepUp:             rule.StepUp,
		RememberScopes:     rule.Remember,
		GrantAnyInput:      rule.GrantAnyInput,
		GrantTTL:           rule.GrantTTL,
		ReplacementKey:     key,
		ExpiresAt:          now.Add(rule.TTL),
		OperationID:        "op_" + newID(),
		RuleFingerprint:    r.fingerprint,
		TraceParent:        e.traceParentOf(ctx),
	}
	if r.m.matched {
		p.RuleMatch, p.RuleWhen = r.m.rule.Match, r.m.rule.whenText()
	}
	if rule.EscalateAfter > 0 {
		at := now.Add(rule.EscalateAfter)
		p.EscalateAt, p.EscalateTo = &at, slices.Clone(rule.EscalateTo)
	}
	if rule.RemindEvery > 0 {
		at := now.Add(rule.RemindEvery)
		p.RemindAt, p.RemindEvery = &at, rule.RemindEvery
	}
	params := &store.CreateProposalParams{Proposal: p, ApprovedBy: r.approvedBy, GrantID: r.grantID, Allowed: allowed}
	r.leaseAsked = time.Now()
	cr, err := e.store.CreateProposal(ctx, params)
	if errors.Is(err, cstype.ErrGrantNotLive) {
		// Revoked (or expired, or its rule changed) since lookup read it.
		r.approvedBy, r.grantID, r.mode = nil, "", askedMode(c, r)
		params.ApprovedBy, params.GrantID, p.Mode = nil, "", r.mode
		p.ConfirmationID = confirmationIDFor(r.mode)
		cr, err = e.store.CreateProposal(ctx, params)
	}
	switch {
	case errors.Is(err, cstype.ErrNotThreadOwner):
		// Another actor's call created the thread since lookup read it.
		return nil, false, notOwner(c)
	case err != nil:
		return nil, false, fmt.Errorf("call %s: create proposal: %w", a.name, err)
	}
	for _, s := range cr.Superseded {
		e.changed(ctx, s, cstype.StatusPending)
	}
	if !cr.Created {
		if cr.Proposal.Requester != c.Identity.Actor {
			return nil, false, notOwner(c)
		}
		if err := notReused(c, cr.Proposal); err != nil {
			return nil, false, err
		}
		return cr.Proposal, false, nil
	}
	e.changed(ctx, cr.Proposal, "")
	return cr.Proposal, true, nil
}
