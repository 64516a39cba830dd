package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// collectGrants reads every row of rows.
func collectGrants(rows pgx.Rows) ([]*store.Grant, error) {
	return collect(rows, scanGrant)
}

// FindGrant implements store.Store. Grant expiry is judged by the
// application's clock. Of several live matches, the newest wins.
func (s *Store) FindGrant(ctx context.Context, params *store.FindGrantParams) (*store.Grant, error) {
	g, err := scanGrant(s.pool.QueryRow(ctx, s.q.findGrant,
		params.Tenant, params.Requester, params.Action, params.ActionVersion, params.ThreadID,
		params.InputDigest, params.RunID, s.clock(), params.RuleFingerprint))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("find grant", store.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("find grant", err)
	}
	return g, nil
}

// ListGrants implements store.Store.
func (s *Store) ListGrants(ctx context.Context, params *store.ListGrantsParams) ([]*store.Grant, error) {
	query := s.q.listGrants
	args := []any{params.Tenant}
	if params.Requester != "" {
		args = append(args, params.Requester)
		query += fmt.Sprintf(` AND requester = $%d`, len(args))
	}
	if params.ThreadID != "" {
		args = append(args, params.ThreadID)
		query += fmt.Sprintf(` AND thread_id = $%d`, len(args))
	}
	rows, err := s.pool.Query(ctx, query+` ORDER BY seq DESC`, args...)
	if err != nil {
		return nil, wrap("list grants", err)
	}
	gs, err := collectGrants(rows)
	if err != nil {
		return nil, wrap("list grants", err)
	}
	return gs, nil
}

// RevokeGrant implements store.Store. The first revocation stands: a second
// one changes neither the time nor the actor.
func (s *Store) RevokeGrant(ctx context.Context, params *store.RevokeGrantParams) (*store.Grant, error) {
	var g *store.Grant
	err := s.batch(ctx, func(b *pgx.Batch) {
		g = nil
		b.Queue(s.q.revokeGrant, params.Tenant, params.ID, s.clock(), params.Actor)
		// A statement of its own, so that it sees the revocation that a
		// concurrent call committed while this one waited for the row.
		b.Queue(s.q.getGrant, params.Tenant, params.ID).QueryRow(func(row pgx.Row) error {
			var err error
			g, err = scanGrant(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("grant %s: %w", params.ID, store.ErrNotFound)
			}
			return err
		})
	})
	if err != nil {
		return nil, wrap("revoke grant", err)
	}
	return g, nil
}
