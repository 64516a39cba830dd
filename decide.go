package countersign

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/store"
)

// Verdict is what a decider asks for.
type Verdict = store.Verdict

// The verdicts.
const (
	Approve = store.VerdictApproved
	Reject  = store.VerdictRejected
)

// RoleOperator may resolve reconciling and unknown proposals.
const RoleOperator = "operator"

// Decision is one approver's decision on a proposal.
type Decision struct {
	Identity   Identity
	ProposalID string
	Verdict    Verdict
	// Via is the channel: "api" (default), "web", "cli", "text", "agui", "mcp".
	Via    string
	Reason string
	// Remember asks for a grant (run or thread) with an approval, when the
	// rule allows it.
	Remember Scope
}

// DecideStatus is the answer to a decision (docs/api.md §Decisions).
type DecideStatus = store.DecideOutcome

// The decision answers. A missing proposal is an error wrapping ErrNotFound.
const (
	DecideApplied   = store.DecideApplied
	DecideUnchanged = store.DecideUnchanged
	DecideConflict  = store.DecideConflict
	DecideExpired   = store.DecideExpired
)

// DecideResult is a decision's answer and the proposal after it.
type DecideResult struct {
	Status   DecideStatus
	Proposal *store.Proposal
}

// Decide records a decision as one compare-and-set. It returns
// *ForbiddenError when the actor may not decide, an error wrapping
// ErrNotFound for a missing proposal, and otherwise applied, unchanged,
// conflict or expired.
func (e *Engine) Decide(ctx context.Context, d *Decision) (*DecideResult, error) {
	return e.decide(ctx, d, nil)
}

// decide is Decide with a last check, run once the decider is known to be
// allowed and before anything is written: when it fails, nothing is
// decided (a text decision whose message id is taken).
func (e *Engine) decide(ctx context.Context, d *Decision, before func(context.Context) error) (*DecideResult, error) {
	// Before the proposal is looked up: an agent learns nothing of it.
	if err := mayAct(d.Identity, ActDecide); err != nil {
		return nil, err
	}
	if d.Verdict != Approve && d.Verdict != Reject {
		return nil, fmt.Errorf("%w: verdict %q: want approved or rejected", ErrInvalidCall, d.Verdict)
	}
	via := d.Via
	if via == "" {
		via = "api"
	}
	if via == viaGrant {
		return nil, fmt.Errorf("%w: via %q is reserved for remembered approvals", ErrInvalidCall, via)
	}
	if d.Remember != "" && (!d.Remember.Valid() || d.Verdict != Approve) {
		return nil, fmt.Errorf("%w: remember %q: only run or thread, and only with an approval", ErrInvalidCall, d.Remember)
	}
	p, err := e.Proposal(ctx, d.Identity, d.ProposalID)
	if err != nil {
		return nil, fmt.Errorf("decide: %w", err)
	}
	if err := mayDecide(ctx, p, d.Identity, d.Verdict, via, e.canDecideHook(p)); err != nil {
		return nil, err
	}
	params := &store.DecideParams{
		Tenant: d.Identity.Tenant, ID: p.ID, Actor: d.Identity.Actor, ActorKind: string(d.Identity.KindOrHuman()),
		Verdict: d.Verdict, Via: via, Reason: d.Reason, Remember: d.Remember,
	}
	if d.Remember != "" {
		if err := mayRemember(p, d.Remember); err != nil {
			return nil, err
		}
		params.Grant = e.grantFor(p, d)
	}
	if before != nil {
		if err := before(ctx); err != nil {
			return nil, err
		}
	}
	res, err := e.store.Decide(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("decide: %w", err)
	}
	if res.From != res.To || res.Outcome == DecideApplied {
		e.changed(ctx, res.Proposal, res.From)
	}
	if res.Outcome == DecideApplied {
		e.observeDecided(d.Verdict, via)
	}
	return &DecideResult{Status: res.Outcome, Proposal: res.Proposal}, nil
}

// grantFor describes the grant an approval asks for. It goes live only when
// the proposal's execution succeeds.
func (e *Engine) grantFor(p *store.Proposal, d *Decision) *store.Grant {
	g := &store.Grant{
		ID:            "grt_" + newID(),
		Tenant:        p.Tenant,
		Requester:     p.Requester,
		Scope:         d.Remember,
		ThreadID:      p.ThreadID,
		Action:        p.Action,
		ActionVersion: p.ActionVersion,
		InputDigest:   p.InputDigest,
		GrantedBy:     d.Identity.Actor,
	}
	if d.Remember == ScopeRun {
		g.RunID = p.RunID
	}
	if p.GrantAnyInput {
		g.InputDigest = ""
	}
	if p.GrantTTL > 0 {
		t := e.clock().Add(p.GrantTTL)
		g.ExpiresAt = &t
	}
	return g
}

// Cancel withdraws a pending proposal. Only its requester may.
func (e *Engine) Cancel(ctx context.Context, id Identity, proposalID, via, reason string) (*store.Proposal, error) {
	p, err := e.Proposal(ctx, id, proposalID)
	if err != nil {
		return nil, fmt.Errorf("cancel: %w", err)
	}
	if p.Requester != id.Actor {
		return nil, &ForbiddenError{ProposalID: p.ID, Actor: id.Actor, Reason: "only the requester may cancel"}
	}
	tr, err := e.store.Cancel(ctx, &store.CancelParams{Tenant: id.Tenant, ID: p.ID, Actor: id.Actor, ActorKind: string(id.KindOrHuman()), Via: via, Reason: reason})
	if tr != nil && tr.Changed {
		e.changed(ctx, tr.Proposal, tr.From)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel: %w", err)
	}
	return tr.Proposal, nil
}

// Resolve is an operator's verdict on a reconciling or unknown proposal:
// status succeeded or failed, with a note. It needs the operator role.
func (e *Engine) Resolve(ctx context.Context, id Identity, proposalID string, status store.Status, receipt, note, via string) (*store.Proposal, error) {
	if err := requireOperator(id, proposalID, "resolving needs the operator role"); err != nil {
		return nil, err
	}
	if status != store.StatusSucceeded && status != store.StatusFailed {
		return nil, fmt.Errorf("%w: resolve to %q: want succeeded or failed", ErrInvalidCall, status)
	}
	// Another tenant's proposal is refused, as every read of it is.
	if _, err := e.proposalOfTenant(ctx, id, proposalID); err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	tr, err := e.store.Resolve(ctx, &store.ResolveParams{
		Tenant: id.Tenant, ID: proposalID, Actor: id.Actor, ActorKind: string(id.KindOrHuman()), Via: via, Status: status, Receipt: receipt, Note: note,
	})
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	// From unknown (already settled once) no hook runs again; from
	// reconciling this is the settlement.
	e.changed(ctx, tr.Proposal, tr.From)
	return tr.Proposal, nil
}
