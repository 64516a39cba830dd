package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/store"
)

// DefaultStatisticsEvery is how often Statistics asks the store when given
// no interval: a second, so that a table that grows from nothing is
// analyzed within about a second of outgrowing its plans. A run that finds
// nothing stale is one catalog query.
const DefaultStatisticsEvery = time.Second

// Statistics keeps the query planner's statistics of the store's tables
// current (store.Statistics: PostgreSQL), in the window autovacuum leaves
// open: a new schema's tables grow from nothing, and until their first
// analysis, up to a minute later, the plans the database caches for them
// are those of empty tables. Each run analyzes the tables that need it
// (the store's rule: never analyzed and a few pages, or doubled since);
// the processes sharing a schema take turns, so one analysis does for all.
type Statistics struct {
	loop
	store store.Statistics
	// analyzed, when set, is told the tables each run analyzed, if any.
	analyzed func(tables []string)
}

// StatisticsConfig configures Statistics. Zero fields take the defaults.
type StatisticsConfig struct {
	// Interval is how often it asks the store. Default
	// DefaultStatisticsEvery.
	Interval time.Duration
	// Analyzed, when set, is told the tables each run analyzed, if any.
	Analyzed func(tables []string)
	// Logger receives the failures, and the tables analyzed at debug
	// level. Default slog.Default().
	Logger *slog.Logger
}

// NewStatistics returns the service that refreshes st's statistics.
func NewStatistics(st store.Statistics, cfg StatisticsConfig) *Statistics {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultStatisticsEvery)
	return &Statistics{loop: newLoop("statistics", cfg.Interval, cfg.Logger), store: st, analyzed: cfg.Analyzed}
}

// Run implements Service.
func (s *Statistics) Run(ctx context.Context) error { return s.run(ctx, s.refresh) }

func (s *Statistics) refresh(ctx context.Context) error {
	tables, err := s.store.RefreshStatistics(ctx)
	if len(tables) > 0 {
		s.log.Debug("planner statistics refreshed", "tables", tables)
		if s.analyzed != nil {
			s.analyzed(tables)
		}
	}
	if err != nil {
		return fmt.Errorf("refresh planner statistics: %w", err)
	}
	return nil
}
