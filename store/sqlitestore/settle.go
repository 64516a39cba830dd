package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// SettleMany implements store.Store: one write transaction for the group.
// Each settlement starts from the row as this Store remembers it from its
// claim, as mutate does, so the writer reads a row only when the memory
// has none or it moved.
func (s *Store) SettleMany(ctx context.Context, params []*store.SettleParams) ([]*store.TransitionResult, []error, error) {
	results := make([]*store.TransitionResult, len(params))
	errs := make([]error, len(params))
	guesses := make([]*store.Proposal, len(params))
	for i, sp := range params {
		guesses[i] = s.rows.Get(sp.Tenant, sp.ID)
	}
	err := s.writeFirst(ctx, func(tx *wtx, now time.Time) error {
		clear(results)
		clear(errs)
		for i, sp := range params {
			g := guesses[i]
			guesses[i] = nil // a second run of this write reads the rows
			rule := func(p *store.Proposal, now time.Time) (*store.Change, error) { return store.ApplySettle(p, sp, now) }
			st, err := transit(ctx, tx, sp.Tenant, sp.ID, g, now, rule)
			switch {
			case errors.Is(err, store.ErrNotFound):
				errs[i] = fmt.Errorf("sqlitestore: settle: %w", classify(err))
			case err != nil:
				return err
			case !st.changed:
				errs[i] = fmt.Errorf("sqlitestore: settle: %w", classify(st.ferr))
				results[i] = &store.TransitionResult{Proposal: st.p, From: st.p.Status}
			default:
				results[i] = &store.TransitionResult{Proposal: st.p, From: st.from, Changed: true}
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sqlitestore: settle many: %w", classify(err))
	}
	return results, errs, nil
}
