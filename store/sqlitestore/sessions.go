package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

const sessionColumns = `id, tenant, actor, roles, credential_sha256, revocable, csrf, created_at, expires_at`

// CreateSession implements store.Store.
func (s *Store) CreateSession(ctx context.Context, params *store.CreateSessionParams) error {
	sess := params.Session
	if err := store.ValidateSession(sess); err != nil {
		return fmt.Errorf("sqlitestore: create session: %w", classify(err))
	}
	created, err := nanos("created_at", sess.CreatedAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: create session: %w", classify(err))
	}
	expires, err := nanos("expires_at", sess.ExpiresAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: create session: %w", classify(err))
	}
	roles, err := jsonList(sess.Roles)
	if err != nil {
		return fmt.Errorf("sqlitestore: create session: roles: %w", classify(err))
	}
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sess.ID, sess.Tenant, sess.Actor, roles, sess.CredentialSHA256, sess.Revocable, sess.CSRF, created, expires)
		if _, dup := uniqueViolation(err); dup {
			return fmt.Errorf("%w: id exists", store.ErrInvalidParams)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: create session: %w", classify(err))
	}
	return nil
}

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, params *store.GetSessionParams) (*store.Session, error) {
	sess, err := scanSession(s.rq.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, params.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: get session: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get session: %w", classify(err))
	}
	return sess, nil
}

// GetSessions implements store.Store: the IDs go as one JSON array, read
// with json_each, whose whole elements IN compares.
func (s *Store) GetSessions(ctx context.Context, params *store.GetSessionsParams) ([]*store.Session, error) {
	if err := store.ValidateGetSessions(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: get sessions: %w", err)
	}
	if len(params.IDs) == 0 {
		return nil, nil
	}
	ids, err := jsonList(params.IDs)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get sessions: %w", classify(err))
	}
	out, err := queryAll(ctx, &s.rq, scanSession, `SELECT `+sessionColumns+` FROM sessions WHERE id IN (SELECT value FROM json_each(?))`, ids)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get sessions: %w", classify(err))
	}
	return out, nil
}

// scanSession reads one row of sessionColumns.
func scanSession(row scanner) (*store.Session, error) {
	var (
		sess             store.Session
		roles            sql.NullString
		created, expires int64
	)
	if err := row.Scan(&sess.ID, &sess.Tenant, &sess.Actor, &roles, &sess.CredentialSHA256, &sess.Revocable, &sess.CSRF, &created, &expires); err != nil {
		return nil, err
	}
	var err error
	if sess.Roles, err = fromJSONList[string](roles); err != nil {
		return nil, fmt.Errorf("roles: %w", err)
	}
	sess.CreatedAt, sess.ExpiresAt = fromNanos(created), fromNanos(expires)
	return &sess, nil
}

// DeleteSession implements store.Store.
func (s *Store) DeleteSession(ctx context.Context, params *store.DeleteSessionParams) error {
	err := s.write(ctx, func(tx *wtx, _ time.Time) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, params.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: delete session: %w", classify(err))
	}
	return nil
}

// DeleteExpiredSessions implements store.Store, the longest expired first.
func (s *Store) DeleteExpiredSessions(ctx context.Context, params *store.DeleteExpiredSessionsParams) (int, error) {
	if err := store.ValidateDeleteExpiredSessions(params); err != nil {
		return 0, fmt.Errorf("sqlitestore: delete expired sessions: %w", classify(err))
	}
	before, err := nanos("before", params.Before)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: delete expired sessions: %w", classify(err))
	}
	var n int64
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id IN
			(SELECT id FROM sessions WHERE expires_at <= ? ORDER BY expires_at, id LIMIT ?)`, before, params.Limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: delete expired sessions: %w", classify(err))
	}
	return int(n), nil
}
