package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// executeClaimed runs a claimed proposal to its next resting state (docs/design.md
// §6) and returns it. From says what the claim took over: approved (a first
// execution), executing (a lease that lapsed: the outcome is uncertain) or
// reconciling. asked is when the claim was asked for: the lease is reckoned
// from then (see exec_lease.go). It is shared by in-process callers and the
// worker.
func (e *Engine) executeClaimed(ctx context.Context, cl *store.Claimed, asked time.Time, lease time.Duration, settler settleFunc) (*cstype.Proposal, error) {
	if e.tracer == nil {
		return e.executeClaimedIn(ctx, cl, asked, lease, settler)
	}
	ctx, span := e.startSpan(ctx, spanExecute, cl.Proposal, trace.WithAttributes(
		attrOperation.String("execute_tool"), attrAttempt.Int(cl.Proposal.Attempt),
		attribute.String("countersign.claimed_from", string(cl.From))))
	p, err := e.executeClaimedIn(ctx, cl, asked, lease, settler)
	endSpan(span, p, err)
	return p, err
}

// executeClaimedIn is executeClaimed, in its span when tracing is on.
func (e *Engine) executeClaimedIn(ctx context.Context, cl *store.Claimed, asked time.Time, lease time.Duration, settler settleFunc) (*cstype.Proposal, error) {
	p := cl.Proposal
	if settler == nil {
		settler = func(ctx context.Context, params *store.SettleParams, _ bool) (*store.TransitionResult, error) {
			return e.store.Settle(ctx, params)
		}
	}
	x := &execution{e: e, p: p, lease: lease, settler: settler, fence: cstype.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation}}
	lctx, stop := x.holdLease(ctx, asked)
	defer stop()

	a, registered := e.Action(p.Action)
	switch cl.From {
	case cstype.StatusExecuting:
		// The previous holder may or may not have executed: never guess.
		if !registered {
			return x.settle(ctx, cstype.StatusUnknown, nil, "", nil, "the action is no longer registered; the previous attempt's outcome is unknown")
		}
		if a.callerExecuted {
			return x.callerLapsed(lctx, ctx, a)
		}
		return x.uncertain(lctx, ctx, a, errors.New("the previous execution was interrupted"))
	case cstype.StatusReconciling:
		if !registered || a.hooks.Reconcile == nil {
			return x.settle(ctx, cstype.StatusUnknown, nil, "", nil, "the action can no longer be reconciled")
		}
		return x.reconcile(lctx, ctx, a)
	}
	if registered && a.callerExecuted {
		// Only its caller runs it; the engine never claims such an approval
		// for a worker (its proposals are never independent).
		return x.fail(ctx, false, "a caller-executed action is run by its caller, not by a worker")
	}
	ck, err := e.checkBeforeExecute(ctx, lctx, p, a, registered)
	switch {
	case err != nil:
		return nil, err
	case ck.fail != "":
		return x.fail(ctx, false, ck.fail)
	case ck.completed != nil:
		return x.settle(ctx, cstype.StatusSucceeded, ptr(false), ck.completed.Receipt, ck.completed.Result, "")
	}
	x.id = ck.id
	return x.run(lctx, ctx, a)
}

// settleFunc writes one settlement. held says whether the lease is still
// held by this process's reckoning: only then may the worker start other
// work before the write lands (see settleGroup.settle).
type settleFunc func(ctx context.Context, params *store.SettleParams, held bool) (*store.TransitionResult, error)

// execution is one lease holder's work on one proposal.
type execution struct {
	e     *Engine
	p     *cstype.Proposal
	id    Identity
	fence cstype.Fence
	lease time.Duration
	// settler writes settlements: the store directly, or a worker's group.
	settler settleFunc
	holder  *leaseHolder
}

// leaseLost reports whether the execution was given up because its lease
// was lost or about to lapse. Its known outcome is still settled (the fence
// decides whether it lands); nothing else may be done under the lease.
func (x *execution) leaseLost() bool { return x.holder.isLost() }

// settle records the result under the lease. It writes even when the
// caller's context has ended, and even after the lease was lost: the work is
// done and must be recorded, and the fence decides whether it lands. If
// nobody took the lease over it does; if someone did, the store answers
// ErrLeaseLost and the new holder treats the outcome as uncertain.
func (x *execution) settle(ctx context.Context, status cstype.Status, executed *bool, receipt string, result json.RawMessage, errText string) (*cstype.Proposal, error) {
	params := &store.SettleParams{
		Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, Status: status,
		Executed: executed, Receipt: receipt, Result: result,
	}
	if errText != "" {
		params.Error = &errText
	}
	return x.write(ctx, params)
}

