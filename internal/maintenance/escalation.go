package maintenance

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/store"
)

// EscalationStore is what Escalation needs of the store.
type EscalationStore interface {
	EscalateDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error)
}

// Escalation escalates the pending proposals whose escalation is due (a
// rule's escalate_after: its escalate_to join the approvers, once; see
// store.ApplyEscalate), every interval, draining the backlog in batches, and
// tells changed of each, so that the new approvers' inboxes show them.
type Escalation struct {
	loop
	store   EscalationStore
	changed Changed
	batch   int
}

// NewEscalation returns the escalation service on st.
func NewEscalation(st EscalationStore, changed Changed, cfg SweepConfig) *Escalation {
	cfg = cfg.withDefaults()
	return &Escalation{loop: newLoop("escalation", cfg.Interval, cfg.Logger), store: st, changed: changed, batch: cfg.Batch}
}

// Run implements Service.
func (s *Escalation) Run(ctx context.Context) error {
	return s.run(ctx, func(ctx context.Context) error { return drain(ctx, s.batch, s.Batch) })
}

// Batch escalates up to one batch of due proposals and returns how many.
func (s *Escalation) Batch(ctx context.Context) (int, error) {
	ps, err := s.store.EscalateDue(ctx, &store.ExpireDueParams{Limit: s.batch})
	if err != nil {
		return 0, fmt.Errorf("escalate due proposals: %w", err)
	}
	for _, p := range ps {
		s.changed(ctx, p, store.StatusPending)
	}
	return len(ps), nil
}
