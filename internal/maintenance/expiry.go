package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/store"
)

// Defaults of the sweeping services (expiry, escalation, reminders,
// sessions).
const (
	DefaultSweepInterval = time.Second
	DefaultSweepBatch    = 500
)

// SweepConfig configures a sweeping service. Zero fields take the defaults.
type SweepConfig struct {
	// Interval is how often the service sweeps. Default
	// DefaultSweepInterval.
	Interval time.Duration
	// Batch bounds the rows one store call handles, so that a backlog is
	// drained in short transactions. Default DefaultSweepBatch.
	Batch int
	// Logger receives the failures. Default slog.Default().
	Logger *slog.Logger
}

func (c SweepConfig) withDefaults() SweepConfig {
	c.Interval = cmp.Or(c.Interval, DefaultSweepInterval)
	c.Batch = cmp.Or(c.Batch, DefaultSweepBatch)
	return c
}

// ExpiryStore is what Expiry needs of the store.
type ExpiryStore interface {
	ExpireDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error)
}

// Expiry expires the proposals whose deadline passed (pending ones nobody
// decided, approved ones nobody collected), every interval, draining the
// backlog in batches, and tells changed of each, so that their waiters
// wake. A waiting caller expires its own proposal at its deadline; Expiry
// expires everyone else's.
type Expiry struct {
	loop
	store   ExpiryStore
	changed Changed
	batch   int
}

// NewExpiry returns the expiry service on st.
func NewExpiry(st ExpiryStore, changed Changed, cfg SweepConfig) *Expiry {
	cfg = cfg.withDefaults()
	return &Expiry{loop: newLoop("expiry", cfg.Interval, cfg.Logger), store: st, changed: changed, batch: cfg.Batch}
}

// Run implements Service.
func (s *Expiry) Run(ctx context.Context) error {
	return s.run(ctx, func(ctx context.Context) error { return drain(ctx, s.batch, s.Batch) })
}

// Batch expires up to one batch of due proposals and returns how many.
func (s *Expiry) Batch(ctx context.Context) (int, error) {
	ps, err := s.store.ExpireDue(ctx, &store.ExpireDueParams{Limit: s.batch})
	if err != nil {
		return 0, fmt.Errorf("expire due proposals: %w", err)
	}
	for _, p := range ps {
		s.changed(ctx, p, store.StatusPending)
	}
	return len(ps), nil
}

// drain calls batch until one handles fewer than limit rows.
func drain(ctx context.Context, limit int, batch func(context.Context) (int, error)) error {
	for {
		n, err := batch(ctx)
		if err != nil {
			return err
		}
		if n < limit {
			return nil
		}
	}
}
