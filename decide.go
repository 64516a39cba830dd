package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Verdict is what a decider asks for.
type Verdict = cstype.Verdict

// The verdicts.
const (
	Approve = cstype.VerdictApproved
	Reject  = cstype.VerdictRejected
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
	// Assertion is a passkey assertion (PublicKeyCredential.toJSON() of
	// navigator.credentials.get's answer to StepUpChallenge's options): an
	// approval of a step-up proposal needs one of its own (stepup.go).
	Assertion json.RawMessage
}

// DecideStatus is the answer to a decision (docs/api.md §Decisions).
type DecideStatus = cstype.DecideOutcome

// The decision answers. A missing proposal is an error wrapping ErrNotFound.
const (
	DecideApplied   = cstype.DecideApplied
	DecideUnchanged = cstype.DecideUnchanged
	DecideConflict  = cstype.DecideConflict
	DecideExpired   = cstype.DecideExpired
)

// DecideResult is a decision's answer and the proposal after it.
type DecideResult struct {
	Status   DecideStatus
	Proposal *cstype.Proposal
	// AwaitingCaller is true when the proposal stands approved and only its
	// agent's next call runs it, before its ExpiresAt: no call waits for it
	// and no run is parked on it (see store.AwaitsCaller). When the deadline
	// passes first it ends expired, not_collected.
	AwaitingCaller bool
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
	// The row the store remembers, if any, spares the decision a read: it
	// is judged on that copy and applied to that version alone. A refusal,
	// or a row that moved since, is judged again on the row as stored.
	if p := e.rememberedForDecision(d, before); p != nil {
		res, err := e.decideOn(ctx, d, p, via, before, p.Version)
		if !errors.Is(err, errJudgeAgain) {
			return res, err
		}
	}
	p, err := e.Proposal(ctx, d.Identity, d.ProposalID)
	if err != nil {
		return nil, fmt.Errorf("decide: %w", err)
	}
	return e.decideOn(ctx, d, p, via, before, 0)
}

// errJudgeAgain says that a decision judged on a remembered row is to be
// judged again on the row as stored: the remembered one refused it, or had
// moved on by the time the decision was written. Nothing was written.
var errJudgeAgain = errors.New("judge the decision again on the row as stored")

// rememberedForDecision is the store's remembered copy of the proposal d
// decides (store.Rememberer), or nil: none is remembered, or the decision
// has a step of its own to take before it is written (a text decision's
// check, a passkey assertion to spend), which must not run twice.
func (e *Engine) rememberedForDecision(d *Decision, before func(context.Context) error) *cstype.Proposal {
	r, ok := store.As[store.Rememberer](e.store)
	if !ok || before != nil || !validID(d.ProposalID) {
		return nil
	}
	p, ok := r.RememberedProposal(d.Identity.Tenant, d.ProposalID)
	if !ok || p.StepUp != "" {
		return nil
	}
	return p
}

// decideOn decides p, read or remembered: judged is its version when it
// is the store's remembered copy (0 when it was read), and then every
// refusal is errJudgeAgain.
func (e *Engine) decideOn(ctx context.Context, d *Decision, p *cstype.Proposal, via string, before func(context.Context) error, judged int64) (*DecideResult, error) {
	if judged != 0 && !canSee(d.Identity, p) {
		return nil, errJudgeAgain
	}
	if err := mayDecide(ctx, p, d.Identity, d.Verdict, via, e.canDecideHook(p)); err != nil {
		if judged != 0 {
			return nil, errJudgeAgain
		}
		return nil, err
	}
	ctx, span := e.startSpan(ctx, spanDecide, p)
	res, err := e.decideAllowed(ctx, d, p, via, before, judged)
	if judged != 0 && errors.Is(err, store.ErrVersionMoved) {
		// Nothing was written: the span ends as a try that gave way to the
		// decision on the row as stored, with a span of its own.
		span.End()
		return nil, errJudgeAgain
	}
	if span.IsRecording() {
		span.SetAttributes(attrVerdict.String(string(d.Verdict)), attrVia.String(via))
		if res != nil {
			span.SetAttributes(attrOutcome.String(string(res.Status)))
			p = res.Proposal
		}
		endSpan(span, p, err)
	}
	return res, err
}

