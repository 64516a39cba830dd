package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

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
func (e *Engine) claimAndExecute(ctx context.Context, c *Call, p *store.Proposal) (*Result, error) {
	claimed, err := e.store.Claim(ctx, &store.ClaimParams{
		Tenant: p.Tenant, ID: p.ID, Owner: e.owner, LeaseDuration: e.lease, ConsumedBy: c.ToolCallID,
	})
	if err != nil {
		// A claim that finds the approval lapsed expires it and hands back
		// the expired proposal, so this process settles it exactly once, and
		// the caller is told it expired.
		if claimed != nil && claimed.Status == store.StatusExpired {
			e.changed(ctx, claimed, store.StatusApproved)
			return resultOf(claimed), nil
		}
		return nil, err
	}
	e.changed(ctx, claimed, store.StatusApproved)
	settled, err := e.executeClaimed(ctx, &store.Claimed{Proposal: claimed, From: store.StatusApproved}, e.lease, nil)
	if err != nil {
		return nil, err
	}
	return resultOf(settled), nil
}

// executeClaimed runs a claimed proposal to its next resting state (DESIGN.md
// §6) and returns it. From says what the claim took over: approved (a first
// execution), executing (a lease that lapsed: the outcome is uncertain) or
// reconciling. It is shared by in-process callers and the worker.
func (e *Engine) executeClaimed(ctx context.Context, cl *store.Claimed, lease time.Duration, settler settleFunc) (*store.Proposal, error) {
	p := cl.Proposal
	if settler == nil {
		settler = e.store.Settle
	}
	x := &execution{e: e, p: p, lease: lease, settler: settler, fence: store.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation}}
	lctx, stop := x.holdLease(ctx)
	defer stop()

	a, registered := e.Action(p.Action)
	switch cl.From {
	case store.StatusExecuting:
		// The previous holder may or may not have executed: never guess.
		if !registered {
			return x.settle(ctx, store.StatusUnknown, nil, "", nil, "the action is no longer registered; the previous attempt's outcome is unknown")
		}
		return x.uncertain(lctx, ctx, a, errors.New("the previous execution was interrupted"))
	case store.StatusReconciling:
		if !registered || a.hooks.Reconcile == nil {
			return x.settle(ctx, store.StatusUnknown, nil, "", nil, "the action can no longer be reconciled")
		}
		return x.reconcile(lctx, ctx, a)
	}

	id := Identity{Tenant: p.Tenant, Actor: p.Requester, Roles: p.RequesterRoles}
	if e.resolver != nil {
		got, err := e.resolver.ResolveActor(ctx, p.Tenant, p.Requester)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return x.fail(ctx, false, "the requester no longer exists")
		case err != nil:
			// A resolver outage is not a verdict: leave the lease to lapse
			// and the proposal to be retried.
			return nil, fmt.Errorf("resolve requester of %s: %w", p.ID, err)
		case got.Tenant != p.Tenant:
			return x.fail(ctx, false, "the requester no longer belongs to the tenant")
		}
		id = *got
	}
	x.id = id
	if !registered || a.version != p.ActionVersion {
		return x.fail(ctx, false, fmt.Sprintf("action %s version %s is no longer registered; a new version needs a new proposal", p.Action, p.ActionVersion))
	}
	if err := e.authorize(lctx, a, id, PhaseExecute, p.Input, p.ID); err != nil {
		var d *DeniedError
		errors.As(err, &d)
		return x.fail(ctx, false, "authorization refused: "+d.Reason)
	}
	// Drift: the original input, re-parsed by today's schema, must still be
	// exactly what was approved.
	if _, digest, err := a.prepareInput(p.RawInput); err != nil || digest != p.InputDigest {
		reason := "the input no longer parses to the approved snapshot"
		if err != nil {
			reason += ": " + err.Error()
		}
		return x.fail(ctx, false, reason)
	}
	if a.hooks.Preflight != nil {
		pf, err := a.hooks.Preflight(lctx, &PreflightRequest{Identity: id, Phase: PhaseExecute, Action: a.name, Input: p.Input, ProposalID: p.ID, StateVersion: p.StateVersion})
		switch {
		case err != nil:
			return x.fail(ctx, false, "preflight failed: "+err.Error())
		case pf.Verdict == PreflightDenied:
			return x.fail(ctx, false, "preflight denied: "+pf.Reason)
		case pf.Verdict == PreflightCompleted:
			return x.settle(ctx, store.StatusSucceeded, ptr(false), pf.Receipt, pf.Result, "")
		}
	}
	return x.run(lctx, ctx, a)
}

