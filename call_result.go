package countersign

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/countersign/countersign/cstype"
)

// ResultStatus is what a call came to. It mirrors docs/api.md's call statuses.
type ResultStatus string

// The call result statuses. Denials and invalid evidence are errors
// (*DeniedError, *EvidenceError), not statuses.
const (
	ResultSucceeded            ResultStatus = "succeeded"
	ResultFailed               ResultStatus = "failed"
	ResultPending              ResultStatus = "pending"
	ResultConfirmationRequired ResultStatus = "confirmation_required"
	ResultRejected             ResultStatus = "rejected"
	ResultExpired              ResultStatus = "expired"
	ResultSuperseded           ResultStatus = "superseded"
	ResultCancelled            ResultStatus = "cancelled"
	ResultUnknown              ResultStatus = "unknown"
	ResultReconciling          ResultStatus = "reconciling"
	// ResultExecute answers a call of a caller-executed action that may run
	// now: the call claimed it, and the caller holds Lease. It runs the
	// change with OperationID as its idempotency key, then settles
	// (Engine.Settle).
	ResultExecute ResultStatus = "execute"
	// ResultExecuting answers a repeated call of a caller-executed action
	// that someone holds under a live lease: no second lease is given.
	ResultExecuting ResultStatus = "executing"
)

// Result is what the calling agent gets back.
type Result struct {
	Status ResultStatus
	// Executed says whether Execute was called: nil when nobody can know.
	Executed *bool
	Receipt  string
	Result   json.RawMessage
	Error    string
	// Proposal is the call's record: nil for a read action, which leaves
	// none.
	Proposal *cstype.Proposal
	// ProposalID, ConfirmationID, Summary and ExpiresAt describe a pending
	// proposal (independent receipt, two-phase confirmation).
	ProposalID     string
	ConfirmationID string
	Summary        string
	ExpiresAt      time.Time
	// GrantID names the remembered approval that approved the call, if any.
	GrantID string
	// OperationID, Input and Lease describe a caller's execution
	// (ResultExecute; ResultExecuting has no Lease): the idempotency key, the
	// approved input, and the lease (its Token fences Engine.Settle and
	// Engine.Renew; the attempt is Proposal.Attempt).
	OperationID string
	Input       json.RawMessage
	Lease       *cstype.Lease
}

func confirmationRequired(p *cstype.Proposal) *Result {
	return &Result{
		Status: ResultConfirmationRequired, Executed: ptr(false), Proposal: p,
		ProposalID: p.ID, ConfirmationID: p.ConfirmationID, Summary: p.Confirmation.Title, ExpiresAt: p.ExpiresAt,
	}
}

func pendingReceipt(p *cstype.Proposal) *Result {
	return &Result{
		Status: ResultPending, Executed: ptr(false), Proposal: p,
		ProposalID: p.ID, Summary: p.Confirmation.Title, ExpiresAt: p.ExpiresAt,
	}
}

// resultOf turns a settled (or reconciling) proposal into the caller's answer.
func resultOf(p *cstype.Proposal) *Result {
	r := &Result{Status: ResultStatus(p.Status), Proposal: p, ProposalID: p.ID, ExpiresAt: p.ExpiresAt}
	if d := p.Decisions; len(d) > 0 && d[0].Via == viaGrant && d[0].Decision == cstype.VerdictApproved && strings.HasPrefix(d[0].Actor, grantActor) {
		r.GrantID = strings.TrimPrefix(p.Decisions[0].Actor, grantActor)
	}
	if o := p.Outcome; o != nil {
		r.Executed = o.Executed
		r.Receipt = o.Receipt
		r.Result = o.Result
		r.Summary = o.Summary
		if o.Error != nil {
			r.Error = *o.Error
		}
	}
	switch p.Status {
	case cstype.StatusUnknown, cstype.StatusReconciling:
		r.Executed = nil
	case cstype.StatusPending, cstype.StatusApproved, cstype.StatusExecuting:
		r.Status = ResultPending
	}
	return r
}

func ptr[T any](v T) *T { return &v }
