package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/store"
)

// DefaultProposalCountsEvery is how often ProposalCounts counts when given
// no interval.
const DefaultProposalCountsEvery = 30 * time.Second

// CountsStore is what ProposalCounts needs of the store.
type CountsStore interface {
	CountByStatus(ctx context.Context) (map[store.Status]int, error)
}

// ProposalCounts counts every tenant's proposals by status every interval
// and hands each count to a callback: the countersign_proposals gauge of
// server.ProposalCounts (its Set), which a scrape then reads without any
// store work. A failed count is logged and the callback keeps the last one.
type ProposalCounts struct {
	loop
	store CountsStore
	set   func(counts map[store.Status]int, at time.Time)
	now   func() time.Time
}

// ProposalCountsConfig configures ProposalCounts. Zero fields take the
// defaults.
type ProposalCountsConfig struct {
	// Interval is how often it counts. Default DefaultProposalCountsEvery.
	Interval time.Duration
	// Now stamps each count. Default time.Now.
	Now func() time.Time
	// Logger receives the failures. Default slog.Default().
	Logger *slog.Logger
}

// NewProposalCounts returns the service that counts st's proposals into set.
func NewProposalCounts(st CountsStore, set func(counts map[store.Status]int, at time.Time), cfg ProposalCountsConfig) *ProposalCounts {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultProposalCountsEvery)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &ProposalCounts{loop: newLoop("proposal counts", cfg.Interval, cfg.Logger), store: st, set: set, now: cfg.Now}
}

// Run implements Service.
func (s *ProposalCounts) Run(ctx context.Context) error { return s.run(ctx, s.count) }

func (s *ProposalCounts) count(ctx context.Context) error {
	// A count that outlives its interval would pile up behind the next.
	ctx, cancel := context.WithTimeout(ctx, s.interval)
	defer cancel()
	counts, err := s.store.CountByStatus(ctx)
	if err != nil {
		return fmt.Errorf("count proposals: %w", err)
	}
	s.set(counts, s.now())
	return nil
}
