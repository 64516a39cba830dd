package countersign

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/internal/maintenance"
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

// SealerOptions configures the audit chain's sealer, which a Worker runs
// (WorkerOptions.Sealer) unless WorkerOptions.NoSealer is set: every process
// may run one; they compete for the store's sealing lease, one seals, and
// when it stops (or its process dies and the lease lapses) another takes
// over. With SigningKey, the one that seals also signs the chains'
// checkpoints. The loop is maintenance.Sealer. Zero fields take the
// defaults.
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
	// SigningKey, when set, makes the sealer that holds the lease sign a
	// checkpoint of every tenant's chain every CheckpointEvery, idle or not
	// (see checkpoint.go and docs/audit.md). Nil: no checkpoint is signed.
	SigningKey ed25519.PrivateKey
	// CheckpointEvery is how often the checkpoints are signed. Default
	// DefaultCheckpointEvery (1m). With a SigningKey, at least Interval:
	// checkpoints are signed between seals.
	CheckpointEvery time.Duration
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
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
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
	case o.CheckpointEvery < 0:
		return o, fmt.Errorf("countersign: SealerOptions.CheckpointEvery %v: must be positive", o.CheckpointEvery)
	case o.SigningKey != nil && o.CheckpointEvery < o.Interval:
		// Without a key it is unused: a long Interval stays valid alone.
		return o, fmt.Errorf("countersign: SealerOptions.CheckpointEvery %v: must be at least Interval %v", o.CheckpointEvery, o.Interval)
	case o.SigningKey != nil && len(o.SigningKey) != ed25519.PrivateKeySize:
		return o, fmt.Errorf("countersign: SealerOptions.SigningKey: %d bytes, not an Ed25519 private key (%d)", len(o.SigningKey), ed25519.PrivateKeySize)
	}
	return o, nil
}

// sealer is the sealing service with opts, which withDefaults has checked.
func (e *Engine) sealer(opts SealerOptions) *maintenance.Sealer {
	return maintenance.NewSealer(e.store, maintenance.SealerConfig{
		Owner: e.owner, Interval: opts.Interval, LeaseDuration: opts.LeaseDuration, Batch: opts.Batch,
		SigningKey: opts.SigningKey, CheckpointEvery: opts.CheckpointEvery, CheckpointBudget: e.checkpointBudget,
		Now: e.clock, Logger: e.log, OnSealed: e.observeSealed,
	})
}

// AuditPage is one page of a tenant's audit chain.
type AuditPage struct {
	// Events are in seq order.
	Events []*cstype.AuditEvent
	// Next is the seq to read on from (the after of the next page), or 0
	// when this page ends the chain as sealed so far.
	Next int64
}

// MaxAuditPage is the most events one Audit page holds.
const MaxAuditPage = cstype.MaxPageSize

// Audit returns the caller's tenant's chain after seq after, up to limit
// events (1..MaxAuditPage; 0 means MaxAuditPage). Reading the audit log
// needs the operator role: it shows every proposal of the tenant, whoever
// may see it otherwise.
func (e *Engine) Audit(ctx context.Context, id Identity, after int64, limit int) (*AuditPage, error) {
	evs, next, err := auditPage(id, "audit", after, limit, func(l int) ([]*cstype.AuditEvent, error) {
		return e.store.ListAudit(ctx, &store.ListAuditParams{Tenant: id.Tenant, After: after, Limit: l})
	}, func(ae *cstype.AuditEvent) int64 { return ae.Seq })
	if err != nil {
		return nil, err
	}
	return &AuditPage{Events: evs, Next: next}, nil
}

// auditPage reads one page of an operator's seq-ordered audit records (the
// chain's events, its checkpoints) after seq after, up to limit
// (1..MaxAuditPage; 0 means MaxAuditPage): the authority check, the bounds,
// and the seq the next page starts after (0: none), read by list, which is
// asked for one more than the page so that it tells whether another
// follows.
func auditPage[T any](id Identity, what string, after int64, limit int, list func(limit int) ([]T, error), seq func(T) int64) ([]T, int64, error) {
	if err := auditReader(id); err != nil {
		return nil, 0, err
	}
	if limit == 0 {
		limit = MaxAuditPage
	}
	if after < 0 || limit < 0 || limit > MaxAuditPage {
		return nil, 0, fmt.Errorf("%w: %s after %d, limit %d: want after ≥ 0 and limit 1..%d", ErrInvalidCall, what, after, limit, MaxAuditPage)
	}
	recs, err := list(min(limit+1, cstype.MaxPageSize))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case len(recs) > limit:
		return recs[:limit], seq(recs[limit-1]), nil
	case len(recs) == cstype.MaxPageSize && limit == cstype.MaxPageSize:
		// The store's page could not hold the extra record: there may be more.
		return recs, seq(recs[len(recs)-1]), nil
	}
	return recs, 0, nil
}

