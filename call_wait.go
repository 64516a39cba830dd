package countersign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Waiting for a proposal: a wait-mode call blocks until its proposal is
// decided and then executes an approval (waitAndExecute); Wait blocks until a
// proposal is settled and executes nothing. Both wait in one loop, await.
//
// A waiter holds its goroutine, a hub subscription, the proposal and one
// timer; the engine's watcher (see watch) polls the store for all waiters
// at once, so an idle waiter costs no store reads of its own. What a blocked
// waiter's stack holds is what 10,000 waiters pay 10,000 times, and the
// runtime shrinks a stack only while its frames use less than a quarter of
// it: the loop is one frame, and its time limit a deadline rather than a
// context of its own.

// waitAndExecute blocks until the proposal is decided, then executes an
// approval (the caller executes in wait mode), or returns the outcome. When
// the call's WaitTimeout passes first it answers pending; when ctx ends, pending
// with ctx's error.
func (e *Engine) waitAndExecute(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, error) {
	_, res, err := e.await(ctx, c, p)
	return res, err
}

// waitSettled waits for an executing proposal to settle, then returns its outcome.
func (e *Engine) waitSettled(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, error) {
	if p.Status != cstype.StatusExecuting {
		return resultOf(p), nil
	}
	return e.waitAndExecute(ctx, c, p)
}

// Wait blocks until the proposal is terminal or reconciling, or ctx ends, and
// returns it (with ctx's error if ctx ended). It never executes anything.
func (e *Engine) Wait(ctx context.Context, id Identity, proposalID string) (*cstype.Proposal, error) {
	p, err := e.Proposal(ctx, id, proposalID)
	if err != nil {
		return nil, err
	}
	p, _, err = e.await(ctx, nil, p)
	return p, err
}

// await is the one wait loop. It blocks until p is terminal or reconciling
// and returns it as it then stands; a due proposal is expired on the way, so
// no sweeper is needed to end a wait. When ctx ends first it returns the last
// proposal read with ctx's error.
//
// For a wait-mode call c (nil for Wait) it answers the call instead: an
// approval is claimed and executed by the caller (if another caller claimed
// it first, the wait goes on for its outcome), a settled proposal answers its
// outcome, and when c's WaitTimeout passes, or ctx ends, the answer is
// pending (with ctx's error if ctx ended). A store read that fails is an
// error unless the wait had ended meanwhile.
func (e *Engine) await(ctx context.Context, c *Call, p *cstype.Proposal) (*cstype.Proposal, *Result, error) {
	// Everything but the blocking select happens in awaitStep, and what the
	// steps share lives in awaiting, on the heap: this frame is what each
	// of 10,000 blocked waiters keeps on its stack, and the runtime shrinks
	// a stack only to four times what it uses (B5 measures it).
	w := e.beginAwait(c, p)
	defer w.end()
	for {
		var ret bool
		var q *cstype.Proposal
		var res *Result
		var err error
		if p, q, res, err, ret = e.awaitStep(ctx, c, p, w); ret {
			return q, res, err
		}
		select {
		case <-ctx.Done():
			return e.waitEnded(ctx, c, p)
		case <-w.wake:
		case <-w.timer.C:
		}
	}
}

// awaiting is what await's steps share.
type awaiting struct {
	deadline time.Time // c's WaitTimeout from the start; zero: none
	wake     <-chan struct{}
	unwatch  func()
	timer    *time.Timer
	release  func() // callWaits' release; nil for Wait
}

// beginAwait watches p, then (for a call) registers the call as waiting:
// a change between the caller's read and the subscription is seen by the
// first read, and every later one wakes the wait.
//
//go:noinline
func (e *Engine) beginAwait(c *Call, p *cstype.Proposal) *awaiting {
	w := &awaiting{timer: time.NewTimer(time.Hour)}
	if c != nil && c.WaitTimeout > 0 {
		w.deadline = time.Now().Add(c.WaitTimeout)
	}
	w.wake, w.unwatch = e.watch(p)
	if c != nil {
		// While it waits, an approval is executed here, not left for the
		// caller's next call (see awaitsCaller).
		w.release = e.callWaits(p)
	}
	return w
}