// settleFunc writes one settlement.
type settleFunc func(ctx context.Context, params *store.SettleParams) (*store.TransitionResult, error)

// execution is one lease holder's work on one proposal.
type execution struct {
	e     *Engine
	p     *store.Proposal
	id    Identity
	fence store.Fence
	lease time.Duration
	// settler writes settlements: the store directly, or a worker's group.
	settler settleFunc

	mu   sync.Mutex
	lost bool
}

// holdLease renews the lease at a third of its duration until stop is called.
// If the lease is lost, the returned context is cancelled and the execution
// must never settle.
func (x *execution) holdLease(ctx context.Context) (context.Context, func()) {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	// The goroutine reads only these copies: x.p is replaced as the
	// execution settles.
	tenant, id, fence := x.p.Tenant, x.p.ID, x.fence
	// The lease's own expiry may come from another clock (the database's);
	// this process judges it by its own, counting from before each renewal
	// was asked for, which errs on the side of giving up early.
	expires := time.Now().Add(x.lease)
	go func() {
		defer wg.Done()
		t := time.NewTicker(x.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-lctx.Done():
				return
			case <-t.C:
			}
			asked := time.Now()
			_, err := x.e.store.RenewLease(context.WithoutCancel(ctx), &store.RenewLeaseParams{
				Tenant: tenant, ID: id, Fence: fence, LeaseDuration: x.lease,
			})
			if err == nil {
				expires = asked.Add(x.lease)
				continue
			}
			if errors.Is(err, store.ErrLeaseLost) || !time.Now().Before(expires) {
				x.e.log.Warn("execution lease lost", "proposal", id, "err", err)
				x.mu.Lock()
				x.lost = true
				x.mu.Unlock()
				if x.e.observer != nil {
					x.e.observer.LeaseLost(id)
				}
				cancel()
				return
			}
			x.e.log.Warn("lease renewal failed; retrying", "proposal", id, "err", err)
		}
	}()
	return lctx, func() {
		close(done)
		wg.Wait()
		cancel()
	}
}

func (x *execution) leaseLost() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lost
}

// settle records the result under the lease. It writes even when the
// caller's context has ended: the work is done and must be recorded.
func (x *execution) settle(ctx context.Context, status store.Status, executed *bool, receipt string, result json.RawMessage, errText string) (*store.Proposal, error) {
	if x.leaseLost() {
		return nil, fmt.Errorf("settle proposal %s: %w", x.p.ID, store.ErrLeaseLost)
	}
	params := &store.SettleParams{
		Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, Status: status,
		Executed: executed, Receipt: receipt, Result: result,
	}
	if errText != "" {
		params.Error = &errText
	}
	return x.write(ctx, params)
}

func (x *execution) write(ctx context.Context, params *store.SettleParams) (*store.Proposal, error) {
	if a, ok := x.e.Action(x.p.Action); ok && a.hooks.Present != nil && params.Status.Terminal() {
		o := &Outcome{ProposalID: x.p.ID, Status: params.Status, Executed: params.Executed, Receipt: params.Receipt, Result: params.Result, Error: params.Error}
		params.Presentation = a.hooks.Present(ctx, o)
	}
	tr, err := x.settleRetrying(context.WithoutCancel(ctx), params)
	if err != nil {
		return nil, fmt.Errorf("settle proposal %s: %w", x.p.ID, err)
	}
	x.p = tr.Proposal
	x.e.changed(ctx, tr.Proposal, tr.From)
	return tr.Proposal, nil
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
		tr, err := x.settler(ctx, params)
		switch {
		case err == nil:
			return tr, nil
		case errors.Is(err, store.ErrConflict) && ambiguous:
			p, gerr := x.e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: x.p.Tenant, ID: x.p.ID})
			if gerr == nil && p.Status == params.Status && p.Outcome != nil && p.Outcome.Receipt == params.Receipt {
				return &store.TransitionResult{Proposal: p, From: x.p.Status, Changed: true}, nil
			}
			return nil, err
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrInvalidParams), errors.Is(err, store.ErrNotFound):
			return nil, err
		case x.leaseLost():
			return nil, errors.Join(store.ErrLeaseLost, err)
		}
		ambiguous = true
		x.e.log.Warn("settlement failed; retrying while the lease lasts", "proposal", x.p.ID, "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
	}
}