// auditReader checks that id may read its tenant's audit log: a person
// with the operator role (authority.go).
func auditReader(id Identity) error {
	return requireOperator(id, "", "reading the audit log needs the operator role")
}

// MaxTrailCheck bounds the chain events one ProposalTrail reads to check
// the chain, so that a proposal page costs the same on a tenant of ten
// events and of ten million.
const MaxTrailCheck = 10000

// ProposalTrail is a proposal's events, each with its place in the audit
// chain, and how far the chain holds up to them.
type ProposalTrail struct {
	// Events are the proposal's, oldest first. Seq is 0 for an event not
	// sealed yet (younger than about a second).
	Events []*TrailEvent
	// Check is what the chain's check covered and found.
	Check ChainCheck
}

// TrailEvent is one event of a ProposalTrail.
type TrailEvent struct {
	*cstype.AuditEvent
	// Verified: the chain holds from Check.From through this event.
	Verified bool
}

// ChainCheck reports a check of the part of a tenant's chain that ends with
// a proposal's last sealed event.
type ChainCheck struct {
	// From is the first seq checked: 1 when the chain was checked from its
	// start, which it is when that means reading at most MaxTrailCheck
	// events. Otherwise it is the seq just before the proposal's first
	// sealed event, whose own link backwards is taken as given: the whole
	// chain is checked by `countersign audit verify`. 0 when no event of
	// the proposal is sealed yet.
	From int64
	// Through is the last seq found to hold (From-1 when none did).
	Through int64
	// To is the last seq the check was to reach: the proposal's last sealed
	// event, or less when the proposal's events span more than
	// MaxTrailCheck events of the chain.
	To int64
	// Break names the first event that does not hold, at or before To.
	Break *auditchain.BreakError
}

// ProposalTrail returns the events of a proposal id may see, with their
// places in the audit chain and whether the chain verifies up to each. The
// chain's check reads other proposals' events too, but reveals of them no
// more than where a break is.
func (e *Engine) ProposalTrail(ctx context.Context, id Identity, proposalID string) (*ProposalTrail, error) {
	p, err := e.Proposal(ctx, id, proposalID)
	if err != nil {
		return nil, err
	}
	trail := &ProposalTrail{}
	var first, last int64
	for after := int64(0); ; {
		evs, err := e.store.ListProposalAudit(ctx, &store.ListProposalAuditParams{Tenant: id.Tenant, ProposalID: p.ID, AfterID: after})
		if err != nil {
			return nil, fmt.Errorf("list a proposal's audit events: %w", err)
		}
		for _, ae := range evs {
			trail.Events = append(trail.Events, &TrailEvent{AuditEvent: ae})
			if ae.Seq > 0 {
				if first == 0 || ae.Seq < first {
					first = ae.Seq
				}
				last = max(last, ae.Seq)
			}
		}
		if len(evs) < cstype.MaxPageSize {
			break
		}
		after = evs[len(evs)-1].ID
	}
	if last == 0 {
		return trail, nil
	}
	c := &trail.Check
	c.From = 1
	if last > e.trailCheck {
		c.From = max(1, first-1)
	}
	c.To = min(last, c.From+e.trailCheck-1)
	if err := e.checkChain(ctx, id.Tenant, c); err != nil {
		return nil, err
	}
	for _, te := range trail.Events {
		te.Verified = te.Seq >= c.From && te.Seq <= c.Through
	}
	return trail, nil
}

// checkChain verifies id's tenant's chain from c.From through c.To and
// records in c how far it holds.
func (e *Engine) checkChain(ctx context.Context, tenant string, c *ChainCheck) error {
	v := auditchain.Verifier{After: c.From - 1}
	c.Through = c.From - 1
	for after := c.From - 1; after < c.To; {
		page, err := e.store.ListAudit(ctx, &store.ListAuditParams{Tenant: tenant, After: after, Limit: int(min(c.To-after, cstype.MaxPageSize))})
		if err != nil {
			return fmt.Errorf("check the audit chain: %w", err)
		}
		if len(page) == 0 {
			c.Break = &auditchain.BreakError{Seq: after + 1, Reason: fmt.Sprintf("missing: the chain ends at seq %d", after)}
			return nil
		}
		for _, ae := range page {
			// Checked before its seq is compared with To: a seq past To
			// where To was expected is a hole, which the verifier names.
			if err := v.Event(ae.Chained()); err != nil {
				var brk *auditchain.BreakError
				if !errors.As(err, &brk) {
					return fmt.Errorf("check the audit chain: %w", err)
				}
				c.Break = brk
				return nil
			}
			if ae.Seq > c.To {
				return nil
			}
			c.Through = ae.Seq
		}
		after = page[len(page)-1].Seq
	}
	return nil
}
