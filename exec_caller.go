package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Caller-executed actions (RawActionSpec.CallerExecuted) are run by the
// calling agent's own process, over HTTP as in process, and still at most
// once. An approved call of one claims the proposal for its caller and
// answers ResultExecute with the lease: the caller runs the change with the
// operation id as its idempotency key and settles with the lease's token
// (Settle), renewing it while it runs (Renew). The lease is fenced like a
// worker's: a settlement or renewal under a lease someone took over is a
// conflict, and writes nothing.
//
// A caller's lease that lapses is an uncertain outcome, noticed by the
// workers (ClaimBatch recovers it like any lapsed execution, see
// callerLapsed): reconciled when the action can reconcile; released for the
// caller's next identical call to claim again (same operation id, one more
// attempt) when it is idempotent; otherwise unknown. A repeated call while
// the lease is live answers ResultExecuting, never a second lease.

// callerOwner is the lease owner recorded for a caller's execution.
func callerOwner(actor string) string { return "caller:" + actor }

// callerExecutes reports whether p is an execution of a registered
// caller-executed action.
func (e *Engine) callerExecutes(p *cstype.Proposal) bool {
	a, ok := e.Action(p.Action)
	return ok && a.callerExecuted
}

// callerRetryWindow is how long a caller's released execution waits for
// the caller's next identical call before a worker settles it as unknown:
// the proposal's own lifetime (what its rule gives a decision), and at
// least a lease.
func (e *Engine) callerRetryWindow(p *cstype.Proposal) time.Duration {
	return max(p.ExpiresAt.Sub(p.CreatedAt), e.lease)
}

// handOver answers the caller that holds p, a caller-executed proposal its
// call just claimed (or recorded executing, for an allowed write): the
// checks before an execution run here, as they do before a worker executes;
// a refusal settles p under the caller's lease, and otherwise the answer is
// ResultExecute.
func (e *Engine) handOver(ctx context.Context, p *cstype.Proposal) (*Result, error) {
	a, registered := e.Action(p.Action)
	ck, err := e.checkBeforeExecute(ctx, ctx, p, a, registered)
	if err != nil {
		return nil, err
	}
	params := &store.SettleParams{Tenant: p.Tenant, ID: p.ID, Fence: cstype.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation}}
	switch {
	case ck.fail != "":
		params.Status, params.Executed, params.Error = cstype.StatusFailed, ptr(false), &ck.fail
	case ck.completed != nil:
		params.Status, params.Executed = cstype.StatusSucceeded, ptr(false)
		params.Receipt, params.Result = ck.completed.Receipt, ck.completed.Result
	default:
		return executeAnswer(p), nil
	}
	tr, err := e.settleFenced(ctx, p.Action, params)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", p.Action, err)
	}
	return resultOf(tr.Proposal), nil
}

// executeAnswer is the claim a caller's call answers with.
func executeAnswer(p *cstype.Proposal) *Result {
	l := *p.Lease
	return &Result{
		Status: ResultExecute, Proposal: p, ProposalID: p.ID, OperationID: p.OperationID,
		Input: p.Input, Lease: &l, ExpiresAt: p.ExpiresAt, Summary: p.Confirmation.Title,
	}
}

// executingAnswer answers a repeated call whose caller-executed proposal is
// executing under someone's lease.
func executingAnswer(p *cstype.Proposal) *Result {
	return &Result{
		Status: ResultExecuting, Proposal: p, ProposalID: p.ID, OperationID: p.OperationID,
		Input: p.Input, ExpiresAt: p.ExpiresAt, Summary: p.Confirmation.Title,
	}
}

// callerExecuting answers call c, which found its caller-executed proposal
// p executing: a release for the caller's next attempt is claimed (ResultExecute
// with the attempt after), anything else answers ResultExecuting.
//
//go:noinline
func (e *Engine) callerExecuting(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, error) {
	if !store.ReleasedToCaller(p) {
		return executingAnswer(p), nil
	}
	res, err := e.claimAndExecute(ctx, c, p)
	if !errors.Is(err, cstype.ErrConflict) {
		return res, err
	}
	// An identical call claimed it first.
	now, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", p.Action, err)
	}
	if now.Status == cstype.StatusExecuting {
		return executingAnswer(now), nil
	}
	return resultOf(now), nil
}