func (x *execution) fail(ctx context.Context, executed bool, reason string) (*store.Proposal, error) {
	return x.settle(ctx, store.StatusFailed, ptr(executed), "", nil, reason)
}

// run executes, retrying an idempotent action with the same operation id
// while the outcome stays uncertain.
func (x *execution) run(lctx, ctx context.Context, a *Action) (*store.Proposal, error) {
	began := time.Now()
	rec, err := a.hooks.Execute(lctx, &ExecuteRequest{
		Identity: x.id, Action: a.name, Input: x.p.Input, OperationID: x.p.OperationID,
		StateVersion: x.p.StateVersion, ProposalID: x.p.ID, Attempt: x.p.Attempt,
	})
	if x.e.observer != nil {
		x.e.observer.Executed(a.name, time.Since(began), err)
	}
	switch {
	case x.leaseLost():
		return nil, fmt.Errorf("execute proposal %s: %w", x.p.ID, store.ErrLeaseLost)
	case err == nil:
		if rec == nil {
			rec = &Receipt{}
		}
		return x.settle(ctx, store.StatusSucceeded, ptr(true), rec.ID, rec.Result, "")
	case errors.Is(err, ErrNotApplied):
		return x.fail(ctx, true, err.Error())
	}
	return x.uncertain(lctx, ctx, a, err)
}

// uncertain routes an outcome nobody knows (DESIGN.md §6): reconcile if the
// action can, retry with the same operation id if it is idempotent, else
// unknown. Nothing here re-issues a non-idempotent write.
func (x *execution) uncertain(lctx, ctx context.Context, a *Action, cause error) (*store.Proposal, error) {
	if a.hooks.Reconcile != nil {
		msg := "outcome uncertain: " + cause.Error()
		if _, err := x.write(ctx, &store.SettleParams{
			Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, Status: store.StatusReconciling, Error: &msg,
		}); err != nil {
			return nil, err
		}
		return x.reconcile(lctx, ctx, a)
	}
	if a.idempotent && x.p.Attempt < x.e.maxAttempts {
		backoff := x.e.retryBackoff << min(max(x.p.Attempt-1, 0), 10)
		select {
		case <-lctx.Done():
			if x.leaseLost() {
				return nil, fmt.Errorf("retry proposal %s: %w", x.p.ID, store.ErrLeaseLost)
			}
			// The caller stopped waiting; the proposal stays executing and
			// its lease lapses, so a worker recovers it.
			return nil, fmt.Errorf("retry proposal %s: %w", x.p.ID, lctx.Err())
		case <-time.After(backoff):
		}
		p, err := x.e.store.BeginRetry(context.WithoutCancel(ctx), &store.BeginRetryParams{
			Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, LeaseDuration: x.lease,
		})
		if err != nil {
			return nil, fmt.Errorf("retry proposal %s: %w", x.p.ID, err)
		}
		x.p = p
		if x.id.Tenant == "" {
			x.id = Identity{Tenant: p.Tenant, Actor: p.Requester, Roles: p.RequesterRoles}
		}
		return x.run(lctx, ctx, a)
	}
	detail := cause.Error()
	if a.idempotent {
		detail = fmt.Sprintf("%s (after %d attempts)", detail, x.p.Attempt)
	}
	return x.settle(ctx, store.StatusUnknown, nil, "", nil, detail)
}

