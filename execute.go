package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/google/uuid"
)

// newID returns a time-ordered random id (UUIDv7, hex).
func newID() string {
	u, err := uuid.NewV7()
	if err != nil {
		u = uuid.New()
	}
	return strings.ReplaceAll(u.String(), "-", "")
}

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

// claimAndExecute claims an approved proposal for this caller and executes it.
// A caller-executed action is claimed for the caller, which runs it: the
// answer is the claim (see handOver).
func (e *Engine) claimAndExecute(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, error) {
	asked := time.Now()
	byCaller := e.callerExecutes(p)
	owner := e.owner
	if byCaller {
		owner = callerOwner(p.Requester)
	}
	claimed, err := e.store.Claim(ctx, &store.ClaimParams{
		Tenant: p.Tenant, ID: p.ID, Owner: owner, LeaseDuration: e.lease, ConsumedBy: c.ToolCallID,
	})
	if err != nil {
		// A claim that finds the approval lapsed expires it and hands back
		// the expired proposal, so this process settles it exactly once, and
		// the caller is told it expired.
		if claimed != nil && claimed.Status == cstype.StatusExpired {
			e.changed(ctx, claimed, cstype.StatusApproved)
			return resultOf(claimed), nil
		}
		return nil, err
	}
	e.changed(ctx, claimed, p.Status)
	if byCaller {
		return e.handOver(ctx, claimed)
	}
	return e.executeHeld(ctx, claimed, asked)
}