// callerLapsed routes a caller's execution whose lease lapsed, which a
// worker recovered: an uncertain outcome (docs/design.md §6). An idempotent
// action with attempts left is released for the caller's next identical
// call to claim, for callerRetryWindow; one released before whose caller
// never came back is unknown; otherwise it is reconciled if the action can
// be, else unknown.
func (x *execution) callerLapsed(lctx, ctx context.Context, a *Action) (*cstype.Proposal, error) {
	if x.p.NextAttemptAt != nil {
		return x.settle(ctx, cstype.StatusUnknown, nil, "", nil,
			fmt.Sprintf("the caller's lease lapsed and it did not claim attempt %d in time", x.p.Attempt+1))
	}
	if routeUncertain(a, x.p.Attempt, x.e.maxAttempts) == routeRetry {
		until := x.e.clock().Add(x.e.callerRetryWindow(x.p))
		return x.write(ctx, &store.SettleParams{
			Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, Status: cstype.StatusExecuting,
			ReleaseLease: true, NextAttemptAt: &until,
		})
	}
	return x.uncertain(lctx, ctx, a, errors.New("the caller's lease lapsed before it settled"))
}

// settleFenced writes a settlement of a proposal of action and announces
// it: the outcome message's text from the action's Present hook, waiters,
// OnSettled hooks.
func (e *Engine) settleFenced(ctx context.Context, action string, params *store.SettleParams) (*store.TransitionResult, error) {
	if a, ok := e.Action(action); ok && a.hooks.Present != nil && params.Status.Terminal() {
		params.Presentation = a.hooks.Present(ctx, &Outcome{ProposalID: params.ID, Status: params.Status, Executed: params.Executed, Receipt: params.Receipt, Result: params.Result, Error: params.Error})
	}
	tr, err := e.store.Settle(context.WithoutCancel(ctx), params)
	if err != nil {
		return nil, fmt.Errorf("settle proposal %s: %w", params.ID, err)
	}
	e.changed(ctx, tr.Proposal, tr.From)
	return tr, nil
}

// LeaseAnswer is the answer to a settlement or a renewal under a caller's
// lease.
type LeaseAnswer string

// The answers to Settle and Renew.
const (
	// LeaseApplied: the settlement was recorded, or the lease renewed.
	LeaseApplied LeaseAnswer = "applied"
	// LeaseConflict: the lease was lost (the fence decides) and nothing
	// was recorded.
	LeaseConflict LeaseAnswer = "conflict"
)

// Settlement is a caller's report of the caller-executed action it ran
// under the lease its call's ResultExecute gave it.
type Settlement struct {
	Identity   Identity
	ProposalID string
	LeaseToken string
	// Status is succeeded or failed (the caller ran it and it failed).
	Status  cstype.Status
	Receipt string
	Result  json.RawMessage
	Error   string
}

// SettleResult is Settle's answer and the proposal after it.
type SettleResult struct {
	Status   LeaseAnswer
	Proposal *cstype.Proposal
}

