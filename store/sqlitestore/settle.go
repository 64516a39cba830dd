package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// settleRowSQL writes the columns a settlement changes, guarded by the
// version the row was read at. Only these columns are named, so SQLite
// leaves every index that holds none of them alone (the full-row update
// rewrote all of the row's index entries). TestSettleManyMatchesSettle
// holds the result to Settle's full-row write.
const settleRowSQL = `UPDATE proposals SET status = ?, lease_owner = ?, lease_token = ?, lease_generation = ?,
	lease_expires_at = ?, next_attempt_at = ?, outcome = ?, version = ?, updated_at = ?
	WHERE id = ? AND version = ?`

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
			st, err := transit(ctx, tx, sp.Tenant, sp.ID, g, now, rule, settleRow)
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

// settleRow is applyRow for a settlement: it writes only the columns a
// settlement changes, then the change.
func settleRow(ctx context.Context, tx *wtx, p *store.Proposal, old int64, c *store.Change, now time.Time) error {
	store.Finish(p, now)
	if c.Grant != nil {
		// ApplySettle never stores a grant; persistChange would, but the
		// row's columns then need applyRow.
		return fmt.Errorf("settle %s: a settlement cannot store a grant", p.ID)
	}
	var leaseOwner, leaseToken, leaseGen, leaseExp any
	if l := p.Lease; l != nil {
		exp, err := nanos("lease.expires_at", l.ExpiresAt)
		if err != nil {
			return fmt.Errorf("encode proposal %s: lease: %w", p.ID, err)
		}
		leaseOwner, leaseToken, leaseGen, leaseExp = l.Owner, l.Token, l.Generation, exp
	}
	next, err := nullNanos("next_attempt_at", p.NextAttemptAt)
	if err != nil {
		return fmt.Errorf("encode proposal %s: next_attempt_at: %w", p.ID, err)
	}
	outcome, err := encodeOutcome(p.Outcome)
	if err != nil {
		return fmt.Errorf("encode proposal %s: outcome: %w", p.ID, err)
	}
	updated, err := nanos("updated_at", p.UpdatedAt)
	if err != nil {
		return fmt.Errorf("encode proposal %s: updated_at: %w", p.ID, err)
	}
	res, err := tx.ExecContext(ctx, settleRowSQL, string(p.Status), leaseOwner, leaseToken, leaseGen, leaseExp,
		next, outcome, p.Version, updated, p.ID, old)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return rowMoved(p.ID, old)
	}
	return persistChange(ctx, tx, p, c, now)
}