// executeHeld executes, for its caller, an approved proposal this process
// holds under the lease that a claim (or an allowed write's record) asked
// for at asked took, and answers the caller.
func (e *Engine) executeHeld(ctx context.Context, p *cstype.Proposal, asked time.Time) (*Result, error) {
	settled, err := e.executeClaimed(ctx, &store.Claimed{Proposal: p, From: cstype.StatusApproved}, asked, e.lease, nil)
	if errors.Is(err, cstype.ErrLeaseLost) {
		// The execution was given up with its lease: whoever claims the
		// proposal next settles it (or already did). The caller is told
		// where it stands, as any waiter would be, and a repeat of the call
		// later answers the outcome.
		now, gerr := e.store.GetProposal(context.WithoutCancel(ctx), &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if gerr != nil {
			return nil, fmt.Errorf("%w (and reading proposal %s: %w)", err, p.ID, gerr)
		}
		return resultOf(now), nil
	}
	if err != nil {
		return nil, err
	}
	return resultOf(settled), nil
}

// executeClaimed runs a claimed proposal to its next resting state (docs/design.md
// §6) and returns it. From says what the claim took over: approved (a first
// execution), executing (a lease that lapsed: the outcome is uncertain) or
// reconciling. asked is when the claim was asked for: the lease is reckoned
// from then (see lease.go). It is shared by in-process callers and the
// worker.
func (e *Engine) executeClaimed(ctx context.Context, cl *store.Claimed, asked time.Time, lease time.Duration, settler settleFunc) (*cstype.Proposal, error) {
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
	tr, err := x.settleRetrying(context.WithoutCancel(ctx), params)
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

// uncertain routes an outcome nobody knows (see routeUncertain): reconcile
// if the action can, retry with the same operation id if it is idempotent,
// else unknown. Nothing here re-issues a non-idempotent write. Without the
// lease it does nothing: the proposal stays as it is, and whoever claims it
// next routes the uncertain outcome.
func (x *execution) uncertain(lctx, ctx context.Context, a *Action, cause error) (*cstype.Proposal, error) {
	if x.leaseLost() {
		return nil, fmt.Errorf("proposal %s: outcome uncertain (%v): %w", x.p.ID, cause, cstype.ErrLeaseLost)
	}
	switch routeUncertain(a, x.p.Attempt, x.e.maxAttempts) {
	case routeReconcile:
		msg := "outcome uncertain: " + cause.Error()
		if _, err := x.write(ctx, &store.SettleParams{
			Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, Status: cstype.StatusReconciling, Error: &msg,
		}); err != nil {
			return nil, err
		}
		return x.reconcile(lctx, ctx, a)
	case routeRetry:
		select {
		case <-lctx.Done():
			if x.leaseLost() {
				return nil, fmt.Errorf("retry proposal %s: %w", x.p.ID, cstype.ErrLeaseLost)
			}
			// The caller stopped waiting; the proposal stays executing and
			// its lease lapses, so a worker recovers it.
			return nil, fmt.Errorf("retry proposal %s: %w", x.p.ID, lctx.Err())
		case <-time.After(x.e.retryPause(x.p.Attempt)):
		}
		p, err := x.beginRetry(ctx)
		if err != nil {
			return nil, fmt.Errorf("retry proposal %s: %w", x.p.ID, err)
		}
		x.e.observeRetried(a.name)
		x.p = p
		if x.id.Tenant == "" {
			x.id = requesterIdentity(p)
		}
		return x.run(lctx, ctx, a)
	}
	detail := cause.Error()
	if a.idempotent {
		detail = fmt.Sprintf("%s (after %d attempts)", detail, x.p.Attempt)
	}
	return x.settle(ctx, cstype.StatusUnknown, nil, "", nil, detail)
}

// beginRetry starts the next attempt under the lease. It renews the lease
// too, so it is asked with a renewal's deadline and confirms the lease when
// it succeeds.
func (x *execution) beginRetry(ctx context.Context) (*cstype.Proposal, error) {
	deadline, ok := x.holder.deadline()
	if !ok {
		return nil, cstype.ErrLeaseLost
	}
	asked := time.Now()
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	p, err := x.e.store.BeginRetry(rctx, &store.BeginRetryParams{
		Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, LeaseDuration: x.lease,
	})
	if err != nil {
		return nil, err
	}
	x.holder.confirmed(asked)
	return p, nil
}

// reconcile asks the backend what became of the operation. An unknown answer
// leaves the proposal reconciling, with the lease released until the next
// attempt is due.
func (x *execution) reconcile(lctx, ctx context.Context, a *Action) (*cstype.Proposal, error) {
	if !x.holder.held() {
		return nil, fmt.Errorf("reconcile proposal %s: not begun: %w", x.p.ID, cstype.ErrLeaseLost)
	}
	r, err := a.hooks.Reconcile(lctx, &ReconcileRequest{
		Identity: requesterIdentity(x.p),
		Action:   a.name, OperationID: x.p.OperationID, ProposalID: x.p.ID,
	})
	x.e.observeReconciled(a.name, r, err)
	if err == nil {
		// A definite answer is known even if the lease was lost meanwhile:
		// it is settled, and the fence decides.
		switch r.Status {
		case ReconcileApplied:
			return x.settle(ctx, cstype.StatusSucceeded, ptr(true), r.Receipt, r.Result, "")
		case ReconcileNotApplied:
			return x.fail(ctx, true, "reconciled: the operation was not applied")
		}
	}
	if x.leaseLost() {
		return nil, fmt.Errorf("reconcile proposal %s: %w", x.p.ID, cstype.ErrLeaseLost)
	}
	msg := "reconcile: the backend does not know yet whether the operation was applied"
	if err != nil {
		msg = "reconcile failed: " + err.Error()
	}
	// The pause doubles with every unknown answer, up to 2^10 times the first.
	n := 1
	if x.p.Outcome != nil && x.p.Status == cstype.StatusReconciling {
		n = x.p.Outcome.Reconciles + 1
	}
	next := x.e.clock().Add(x.e.reconcileBack << min(n-1, 10))
	return x.write(ctx, &store.SettleParams{
		Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, Status: cstype.StatusReconciling,
		Error: &msg, ReleaseLease: true, NextAttemptAt: &next, Reconciles: n,
	})
}

// uncertainRoute is what becomes of an execution whose outcome nobody knows:
// an error after the call began, a timeout, a cancellation, a crash, a lost
// lease.
type uncertainRoute int

const (
	// routeReconcile asks the backend, by operation id, what happened.
	routeReconcile uncertainRoute = iota + 1
	// routeRetry executes again with the same operation id (at least once).
	routeRetry
	// routeUnknown gives up: it may or may not have been applied, and
	// nothing re-issues the write.
	routeUnknown
)

// routeUncertain is the one rule for an uncertain outcome, on every
// execution path: an action that can reconcile reconciles; an idempotent
// one is executed again with the same operation id until it has been
// attempted maxAttempts times; anything else is unknown. attempts counts the
// executions already begun.
func routeUncertain(a *Action, attempts, maxAttempts int) uncertainRoute {
	switch {
	case a.hooks.Reconcile != nil:
		return routeReconcile
	case a.idempotent && attempts < maxAttempts:
		return routeRetry
	}
	return routeUnknown
}

// retryPause is the pause before the attempt after attempt: it doubles with
// every attempt, up to 2^10 times the first.
func (e *Engine) retryPause(attempt int) time.Duration {
	return e.retryBackoff << min(max(attempt-1, 0), 10)
}

// executeDirect runs an allowed call that is not recorded (a read): no
// proposal, nothing settles. Authorization already ran; preflight and
// prepare still run. An uncertain outcome is routed as on every path (see
// routeUncertain); with nothing stored, a reconciliation that cannot tell
// answers unknown at once.
func (e *Engine) executeDirect(ctx context.Context, c *Call, a *Action, input json.RawMessage) (*Result, error) {
	var stateVersion string
	if _, done, err := e.preflight(ctx, c.Identity, a, input); err != nil || done != nil {
		return done, err
	}
	if a.hooks.Prepare != nil {
		prep, err := a.hooks.Prepare(ctx, &PrepareRequest{Identity: c.Identity, Action: a.name, Input: input})
		if err != nil {
			return nil, prepareErr(a, err)
		}
		stateVersion = prep.StateVersion
	}
	req := &ExecuteRequest{Identity: c.Identity, Action: a.name, ActionVersion: a.version, Input: input, OperationID: "op_" + newID(), StateVersion: stateVersion}
	succeeded := func(receipt string, result json.RawMessage) (*Result, error) {
		return &Result{Status: ResultSucceeded, Executed: ptr(true), Receipt: receipt, Result: result,
			Summary: store.DefaultSummary(a.name, cstype.StatusSucceeded, receiptDetail(receipt))}, nil
	}
	failed := func(executed bool, reason string) (*Result, error) {
		return &Result{Status: ResultFailed, Executed: ptr(executed), Error: reason,
			Summary: store.DefaultSummary(a.name, cstype.StatusFailed, reason)}, nil
	}
	for req.Attempt = 1; ; req.Attempt++ {
		began := time.Now()
		rec, err := a.hooks.Execute(ctx, req)
		if e.observer != nil {
			e.observer.Executed(a.name, time.Since(began), err)
		}
		var ne *notExecuted
		switch {
		case err == nil:
			if rec == nil {
				rec = &Receipt{}
			}
			return succeeded(rec.ID, rec.Result)
		case errors.As(err, &ne):
			return failed(false, ne.Error())
		case errors.Is(err, ErrNotApplied):
			return failed(true, err.Error())
		}
		switch routeUncertain(a, req.Attempt, e.maxAttempts) {
		case routeRetry:
			if ctx.Err() == nil {
				select {
				case <-ctx.Done():
				case <-time.After(e.retryPause(req.Attempt)):
				}
			}
			if ctx.Err() == nil {
				e.observeRetried(a.name)
				continue
			}
			// The caller is gone: nobody waits for another attempt.
		case routeReconcile:
			r, rerr := a.hooks.Reconcile(context.WithoutCancel(ctx), &ReconcileRequest{Identity: c.Identity, Action: a.name, OperationID: req.OperationID})
			e.observeReconciled(a.name, r, rerr)
			switch {
			case rerr != nil:
			case r.Status == ReconcileApplied:
				return succeeded(r.Receipt, r.Result)
			case r.Status == ReconcileNotApplied:
				return failed(true, "reconciled: the operation was not applied")
			}
		}
		return &Result{Status: ResultUnknown, Error: err.Error(), Summary: store.DefaultSummary(a.name, cstype.StatusUnknown, "")}, nil
	}
}

func receiptDetail(id string) string {
	if id == "" {
		return ""
	}
	return "Receipt: " + id + "."
}
