package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// insertGrant stores g, inactive, as a side effect of p's decision. The
// driver owns the tenant, origin, creation time and activation.
func insertGrant(ctx context.Context, tx *wtx, p *store.Proposal, g *store.Grant, now time.Time) error {
	id := g.ID
	if id == "" {
		id = "grt_" + store.NewToken()
	}
	expires, err := nullNanos("grant.expires_at", g.ExpiresAt)
	if err != nil {
		return err
	}
	revoked, err := nullNanos("grant.revoked_at", g.RevokedAt)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO grants (`+grantColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)`,
		id, p.Tenant, g.Requester, string(g.Scope), g.ThreadID, g.RunID, g.Action, g.ActionVersion,
		g.InputDigest, p.ID, g.GrantedBy, now.UnixNano(), expires, revoked, g.RevokedBy, g.RuleFingerprint)
	if _, ok := uniqueViolation(err); ok {
		return fmt.Errorf("%w: grant id %s exists", store.ErrInvalidParams, id)
	}
	return err
}

// getGrant reads one grant of a tenant, or ErrNotFound.
func getGrant(ctx context.Context, q querier, tenant, id string) (*store.Grant, error) {
	g, err := scanGrant(q.QueryRowContext(ctx, `SELECT `+grantColumns+` FROM grants WHERE tenant = ? AND id = ?`, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("grant %s: %w", id, store.ErrNotFound)
	}
	return g, err
}

// queryGrants reads every grant a query selects.
func queryGrants(ctx context.Context, q querier, query string, args ...any) ([]*store.Grant, error) {
	return queryAll(ctx, q, scanGrant, query, args...)
}

// FindGrant implements store.Store. Of several live matches, the newest wins.
func (s *Store) FindGrant(ctx context.Context, params *store.FindGrantParams) (*store.Grant, error) {
	g, err := findGrant(ctx, &s.rq, params, s.clock())
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: find grant: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: find grant: %w", classify(err))
	}
	return g, nil
}

// findGrantSQL is store.Grant.Live and store.GrantMatches, in SQL: a thread
// grant covers its thread, a run grant its thread's run; an empty digest any
// input; only a call under the same rule. Of several live matches, the
// newest wins.
const findGrantSQL = `SELECT ` + grantColumns + ` FROM grants WHERE ` + findGrantWhere

// findGrantWhere chooses the grant of findGrantSQL; its arguments are
// findGrantArgs. The call's lookup (lookup.go) asks for the grant's seq
// with it.
const findGrantWhere = `tenant = ? AND requester = ? AND action = ? AND action_version = ? AND thread_id = ?
		AND rule_fingerprint = ?
		AND (input_digest = '' OR input_digest = ?)
		AND (scope = 'thread' OR (scope = 'run' AND run_id = ?))
		AND activated_at IS NOT NULL AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)
		ORDER BY seq DESC LIMIT 1`

// findGrantArgs are findGrantWhere's arguments: params, live at now.
func findGrantArgs(params *store.FindGrantParams, now time.Time) []any {
	return []any{params.Tenant, params.Requester, params.Action, params.ActionVersion, params.ThreadID,
		params.RuleFingerprint, params.InputDigest, params.RunID, now.UnixNano()}
}

// findGrant reads the grant FindGrant returns, live at now; sql.ErrNoRows
// when none is.
func findGrant(ctx context.Context, q querier, params *store.FindGrantParams, now time.Time) (*store.Grant, error) {
	return scanGrant(q.QueryRowContext(ctx, findGrantSQL, findGrantArgs(params, now)...))
}

// ListGrants implements store.Store.
func (s *Store) ListGrants(ctx context.Context, params *store.ListGrantsParams) ([]*store.Grant, error) {
	query := `SELECT ` + grantColumns + ` FROM grants WHERE tenant = ?`
	args := []any{params.Tenant}
	if params.Requester != "" {
		query += ` AND requester = ?`
		args = append(args, params.Requester)
	}
	if params.ThreadID != "" {
		query += ` AND thread_id = ?`
		args = append(args, params.ThreadID)
	}
	gs, err := queryGrants(ctx, &s.rq, query+` ORDER BY seq DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list grants: %w", classify(err))
	}
	return gs, nil
}

// RevokeGrant implements store.Store. The first revocation stands: a second
// one changes neither the time nor the actor.
func (s *Store) RevokeGrant(ctx context.Context, params *store.RevokeGrantParams) (*store.Grant, error) {
	var g *store.Grant
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		_, err := tx.ExecContext(ctx, `UPDATE grants SET revoked_at = ?, revoked_by = ?
			WHERE tenant = ? AND id = ? AND revoked_at IS NULL`,
			now.UnixNano(), params.Actor, params.Tenant, params.ID)
		if err != nil {
			return err
		}
		g, err = getGrant(ctx, tx, params.Tenant, params.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: revoke grant: %w", classify(err))
	}
	return g, nil
}
