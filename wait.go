package countersign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// Waiting for a proposal: a wait-mode call blocks until its proposal is
// decided and then executes an approval (waitAndExecute); Wait blocks until a
// proposal is settled and executes nothing. Both wait in one loop, await.
//
// A waiter holds its goroutine, a hub subscription, the proposal and one
// timer; the engine's watcher (see watch) polls the store for all waiters
// at once, so an idle waiter costs no store reads of its own.

// waitAndExecute blocks until the proposal is decided, then executes an
// approval (the caller executes in wait mode), or returns the outcome. When
// the call's WaitTimeout passes first it answers pending; when ctx ends, pending
// with ctx's error.
func (e *Engine) waitAndExecute(ctx context.Context, c *Call, p *store.Proposal) (*Result, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if c.WaitTimeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, c.WaitTimeout)
	}
	defer cancel()
	for {
		got, err := e.await(ctx, wctx, p, true)
		switch {
		case got == nil:
			return nil, err
		case err != nil: // the wait ended first
			if ctx.Err() != nil {
				return pendingReceipt(got), ctx.Err()
			}
			return pendingReceipt(got), nil
		case got.Status == store.StatusApproved:
			res, err := e.claimAndExecute(ctx, c, got)
			if !errors.Is(err, store.ErrConflict) {
				return res, err
			}
			// Another caller claimed it (or it lapsed): wait for its outcome.
			p = got
		default:
			return resultOf(got), nil
		}
	}
}

// waitSettled waits for an executing proposal to settle, then returns its outcome.
func (e *Engine) waitSettled(ctx context.Context, c *Call, p *store.Proposal) (*Result, error) {
	if p.Status != store.StatusExecuting {
		return resultOf(p), nil
	}
	return e.waitAndExecute(ctx, c, p)
}

// Wait blocks until the proposal is terminal or reconciling, or ctx ends, and
// returns it (with ctx's error if ctx ended). It never executes anything.
func (e *Engine) Wait(ctx context.Context, id Identity, proposalID string) (*store.Proposal, error) {
	p, err := e.Proposal(ctx, id, proposalID)
	if err != nil {
		return nil, err
	}
	return e.await(ctx, ctx, p, false)
}

// await blocks until p reaches a state that ends a wait — terminal or
// reconciling, or approved when the waiter executes — and returns it as it
// then stands. A due proposal is expired on the way, so no sweeper is needed
// to end a wait. Reads and expiries run under ctx; the wait itself ends with
// wctx, and then await returns the last proposal read with wctx's error. A
// read that fails is an error (and a nil proposal) only while wctx lasts.
func (e *Engine) await(ctx, wctx context.Context, p *store.Proposal, executes bool) (*store.Proposal, error) {
	// Watch first, then re-read: a change between the caller's read and the
	// subscription is seen by the re-read, and every later one wakes us.
	wake, unwatch := e.watch(p)
	defer unwatch()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		fresh, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if err != nil {
			if wctx.Err() != nil { // the wait ended while reading
				return p, wctx.Err()
			}
			return nil, fmt.Errorf("wait for proposal %s: %w", p.ID, err)
		}
		p = fresh
		if p.Status.Terminal() || p.Status == store.StatusReconciling || executes && p.Status == store.StatusApproved {
			return p, nil
		}
		if store.Due(p, e.clock()) {
			if tr, err := e.store.Expire(ctx, &store.ExpireParams{Tenant: p.Tenant, ID: p.ID}); err == nil && tr.Changed {
				e.changed(ctx, tr.Proposal, tr.From)
				continue
			}
		}
		// Wake at the deadline too, to expire the proposal without a
		// sweeper, and at the latest after waitRecheck (see watch).
		next := e.recheck()
		if p.Status == store.StatusPending {
			next = min(next, max(p.ExpiresAt.Sub(e.clock()), 0)+time.Millisecond)
		}
		timer.Reset(next)
		select {
		case <-wctx.Done():
			return p, wctx.Err()
		case <-wake:
		case <-timer.C:
		}
	}
}