// Settle records the outcome of a caller-executed action under the caller's
// lease. Only the requester settles its lease (*ForbiddenError otherwise).
// A lease that was lost answers LeaseConflict and records nothing, unless
// the proposal already stands settled with this very outcome (a settlement
// repeated after its answer was lost): that answers LeaseApplied.
func (e *Engine) Settle(ctx context.Context, s *Settlement) (*SettleResult, error) {
	if s.Status != cstype.StatusSucceeded && s.Status != cstype.StatusFailed {
		return nil, fmt.Errorf("%w: settle to %q: want succeeded or failed", ErrInvalidCall, s.Status)
	}
	if s.LeaseToken == "" {
		return nil, fmt.Errorf("%w: a settlement needs the lease token", ErrInvalidCall)
	}
	if len(s.Result) > 0 && !json.Valid(s.Result) {
		return nil, fmt.Errorf("%w: the result is not JSON", ErrInvalidCall)
	}
	p, err := e.leaseHolder(ctx, s.Identity, s.ProposalID, "settle")
	if err != nil {
		return nil, err
	}
	if !holds(p, s.LeaseToken) {
		return e.settleRefused(p, s), nil
	}
	params := &store.SettleParams{
		Tenant: p.Tenant, ID: p.ID, Fence: cstype.Fence{Token: s.LeaseToken, Generation: p.Lease.Generation},
		Status: s.Status, Executed: ptr(true), Receipt: s.Receipt, Result: s.Result,
	}
	params.Error = settlementError(s)
	tr, err := e.settleFenced(ctx, p.Action, params)
	if errors.Is(err, cstype.ErrConflict) {
		now, gerr := e.store.GetProposal(context.WithoutCancel(ctx), &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if gerr != nil {
			return nil, fmt.Errorf("settle: %w", gerr)
		}
		return e.settleRefused(now, s), nil
	}
	if err != nil {
		return nil, fmt.Errorf("settle: %w", err)
	}
	return &SettleResult{Status: LeaseApplied, Proposal: tr.Proposal}, nil
}

// settlementError is the error text s records: its own, or for a failure
// without one, a default.
func settlementError(s *Settlement) *string {
	switch {
	case s.Error != "":
		return &s.Error
	case s.Status == cstype.StatusFailed:
		msg := "the caller reported a failure"
		return &msg
	}
	return nil
}

// settleRefused answers a settlement whose lease p no longer holds: a
// conflict, unless p stands settled with exactly the outcome s reports.
func (e *Engine) settleRefused(p *cstype.Proposal, s *Settlement) *SettleResult {
	text := func(e *string) string {
		if e == nil {
			return ""
		}
		return *e
	}
	if o := p.Outcome; o != nil && p.Status == s.Status && o.Executed != nil && *o.Executed &&
		o.Receipt == s.Receipt && text(o.Error) == text(settlementError(s)) {
		return &SettleResult{Status: LeaseApplied, Proposal: p}
	}
	return &SettleResult{Status: LeaseConflict, Proposal: p}
}

// Renewal asks to extend a caller's lease.
type Renewal struct {
	Identity   Identity
	ProposalID string
	LeaseToken string
}

// RenewResult is Renew's answer: the lease (same token, a later expiry)
// when applied, and the proposal.
type RenewResult struct {
	Status   LeaseAnswer
	Lease    *cstype.Lease
	Proposal *cstype.Proposal
}

// Renew extends a caller's lease by the engine's lease duration, from the
// store's now. Only the requester renews its lease (*ForbiddenError
// otherwise); a lease that was lost answers LeaseConflict.
func (e *Engine) Renew(ctx context.Context, r *Renewal) (*RenewResult, error) {
	if r.LeaseToken == "" {
		return nil, fmt.Errorf("%w: a renewal needs the lease token", ErrInvalidCall)
	}
	p, err := e.leaseHolder(ctx, r.Identity, r.ProposalID, "renew")
	if err != nil {
		return nil, err
	}
	if !holds(p, r.LeaseToken) {
		return &RenewResult{Status: LeaseConflict, Proposal: p}, nil
	}
	l, err := e.store.RenewLease(ctx, &store.RenewLeaseParams{
		Tenant: p.Tenant, ID: p.ID, Fence: cstype.Fence{Token: r.LeaseToken, Generation: p.Lease.Generation}, LeaseDuration: e.lease,
	})
	if errors.Is(err, cstype.ErrConflict) {
		now, gerr := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if gerr != nil {
			return nil, fmt.Errorf("renew: %w", gerr)
		}
		return &RenewResult{Status: LeaseConflict, Proposal: now}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("renew: %w", err)
	}
	p.Lease = l
	return &RenewResult{Status: LeaseApplied, Lease: l, Proposal: p}, nil
}

// leaseHolder reads the proposal a caller's settlement or renewal names, as
// id may see it, and refuses anyone but its requester.
func (e *Engine) leaseHolder(ctx context.Context, id Identity, proposalID, op string) (*cstype.Proposal, error) {
	p, err := e.Proposal(ctx, id, proposalID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if p.Requester != id.Actor {
		return nil, &ForbiddenError{ProposalID: p.ID, Actor: id.Actor, Reason: "only the requester holds or settles a caller's lease"}
	}
	return p, nil
}

// holds reports whether token is p's live execution lease, held by its
// caller (a worker's lease, reconciling, is never the caller's).
func holds(p *cstype.Proposal, token string) bool {
	return p.Status == cstype.StatusExecuting && p.Lease != nil && p.Lease.Token == token && p.Lease.Owner == callerOwner(p.Requester)
}
