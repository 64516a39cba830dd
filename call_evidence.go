package countersign

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Two-phase evidence: the confirmation id a two-phase call answers with,
// which the caller presents on a retry to execute the approved proposal. It
// is single-use and bound to the tenant, thread, requester, action, version
// and input digest, not to the tool call. Evidence from another thread or
// actor is inert: treated as absent, never as a hint.

// spendEvidence handles a two-phase retry that carries evidence from another
// tool call. handled is false when the evidence is inert (unknown, or bound to
// another thread or actor) or expired: then the call proposes afresh.
func (e *Engine) spendEvidence(ctx context.Context, c *Call, r *callRun) (res *Result, err error, handled bool) {
	a := r.a
	p, err := e.store.GetProposalByConfirmation(ctx, &store.GetProposalByConfirmationParams{
		Tenant: c.Identity.Tenant, ConfirmationID: c.Evidence,
	})
	if errors.Is(err, cstype.ErrNotFound) {
		return nil, nil, false
	}
	if err != nil {
		return nil, fmt.Errorf("call %s: evidence: %w", a.name, err), true
	}
	if p.ThreadID != c.ThreadID || p.Requester != c.Identity.Actor || p.Mode != ModeTwoPhase {
		return nil, nil, false
	}
	if p.Action != a.name || p.ActionVersion != a.version || p.InputDigest != r.digest {
		return nil, invalidEvidence(c, p, EvidenceMismatch), true
	}
	if store.Due(p, e.clock()) {
		if tr, err := e.store.Expire(ctx, &store.ExpireParams{Tenant: p.Tenant, ID: p.ID}); err == nil && tr.Changed {
			e.changed(ctx, tr.Proposal, tr.From)
		}
		return nil, nil, false
	}
	if evidenceDenied(p) {
		return nil, invalidEvidence(c, p, EvidenceDenied), true
	}
	switch p.Status {
	case cstype.StatusPending:
		return confirmationRequired(p), nil, true
	case cstype.StatusApproved:
		res, err := e.claimAndExecute(ctx, c, p)
		if errors.Is(err, cstype.ErrConflict) {
			return nil, invalidEvidence(c, p, EvidenceConsumed), true
		}
		return res, err, true
	case cstype.StatusExpired:
		return nil, nil, false
	default: // executing or settled
		if p.ConsumedBy == c.ToolCallID {
			res, err := e.waitSettled(ctx, c, p)
			return res, err, true
		}
		return nil, invalidEvidence(c, p, EvidenceConsumed), true
	}
}

// replayedEvidence answers a repeated tool call that presents its own
// proposal's evidence after a human said no: such evidence is denied, as it
// is when another tool call presents it, rather than answered with the
// proposal's outcome. It returns nil when the evidence has nothing to say.
func replayedEvidence(c *Call, p *cstype.Proposal) error {
	if c.Evidence == "" || c.Evidence != p.ConfirmationID || p.Mode != ModeTwoPhase || !evidenceDenied(p) {
		return nil
	}
	return invalidEvidence(c, p, EvidenceDenied)
}

// evidenceDenied reports whether p's evidence can never be spent because a
// human (or a newer call) said no to it.
func evidenceDenied(p *cstype.Proposal) bool {
	switch p.Status {
	case cstype.StatusRejected, cstype.StatusCancelled, cstype.StatusSuperseded:
		return true
	}
	return false
}

func invalidEvidence(c *Call, p *cstype.Proposal, r EvidenceReason) *EvidenceError {
	return &EvidenceError{Reason: r, ProposalID: p.ID, ConfirmationID: c.Evidence}
}
