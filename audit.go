package countersign

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/store"
)

// The audit log's hash chain (store.Audit): reading it, and the sealer that
// builds it.
//
// Events are written by the transitions that cause them, unsealed; the
// sealer chains them a moment later, so that no writer waits for the chain
// or for another writer because of it. The chain covers every event older
// than about one SealerOptions.Interval; an event younger than that is in
// the proposal's trail (ProposalEvents, Feed) and not yet in the chain.

// Sealer defaults.
const (
	// DefaultSealInterval is how often the sealer seals what committed.
	DefaultSealInterval = time.Second
	// DefaultSealLease is how long the sealing lease lasts between seals:
	// how long the chain may stall when its sealer's process dies.
	DefaultSealLease = 15 * time.Second
)

// SealerOptions configures RunSealer. Zero fields take the defaults.
type SealerOptions struct {
	// Interval is how often the lease holder seals, and how often the
	// others try to take the lease. Default 1s. Must be less than a third of
	// LeaseDuration, so that a holder renews its lease (every seal does)
	// well before it lapses.
	Interval time.Duration
	// LeaseDuration is the sealing lease. Default 15s.
	LeaseDuration time.Duration
	// Batch bounds the events one seal writes. Default 1000.
	Batch int
}

func (o SealerOptions) withDefaults() (SealerOptions, error) {
	if o.Interval == 0 {
		o.Interval = DefaultSealInterval
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultSealLease
	}
	if o.Batch == 0 {
		o.Batch = store.DefaultSealBatch
	}
	switch {
	case o.Interval < 0:
		return o, fmt.Errorf("countersign: SealerOptions.Interval %v: must be positive", o.Interval)
	case o.LeaseDuration < 0:
		return o, fmt.Errorf("countersign: SealerOptions.LeaseDuration %v: must be positive", o.LeaseDuration)
	case o.Batch < 0:
		return o, fmt.Errorf("countersign: SealerOptions.Batch %d: must be positive", o.Batch)
	case o.Interval >= o.LeaseDuration/3:
		return o, fmt.Errorf("countersign: SealerOptions.Interval %v: must be less than a third of LeaseDuration %v", o.Interval, o.LeaseDuration)
	}
	return o, nil
}

// RunSealer builds the audit chain until ctx ends, then gives its lease up
// and returns ctx's error. Every process may run one: they compete for the
// store's sealing lease, one seals, and when it stops (or its process dies
// and the lease lapses) another takes over. Worker.Run runs one unless
// WorkerOptions.NoSealer is set.
func (e *Engine) RunSealer(ctx context.Context, opts SealerOptions) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	var token string
	defer func() {
		if token != "" {
			// Let another process's sealer take over at once rather than
			// after the lease lapses.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.Interval)
			defer cancel()
			if err := e.store.ReleaseSealLease(rctx, &store.ReleaseSealLeaseParams{Token: token}); err != nil {
				e.log.Warn("release the sealing lease", "err", err)
			}
		}
	}()
	t := time.NewTicker(opts.Interval)
	defer t.Stop()
	for {
		token = e.seal(ctx, token, opts)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// seal takes the lease if it has none and seals every backlog in batches;
// it returns the token it holds afterwards ("" when it holds none).
func (e *Engine) seal(ctx context.Context, token string, opts SealerOptions) string {
	if token == "" {
		l, err := e.store.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: e.owner, LeaseDuration: opts.LeaseDuration})
		switch {
		case errors.Is(err, store.ErrSealLeaseHeld):
			return ""
		case err != nil:
			if ctx.Err() == nil {
				e.log.Warn("acquire the sealing lease", "err", err)
			}
			return ""
		}
		token = l.Token
	}
	for {
		res, err := e.store.SealEvents(ctx, &store.SealEventsParams{Token: token, LeaseDuration: opts.LeaseDuration, Limit: opts.Batch})
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			e.log.Info("sealing lease taken over by another process")
			return ""
		case err != nil:
			// The lease is kept: the next seal renews it, or finds it lost.
			if ctx.Err() == nil {
				e.log.Warn("seal audit events", "err", err)
			}
			return token
		case res.Sealed < opts.Batch:
			return token
		}
	}
}

// AuditPage is one page of a tenant's audit chain.
type AuditPage struct {
	// Events are in seq order.
	Events []*store.AuditEvent
	// Next is the seq to read on from (the after of the next page), or 0
	// when this page ends the chain as sealed so far.
	Next int64
}

// MaxAuditPage is the most events one Audit page holds.
const MaxAuditPage = store.MaxPageSize

// Audit returns the caller's tenant's chain after seq after, up to limit
// events (1..MaxAuditPage; 0 means MaxAuditPage). Reading the audit log
// needs the operator role: it shows every proposal of the tenant, whoever
// may see it otherwise.
func (e *Engine) Audit(ctx context.Context, id Identity, after int64, limit int) (*AuditPage, error) {
	if !slices.Contains(id.Roles, RoleOperator) {
		return nil, &ForbiddenError{Actor: id.Actor, Reason: "reading the audit log needs the operator role"}
	}
	if limit == 0 {
		limit = MaxAuditPage
	}
	if after < 0 || limit < 0 || limit > MaxAuditPage {
		return nil, fmt.Errorf("%w: audit after %d, limit %d: want after ≥ 0 and limit 1..%d", ErrInvalidCall, after, limit, MaxAuditPage)
	}
	// One more than asked tells whether another page follows.
	evs, err := e.store.ListAudit(ctx, &store.ListAuditParams{Tenant: id.Tenant, After: after, Limit: min(limit+1, store.MaxPageSize)})
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	page := &AuditPage{Events: evs}
	switch {
	case len(evs) > limit:
		page.Events = evs[:limit]
		page.Next = evs[limit-1].Seq
	case len(evs) == store.MaxPageSize && limit == store.MaxPageSize:
		// The store's page could not hold the extra event: there may be more.
		page.Next = evs[len(evs)-1].Seq
	}
	return page, nil
}