// end undoes beginAwait.
func (w *awaiting) end() {
	w.unwatch()
	if w.release != nil {
		w.release()
	}
	w.timer.Stop()
}

// awaitStep reads p and acts on what it finds, until the wait must block:
// then it returns the proposal read, with the timer set for the next
// read, and ret false. When the wait is over it returns await's answer (q,
// res, err) with ret true.
//
//go:noinline
func (e *Engine) awaitStep(ctx context.Context, c *Call, p *cstype.Proposal, w *awaiting) (next, q *cstype.Proposal, res *Result, err error, ret bool) {
	for {
		fresh, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if err != nil {
			if waitOver(ctx, w.deadline) {
				q, res, err := e.waitEnded(ctx, c, p)
				return p, q, res, err, true
			}
			if !errors.Is(err, cstype.ErrUnavailable) {
				return p, nil, nil, waitFailed(p, err), true
			}
			// The store cannot be reached: the wait holds on, and reads
			// again shortly (or when woken).
			if !sleepOutage(ctx, w.wake, w.timer, w.deadline) {
				q, res, err := e.waitEnded(ctx, c, p)
				return p, q, res, err, true
			}
			continue
		}
		p = fresh
		switch {
		case p.Status.Terminal() || p.Status == cstype.StatusReconciling:
			if c == nil {
				return p, p, nil, nil, true
			}
			return p, nil, resultOf(p), nil, true
		case p.Status == cstype.StatusApproved && c != nil:
			// Nobody waits while the caller executes.
			w.unwatch()
			if res, err, done := e.executeWaited(ctx, c, p); done {
				w.unwatch = func() {}
				return p, nil, res, err, true
			}
			w.wake, w.unwatch = e.watch(p)
			continue
		case p.Status == cstype.StatusExecuting && c != nil && e.callerExecutes(p):
			// A caller's execution is its caller's to finish: a repeat
			// answers at once, and never gets a second lease.
			res, err := e.callerExecuting(ctx, c, p)
			return p, nil, res, err, true
		case e.expireWaited(ctx, p):
			continue
		}
		if waitOver(ctx, w.deadline) {
			q, res, err := e.waitEnded(ctx, c, p)
			return p, q, res, err, true
		}
		w.timer.Reset(e.nextWake(p, w.deadline))
		return p, nil, nil, nil, false
	}
}

// waitEnded answers a wait that ended before p was settled: p with ctx's
// error for Wait; for a call, pending, with ctx's error if ctx ended (not
// when only its WaitTimeout passed).
func (e *Engine) waitEnded(ctx context.Context, c *Call, p *cstype.Proposal) (*cstype.Proposal, *Result, error) {
	if c == nil {
		return p, nil, ctx.Err()
	}
	return nil, pendingReceipt(p), ctx.Err()
}

// The steps of await that do not block live in functions of their own, so
// that their temporaries are not part of the frame a blocked waiter keeps.

// sleepOutage waits, while the store cannot be reached, until the next
// read is due (outageWake) or wake fires; false when ctx ended. A select
// of its own, out of await's frame: each select's cases take room in the
// frame of the function it is in, for as long as that function runs.
//
//go:noinline
func sleepOutage(ctx context.Context, wake <-chan struct{}, timer *time.Timer, deadline time.Time) bool {
	timer.Reset(outageWake(deadline))
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-timer.C:
	}
	return true
}

// waitOver reports whether a wait has ended: ctx ended, or the deadline
// (if any) passed.
//
//go:noinline
func waitOver(ctx context.Context, deadline time.Time) bool {
	return ctx.Err() != nil || !deadline.IsZero() && !time.Now().Before(deadline)
}