// reconcile asks the backend what became of the operation. An unknown answer
// leaves the proposal reconciling, with the lease released until the next
// attempt is due.
func (x *execution) reconcile(lctx, ctx context.Context, a *Action) (*store.Proposal, error) {
	r, err := a.hooks.Reconcile(lctx, &ReconcileRequest{
		Identity: Identity{Tenant: x.p.Tenant, Actor: x.p.Requester, Roles: x.p.RequesterRoles},
		Action:   a.name, OperationID: x.p.OperationID, ProposalID: x.p.ID,
	})
	if x.leaseLost() {
		return nil, fmt.Errorf("reconcile proposal %s: %w", x.p.ID, store.ErrLeaseLost)
	}
	if err == nil {
		switch r.Status {
		case ReconcileApplied:
			return x.settle(ctx, store.StatusSucceeded, ptr(true), r.Receipt, r.Result, "")
		case ReconcileNotApplied:
			return x.fail(ctx, true, "reconciled: the operation was not applied")
		}
	}
	msg := "reconcile: the backend does not know yet whether the operation was applied"
	if err != nil {
		msg = "reconcile failed: " + err.Error()
	}
	// The pause doubles with every unknown answer, up to 2^10 times the first.
	n := 1
	if x.p.Outcome != nil && x.p.Status == store.StatusReconciling {
		n = x.p.Outcome.Reconciles + 1
	}
	next := x.e.clock().Add(x.e.reconcileBack << min(n-1, 10))
	return x.write(ctx, &store.SettleParams{
		Tenant: x.p.Tenant, ID: x.p.ID, Fence: x.fence, Status: store.StatusReconciling,
		Error: &msg, ReleaseLease: true, NextAttemptAt: &next, Reconciles: n,
	})
}

// executeDirect runs a call the policy allows: no proposal, nothing to
// settle. Authorization already ran; preflight and prepare still run.
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
	req := &ExecuteRequest{Identity: c.Identity, Action: a.name, Input: input, OperationID: "op_" + newID(), StateVersion: stateVersion}
	res := &Result{}
	for req.Attempt = 1; ; req.Attempt++ {
		began := time.Now()
		rec, err := a.hooks.Execute(ctx, req)
		if e.observer != nil {
			e.observer.Executed(a.name, time.Since(began), err)
		}
		switch {
		case err == nil:
			if rec == nil {
				rec = &Receipt{}
			}
			res.Status, res.Executed, res.Receipt, res.Result = ResultSucceeded, ptr(true), rec.ID, rec.Result
			res.Summary = store.DefaultSummary(a.name, store.StatusSucceeded, receiptDetail(rec.ID))
			return res, nil
		case errors.Is(err, ErrNotApplied):
			res.Status, res.Executed, res.Error = ResultFailed, ptr(true), err.Error()
			res.Summary = store.DefaultSummary(a.name, store.StatusFailed, err.Error())
			return res, nil
		case a.hooks.Reconcile == nil && a.idempotent && req.Attempt < e.maxAttempts && ctx.Err() == nil:
			select {
			case <-ctx.Done():
			case <-time.After(e.retryBackoff << min(req.Attempt-1, 10)):
			}
			continue
		case a.hooks.Reconcile != nil:
			r, rerr := a.hooks.Reconcile(context.WithoutCancel(ctx), &ReconcileRequest{Identity: c.Identity, Action: a.name, OperationID: req.OperationID})
			if rerr == nil && r.Status == ReconcileApplied {
				res.Status, res.Executed, res.Receipt, res.Result = ResultSucceeded, ptr(true), r.Receipt, r.Result
				res.Summary = store.DefaultSummary(a.name, store.StatusSucceeded, receiptDetail(r.Receipt))
				return res, nil
			}
			if rerr == nil && r.Status == ReconcileNotApplied {
				res.Status, res.Executed, res.Error = ResultFailed, ptr(true), "reconciled: the operation was not applied"
				res.Summary = store.DefaultSummary(a.name, store.StatusFailed, res.Error)
				return res, nil
			}
		}
		res.Status, res.Error = ResultUnknown, err.Error()
		res.Summary = store.DefaultSummary(a.name, store.StatusUnknown, "")
		return res, nil
	}
}

func receiptDetail(id string) string {
	if id == "" {
		return ""
	}
	return "Receipt: " + id + "."
}
