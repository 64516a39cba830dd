package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

const sessionColumns = `id, tenant, actor, roles, credential_sha256, revocable, csrf, created_at, expires_at`

// The session statements; qualify puts the store's schema in.
const (
	insertSessionSQL = `INSERT INTO _S_.sessions (` + sessionColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	getSessionSQL    = `SELECT ` + sessionColumns + ` FROM _S_.sessions WHERE id = $1`
	getSessionsSQL   = `SELECT ` + sessionColumns + ` FROM _S_.sessions WHERE id = ANY ($1)`
	deleteSessionSQL = `DELETE FROM _S_.sessions WHERE id = $1`
	// The oldest expired first; SKIP LOCKED lets concurrent sweeps share
	// the work instead of queueing on the same rows.
	// The picked ids go as an array (= ANY), so that the rows are found
	// through the primary key: with IN, the generic plan of a large
	// backlog hashed the whole table (TestClaimPlanUnderBacklog).
	deleteExpiredSessionsSQL = `DELETE FROM _S_.sessions WHERE id = ANY (ARRAY(
		SELECT id FROM _S_.sessions WHERE expires_at <= $1 ORDER BY expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED))`
)

// CreateSession implements store.Store.
func (s *Store) CreateSession(ctx context.Context, params *store.CreateSessionParams) error {
	sess := params.Session
	if err := store.ValidateSession(sess); err != nil {
		return wrap("create session", err)
	}
	_, err := s.pool.Exec(ctx, qualify(s.q.schema, insertSessionSQL),
		sess.ID, sess.Tenant, sess.Actor, sess.Roles, sess.CredentialSHA256, sess.Revocable, sess.CSRF, sess.CreatedAt, sess.ExpiresAt)
	return wrap("create session", err)
}

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, params *store.GetSessionParams) (*store.Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, qualify(s.q.schema, getSessionSQL), params.ID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("get session", store.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get session", err)
	}
	return sess, nil
}

// GetSessions implements store.Store.
func (s *Store) GetSessions(ctx context.Context, params *store.GetSessionsParams) ([]*store.Session, error) {
	if err := store.ValidateGetSessions(params); err != nil {
		return nil, wrap("get sessions", err)
	}
	if len(params.IDs) == 0 {
		return nil, nil
	}
	out, err := queryAll(ctx, s.pool, scanSession, qualify(s.q.schema, getSessionsSQL), params.IDs)
	if err != nil {
		return nil, wrap("get sessions", err)
	}
	return out, nil
}

// scanSession reads one row of sessionColumns.
func scanSession(row pgx.Row) (*store.Session, error) {
	var sess store.Session
	if err := row.Scan(&sess.ID, &sess.Tenant, &sess.Actor, &sess.Roles, &sess.CredentialSHA256, &sess.Revocable, &sess.CSRF, &sess.CreatedAt, &sess.ExpiresAt); err != nil {
		return nil, err
	}
	sess.CreatedAt, sess.ExpiresAt = sess.CreatedAt.UTC(), sess.ExpiresAt.UTC()
	return &sess, nil
}

// DeleteSession implements store.Store.
func (s *Store) DeleteSession(ctx context.Context, params *store.DeleteSessionParams) error {
	_, err := s.pool.Exec(ctx, qualify(s.q.schema, deleteSessionSQL), params.ID)
	return wrap("delete session", err)
}

// DeleteExpiredSessions implements store.Store.
func (s *Store) DeleteExpiredSessions(ctx context.Context, params *store.DeleteExpiredSessionsParams) (int, error) {
	if err := store.ValidateDeleteExpiredSessions(params); err != nil {
		return 0, wrap("delete expired sessions", err)
	}
	ct, err := s.pool.Exec(ctx, qualify(s.q.schema, deleteExpiredSessionsSQL), params.Before, params.Limit)
	if err != nil {
		return 0, wrap("delete expired sessions", err)
	}
	return int(ct.RowsAffected()), nil
}
