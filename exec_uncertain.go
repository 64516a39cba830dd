package countersign

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"go.opentelemetry.io/otel/attribute"
)

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
	rctx, span := x.e.startSpan(lctx, spanReconcile, x.p)
	r, err := a.hooks.Reconcile(rctx, &ReconcileRequest{
		Identity: requesterIdentity(x.p),
		Action:   a.name, OperationID: x.p.OperationID, ProposalID: x.p.ID,
	})
	if span.IsRecording() {
		if r != nil {
			span.SetAttributes(attribute.String("countersign.reconcile.status", string(r.Status)))
		}
		endSpan(span, nil, err)
	}
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
