package maintenance

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/store"
)

// RemindersStore is what Reminders needs of the store.
type RemindersStore interface {
	RemindDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error)
}

// Reminders records the due reminders of pending proposals (a rule's
// remind_every: one proposal.reminder event per proposal and round, see
// store.ApplyRemind), every interval, draining the backlog in batches, and
// tells changed of each.
type Reminders struct {
	loop
	store   RemindersStore
	changed Changed
	batch   int
}

// NewReminders returns the reminder service on st.
func NewReminders(st RemindersStore, changed Changed, cfg SweepConfig) *Reminders {
	cfg = cfg.withDefaults()
	return &Reminders{loop: newLoop("reminders", cfg.Interval, cfg.Logger), store: st, changed: changed, batch: cfg.Batch}
}

// Run implements Service.
func (s *Reminders) Run(ctx context.Context) error {
	return s.run(ctx, func(ctx context.Context) error { return drain(ctx, s.batch, s.Batch) })
}

// Batch records up to one batch of due reminders and returns how many.
func (s *Reminders) Batch(ctx context.Context) (int, error) {
	ps, err := s.store.RemindDue(ctx, &store.ExpireDueParams{Limit: s.batch})
	if err != nil {
		return 0, fmt.Errorf("record due reminders: %w", err)
	}
	for _, p := range ps {
		s.changed(ctx, p, store.StatusPending)
	}
	return len(ps), nil
}
