package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// SessionsStore is what SessionCleanup needs of the store.
type SessionsStore interface {
	DeleteExpiredSessions(ctx context.Context, params *store.DeleteExpiredSessionsParams) (int, error)
}

// SessionCleanup removes a batch of expired inbox sessions every interval.
// An expired session is refused anyway (Engine.Session reads the expiry):
// removing them only keeps the table small when nobody signs in, so one
// batch a round is enough, and a backlog is not drained at once.
type SessionCleanup struct {
	loop
	store SessionsStore
	now   func() time.Time
	batch int
}

// NewSessionCleanup returns the session cleanup on st. now is the clock
// sessions expire by (the engine's); nil means time.Now.
func NewSessionCleanup(st SessionsStore, now func() time.Time, cfg SweepConfig) *SessionCleanup {
	cfg = cfg.withDefaults()
	if now == nil {
		now = time.Now
	}
	return &SessionCleanup{loop: newLoop("sessions", cfg.Interval, cfg.Logger), store: st, now: now, batch: cfg.Batch}
}

// Run implements Service.
func (s *SessionCleanup) Run(ctx context.Context) error {
	return s.run(ctx, func(ctx context.Context) error {
		_, err := s.Batch(ctx)
		return err
	})
}

// Batch removes up to one batch of expired sessions and returns how many.
func (s *SessionCleanup) Batch(ctx context.Context) (int, error) {
	n, err := s.store.DeleteExpiredSessions(ctx, &store.DeleteExpiredSessionsParams{Before: s.now(), Limit: s.batch})
	if err != nil {
		return 0, fmt.Errorf("remove expired sessions: %w", err)
	}
	return n, nil
}