func (x *execution) write(ctx context.Context, params *store.SettleParams) (*cstype.Proposal, error) {
	if a, ok := x.e.Action(x.p.Action); ok && a.hooks.Present != nil && params.Status.Terminal() {
		o := &Outcome{ProposalID: x.p.ID, Status: params.Status, Executed: params.Executed, Receipt: params.Receipt, Result: params.Result, Error: params.Error}
		params.Presentation = a.hooks.Present(ctx, o)
	}
	final := params.Status.Terminal() || params.ReleaseLease
	if final {
		x.holder.settlingLast()
	}
	sctx, span := x.e.startSpan(ctx, spanSettle, x.p)
	tr, err := x.settleRetrying(context.WithoutCancel(sctx), params)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("countersign.settle.status", string(params.Status)))
		var settled *cstype.Proposal
		if tr != nil {
			settled = tr.Proposal
		}
		endSpan(span, settled, err)
	}
	if err != nil {
		if final && errors.Is(err, cstype.ErrLeaseLost) {
			x.holder.lose("settlement refused", err)
		}
		return nil, fmt.Errorf("settle proposal %s: %w", x.p.ID, err)
	}
	x.p = tr.Proposal
	x.logSettled(ctx, params)
	x.e.changed(ctx, tr.Proposal, tr.From)
	return tr.Proposal, nil
}

// logSettled tells the operator of an execution that did not succeed: a
// failure at WARN, an outcome nobody knows (reconciling, unknown) at ERROR,
// each with the proposal, the action, the attempt and the reason, so that a
// failing backend is never silent.
func (x *execution) logSettled(ctx context.Context, params *store.SettleParams) {
	reason := ""
	if params.Error != nil {
		reason = *params.Error
	}
	level := slog.LevelWarn
	msg := "execution failed"
	switch params.Status {
	case cstype.StatusFailed:
	case cstype.StatusReconciling, cstype.StatusUnknown:
		level, msg = slog.LevelError, "execution outcome uncertain"
	default:
		return
	}
	x.e.log.LogAttrs(ctx, level, msg, slog.String("proposal", x.p.ID), slog.String("tenant", x.p.Tenant),
		slog.String("action", x.p.Action), slog.Int("attempt", x.p.Attempt), slog.String("status", string(params.Status)),
		slog.String("reason", reason))
}

// settleRetrying writes a settlement, retrying failures that are not
// verdicts (a dropped connection, a restarting database) for as long as the
// lease is held: the work is done, and recording it beats leaving the
// proposal to be recovered as uncertain. A retry after an attempt whose fate
// is unknown may find the settlement already written; it is then taken as
// this holder's own.
func (x *execution) settleRetrying(ctx context.Context, params *store.SettleParams) (*store.TransitionResult, error) {
	backoff := 20 * time.Millisecond
	ambiguous := false
	for {
		tr, err := x.settler(ctx, params, !x.leaseLost())
		switch {
		case err == nil:
			return tr, nil
		case errors.Is(err, cstype.ErrConflict) && ambiguous:
			p, gerr := x.e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: x.p.Tenant, ID: x.p.ID})
			if gerr == nil && p.Status == params.Status && p.Outcome != nil && p.Outcome.Receipt == params.Receipt {
				return &store.TransitionResult{Proposal: p, From: x.p.Status, Changed: true}, nil
			}
			return nil, err
		case errors.Is(err, cstype.ErrConflict), errors.Is(err, cstype.ErrInvalidParams), errors.Is(err, cstype.ErrNotFound):
			return nil, err
		case x.leaseLost():
			return nil, errors.Join(cstype.ErrLeaseLost, err)
		}
		ambiguous = true
		x.e.log.Warn("settlement failed; retrying while the lease lasts", "proposal", x.p.ID, "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

func (x *execution) fail(ctx context.Context, executed bool, reason string) (*cstype.Proposal, error) {
	return x.settle(ctx, cstype.StatusFailed, ptr(executed), "", nil, reason)
}

// run executes, retrying an idempotent action with the same operation id
// while the outcome stays uncertain.
func (x *execution) run(lctx, ctx context.Context, a *Action) (*cstype.Proposal, error) {
	if !x.holder.held() {
		// Nothing was executed: the proposal stays as the claim left it,
		// for the lease's next holder.
		return nil, fmt.Errorf("execute proposal %s: not begun: %w", x.p.ID, cstype.ErrLeaseLost)
	}
	began := time.Now()
	rec, err := a.hooks.Execute(lctx, &ExecuteRequest{
		Identity: x.id, Action: a.name, ActionVersion: x.p.ActionVersion, Input: x.p.Input, OperationID: x.p.OperationID,
		StateVersion: x.p.StateVersion, ProposalID: x.p.ID, Attempt: x.p.Attempt,
	})
	if x.e.observer != nil {
		x.e.observer.Executed(a.name, time.Since(began), err)
	}
	var ne *notExecuted
	switch {
	case err == nil:
		if rec == nil {
			rec = &Receipt{}
		}
		return x.settle(ctx, cstype.StatusSucceeded, ptr(true), rec.ID, rec.Result, "")
	case errors.As(err, &ne):
		return x.fail(ctx, false, ne.Error())
	case errors.Is(err, ErrNotApplied):
		return x.fail(ctx, true, err.Error())
	}
	return x.uncertain(lctx, ctx, a, err)
}
