package countersign

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// A lease holder keeps an execution's lease while the execution runs, and
// gives the execution up before the lease can run out unconfirmed.
//
// The lease's real expiry is the store's (on PostgreSQL, the database's
// clock), which this process cannot read. So it reckons conservatively, by
// its own monotonic clock: a lease is confirmed until the moment before the
// claim or the last successful renewal was asked for, plus the lease
// duration, since the store may have started the lease at any moment after
// that. Every renewal is asked with a deadline before that point, so a
// renewal that hangs is given up in time, and a timer cancels the
// execution's context a margin before it, whatever the renewals are doing.
// A healthy holder renews every third of the lease, long before the timer.

// leaseMargin is how long before the reckoned expiry the holder gives the
// execution up: room for timer delay and for the clocks to disagree about
// the length of a lease.
func leaseMargin(lease time.Duration) time.Duration { return lease / 10 }

// renewEvery is the pause between a lease's renewals.
func renewEvery(lease time.Duration) time.Duration { return lease / 3 }

// renewRetry is the pause after a renewal that failed for a reason that is
// not a verdict (a dropped connection), before trying again.
func renewRetry(lease time.Duration) time.Duration { return lease / 10 }

// leaseHolder holds one execution's lease.
type leaseHolder struct {
	e     *Engine
	lease time.Duration
	// tenant, id and fence are copies: the execution replaces its proposal
	// as it settles.
	tenant, id string
	fence      cstype.Fence
	// cancel cancels the execution's context.
	cancel context.CancelFunc

	mu sync.Mutex
	// until is the reckoned expiry (see above); the lapse timer fires a
	// margin before it.
	until   time.Time
	lapse   *time.Timer
	lost    bool
	stopped bool
	// settling is set once the execution's last settlement is on its way: a
	// renewal refused from then on may be refused because that settlement
	// landed, so it proves nothing; the settlement's own answer tells.
	settling bool
}

// holdLease starts holding the lease of x, claimed by a call asked for at
// asked, and returns the context Execute runs under: it is cancelled when
// the lease is lost or about to lapse unconfirmed. stop ends the holding; it
// must be called once the execution has settled (or given up).
func (x *execution) holdLease(ctx context.Context, asked time.Time) (context.Context, func()) {
	lctx, cancel := context.WithCancel(ctx)
	h := &leaseHolder{
		e: x.e, lease: x.lease, tenant: x.p.Tenant, id: x.p.ID, fence: x.fence,
		cancel: cancel, until: asked.Add(x.lease),
	}
	x.holder = h
	h.mu.Lock()
	h.lapse = time.AfterFunc(time.Until(h.until.Add(-leaseMargin(h.lease))), h.lapsed)
	h.mu.Unlock()

	// Renewals outlive the caller's cancellation (the work goes on until it
	// settles), but not stop. The first is due a third of the lease from
	// the claim: most executions settle long before, and a timer that never
	// fires costs them no goroutine (a drain of no-op actions spent a
	// twentieth of the worker's CPU on one per execution).
	rctx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	first := time.AfterFunc(time.Until(asked.Add(renewEvery(h.lease))), func() {
		defer wg.Done()
		h.renew(rctx)
	})
	return lctx, func() {
		h.mu.Lock()
		h.stopped = true
		h.lapse.Stop()
		h.mu.Unlock()
		if first.Stop() {
			wg.Done() // the renewals never began, and never will
		}
		stopRenewing()
		wg.Wait()
		cancel()
	}
}

// renew renews the lease now and then every third of it, until ctx ends
// or the lease is lost.
func (h *leaseHolder) renew(ctx context.Context) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		deadline, ok := h.deadline()
		if !ok {
			return
		}
		asked := time.Now()
		if !asked.Before(deadline) {
			return // the lapse timer gives the execution up
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		_, err := h.e.store.RenewLease(rctx, &store.RenewLeaseParams{
			Tenant: h.tenant, ID: h.id, Fence: h.fence, LeaseDuration: h.lease,
		})
		cancel()
		var next time.Duration
		switch {
		case err == nil:
			h.confirmed(asked)
			next = time.Until(asked.Add(renewEvery(h.lease)))
		case ctx.Err() != nil:
			return // stopped
		case errors.Is(err, cstype.ErrLeaseLost):
			if !h.isSettlingLast() {
				h.lose("lease taken over", err)
			}
			return
		default:
			h.e.log.Warn("lease renewal failed; retrying while the lease lasts", "proposal", h.id, "err", err)
			next = renewRetry(h.lease)
		}
		if t == nil {
			t = time.NewTimer(next)
		} else {
			t.Reset(next)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// deadline is the latest moment a write that extends the lease may still be
// waited for: a margin before the reckoned expiry. ok is false once the
// lease is lost or the holding stopped.
func (h *leaseHolder) deadline() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until.Add(-leaseMargin(h.lease)), !h.lost && !h.stopped
}

// confirmed records a write that extended the lease, asked for at asked.
func (h *leaseHolder) confirmed(asked time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost || h.stopped || !asked.Add(h.lease).After(h.until) {
		return
	}
	h.until = asked.Add(h.lease)
	h.lapse.Reset(time.Until(h.until.Add(-leaseMargin(h.lease))))
}

// settlingLast records that the execution's last settlement is on its way.
func (h *leaseHolder) settlingLast() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settling = true
}

func (h *leaseHolder) isSettlingLast() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.settling
}

// lapsed is the lapse timer's work: the lease may run out before a renewal
// confirms it, so the execution is given up.
func (h *leaseHolder) lapsed() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost || h.stopped || time.Now().Before(h.until.Add(-leaseMargin(h.lease))) {
		return // stopped, or a renewal moved the expiry after the timer fired
	}
	h.loseLocked("lease about to lapse unconfirmed", nil)
}

// lose gives the execution up: the lease is gone.
func (h *leaseHolder) lose(why string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost || h.stopped {
		return
	}
	h.loseLocked(why, err)
}

func (h *leaseHolder) loseLocked(why string, err error) {
	h.lost = true
	h.lapse.Stop()
	h.e.log.Warn("execution lease lost", "proposal", h.id, "reason", why, "err", err)
	if h.e.observer != nil {
		h.e.observer.LeaseLost(h.id)
	}
	h.cancel()
}

// held reports whether the lease is still held by this process's reckoning
// at this moment, and gives the execution up if it is not. The lapse timer
// alone does not tell: a process that was frozen (SIGSTOP, a paused VM, a
// long GC or swap stall) past its lease wakes with the timer due but not yet
// run, and must not begin a side effect under a lease another process may
// hold by now. It is asked right before Execute and Reconcile begin.
func (h *leaseHolder) held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost || h.stopped {
		return false
	}
	if !time.Now().Before(h.until.Add(-leaseMargin(h.lease))) {
		h.loseLocked("the lease ran out before the call to the backend began (was the process paused?)", nil)
		return false
	}
	return true
}

// isLost reports whether the execution was given up.
func (h *leaseHolder) isLost() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}