// decideAllowed is decide once the decider is known to be allowed to
// decide p. A judged version other than 0 asks the store to apply the
// decision to that version of p alone (store.DecideParams.Version).
func (e *Engine) decideAllowed(ctx context.Context, d *Decision, p *cstype.Proposal, via string, before func(context.Context) error, judged int64) (*DecideResult, error) {
	var err error
	params := &store.DecideParams{
		Tenant: d.Identity.Tenant, ID: p.ID, Actor: d.Identity.Actor, ActorKind: string(d.Identity.KindOrHuman()),
		Verdict: d.Verdict, Via: via, Reason: d.Reason, Remember: d.Remember, Version: judged,
	}
	if d.Remember != "" {
		if err := mayRemember(p, d.Remember); err != nil {
			return nil, err
		}
		params.Grant = e.grantFor(p, d)
	}
	if d.Verdict == Approve {
		if params.AwaitsCaller, err = e.awaitsCaller(ctx, p); err != nil {
			return nil, fmt.Errorf("decide: %w", err)
		}
	}
	if before != nil {
		if err := before(ctx); err != nil {
			return nil, err
		}
	}
	// Last, since it spends the assertion: a refusal above leaves it to be
	// used again.
	if needsStepUp(p, d.Verdict) {
		if err := e.checkStepUp(ctx, p, d); err != nil {
			return nil, err
		}
		params.StepUp = p.StepUp
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
	return &DecideResult{Status: res.Outcome, Proposal: res.Proposal, AwaitingCaller: store.AwaitsCaller(res.Proposal)}, nil
}

// awaitsCaller reports whether an approval of p, made now, would wait for
// its agent to call again: no server-side process would execute it. A
// two_phase approval always does (the agent must present the confirmation);
// a wait-mode one unless a call waits on it in this process, or it is the
// call of a built-in agent run (the run is parked on it, or going on, and
// the runtime makes the call again). Independent approvals are the workers'.
//
// A wait-mode call waiting in another process is not seen: its approval is
// marked as awaiting the caller although that call executes it at once.
// The mark only decides how a lapse is worded, and such an approval does
// not lapse unless that process stops.
func (e *Engine) awaitsCaller(ctx context.Context, p *cstype.Proposal) (bool, error) {
	switch {
	case p.Mode == ModeTwoPhase:
		return true, nil
	case p.Mode != ModeWait || e.callWaiting(p):
		return false, nil
	case p.RunID == "":
		return true, nil
	}
	r, err := e.store.GetRun(ctx, &store.GetRunParams{Tenant: p.Tenant, ID: p.RunID})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return true, nil // a caller's own run id, not a built-in run
	case err != nil:
		return false, fmt.Errorf("read run %s: %w", p.RunID, err)
	}
	return r.ThreadID != p.ThreadID, nil
}

// grantFor describes the grant an approval asks for. It goes live only when
// the proposal's execution succeeds.
func (e *Engine) grantFor(p *cstype.Proposal, d *Decision) *cstype.Grant {
	g := &cstype.Grant{
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

// Cancel withdraws a pending proposal. Only its requester may (mayCancel);
// the answer is applied, or unchanged when the proposal was cancelled
// already. A proposal past pending otherwise is an error wrapping
// cstype.ErrConflict, and one the caller may not see a *ForbiddenError.
func (e *Engine) Cancel(ctx context.Context, id Identity, proposalID, via, reason string) (*DecideResult, error) {
	p, err := e.Proposal(ctx, id, proposalID)
	if err != nil {
		return nil, fmt.Errorf("cancel: %w", err)
	}
	if err := mayCancel(id, p); err != nil {
		return nil, err
	}
	tr, err := e.store.Cancel(ctx, &store.CancelParams{Tenant: id.Tenant, ID: p.ID, Actor: id.Actor, ActorKind: string(id.KindOrHuman()), Via: via, Reason: reason})
	if tr != nil && tr.Changed {
		e.changed(ctx, tr.Proposal, tr.From)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel: %w", err)
	}
	return &DecideResult{Status: cancelStatus(tr), Proposal: tr.Proposal}, nil
}

// Resolve is an operator's verdict on a reconciling or unknown proposal:
// status succeeded or failed, with a note. It needs the operator role.
func (e *Engine) Resolve(ctx context.Context, id Identity, proposalID string, status cstype.Status, receipt, note, via string) (*cstype.Proposal, error) {
	if err := requireOperator(id, proposalID, "resolving needs the operator role"); err != nil {
		return nil, err
	}
	if status != cstype.StatusSucceeded && status != cstype.StatusFailed {
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