//go:noinline
func waitFailed(p *cstype.Proposal, err error) error {
	return fmt.Errorf("wait for proposal %s: %w", p.ID, err)
}

// executeWaited claims and executes an approval a waiting call saw. done is
// false when another caller claimed it first (or it lapsed): the wait goes
// on for its outcome.
//
//go:noinline
func (e *Engine) executeWaited(ctx context.Context, c *Call, p *cstype.Proposal) (res *Result, err error, done bool) {
	res, err = e.claimAndExecute(ctx, c, p)
	// A store that cannot be reached leaves the wait on too: the next read
	// finds the proposal as the claim left it (still approved, or executing
	// under a lease whose lapse a worker recovers), and nothing is executed
	// twice since the claim is a compare-and-set.
	return res, err, !errors.Is(err, cstype.ErrConflict) && !errors.Is(err, cstype.ErrUnavailable)
}

// waitOutageRecheck is how often a waiter reads again while the store
// cannot be reached.
const waitOutageRecheck = 500 * time.Millisecond

// outageWake is how long a waiter pauses after a read the store could not
// serve: waitOutageRecheck, or less if the call's deadline comes first.
//
//go:noinline
func outageWake(deadline time.Time) time.Duration {
	if deadline.IsZero() {
		return waitOutageRecheck
	}
	return min(waitOutageRecheck, max(time.Until(deadline), 0))
}

// expireWaited expires a waited-on proposal that is due, and reports
// whether it did.
//
//go:noinline
func (e *Engine) expireWaited(ctx context.Context, p *cstype.Proposal) bool {
	if !store.Due(p, e.clock()) {
		return false
	}
	tr, err := e.store.Expire(ctx, &store.ExpireParams{Tenant: p.Tenant, ID: p.ID})
	if err != nil || !tr.Changed {
		return false
	}
	e.changed(ctx, tr.Proposal, tr.From)
	return true
}

// nextWake is how long a waiter blocks when nothing wakes it: until the
// proposal's deadline (to expire it without a sweeper), the call's (to
// answer pending), and at the latest waitRecheck (see watch).
//
//go:noinline
func (e *Engine) nextWake(p *cstype.Proposal, deadline time.Time) time.Duration {
	next := e.recheck()
	if p.Status == cstype.StatusPending {
		next = min(next, max(p.ExpiresAt.Sub(e.clock()), 0)+time.Millisecond)
	}
	if !deadline.IsZero() {
		next = min(next, max(time.Until(deadline), 0))
	}
	return next
}

// withoutWait passes a Result and an error through call.
func withoutWait(res *Result, err error) (*Result, *cstype.Proposal, error) { return res, nil, err }

// resumeOrWait answers a call whose proposal exists, or hands a wait-mode
// proposal back for Call to wait on.
func (e *Engine) resumeOrWait(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, *cstype.Proposal, error) {
	if p.Mode == ModeWait {
		return nil, p, nil
	}
	return withoutWait(e.resume(ctx, c, p))
}

// resume answers a call whose proposal exists, by its mode and state.
func (e *Engine) resume(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, error) {
	switch p.Mode {
	case ModeWait:
		return e.waitAndExecute(ctx, c, p)
	case ModeTwoPhase:
		switch p.Status {
		case cstype.StatusPending:
			return confirmationRequired(p), nil
		case cstype.StatusApproved:
			if c.Evidence != p.ConfirmationID {
				return confirmationRequired(p), nil
			}
			return e.claimAndExecute(ctx, c, p)
		case cstype.StatusExecuting:
			return e.waitSettled(ctx, c, p)
		}
		return resultOf(p), nil
	default: // independent: the worker executes
		if p.Status.Terminal() || p.Status == cstype.StatusReconciling {
			return resultOf(p), nil
		}
		return pendingReceipt(p), nil
	}
}
