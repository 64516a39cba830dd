package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// passkeyEvent writes a passkey's audit event: it belongs to no proposal
// (proposal_id ”), so feeds of proposals pass it over, and nothing is
// announced.
func passkeyEvent(ctx context.Context, tx *wtx, p *store.Passkey, typ store.EventType, detail, via string, at time.Time) error {
	n, err := nanos("event.at", at)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO events (tenant, proposal_id, type, actor, actor_kind, via, status, detail, at)
		VALUES (?, '', ?, ?, 'human', ?, '', ?, ?)`, p.Tenant, string(typ), p.Actor, via, detail, n)
	if err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	return nil
}

// CreatePasskeyEnrollment implements store.Store.
func (s *Store) CreatePasskeyEnrollment(ctx context.Context, params *store.CreatePasskeyEnrollmentParams) error {
	e := params.Enrollment
	if err := store.ValidatePasskeyEnrollment(e); err != nil {
		return fmt.Errorf("sqlitestore: create passkey enrollment: %w", classify(err))
	}
	created, err := nanos("created_at", e.CreatedAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey enrollment: %w", classify(err))
	}
	expires, err := nanos("expires_at", e.ExpiresAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey enrollment: %w", classify(err))
	}
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM passkey_enrollments WHERE tenant = ? AND actor = ? AND (spent_at IS NOT NULL OR expires_at <= ?)`,
			e.Tenant, e.Actor, created); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO passkey_enrollments (hash, tenant, actor, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
			e.Hash, e.Tenant, e.Actor, e.CreatedBy, created, expires)
		if _, dup := uniqueViolation(err); dup {
			return fmt.Errorf("%w: hash exists", store.ErrInvalidParams)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey enrollment: %w", classify(err))
	}
	return nil
}

// GetPasskeyEnrollment implements store.Store.
func (s *Store) GetPasskeyEnrollment(ctx context.Context, params *store.GetPasskeyEnrollmentParams) (*store.PasskeyEnrollment, error) {
	var (
		e                store.PasskeyEnrollment
		created, expires int64
		spent            sql.NullInt64
	)
	err := s.rq.QueryRowContext(ctx, `SELECT hash, tenant, actor, created_by, created_at, expires_at, spent_at FROM passkey_enrollments WHERE hash = ?`,
		params.Hash).Scan(&e.Hash, &e.Tenant, &e.Actor, &e.CreatedBy, &created, &expires, &spent)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: get passkey enrollment: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get passkey enrollment: %w", classify(err))
	}
	e.CreatedAt, e.ExpiresAt, e.SpentAt = fromNanos(created), fromNanos(expires), fromNullNanos(spent)
	return &e, nil
}

// CreatePasskey implements store.Store.
func (s *Store) CreatePasskey(ctx context.Context, params *store.CreatePasskeyParams) error {
	if err := store.ValidatePasskey(params); err != nil {
		return fmt.Errorf("sqlitestore: create passkey: %w", classify(err))
	}
	p := params.Passkey
	created, err := nanos("created_at", p.CreatedAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey: %w", classify(err))
	}
	used, err := nullNanos("last_used_at", p.LastUsedAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey: %w", classify(err))
	}
	now, err := nanos("now", params.Now)
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey: %w", classify(err))
	}
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		typ := store.EventPasskeyAdded
		if params.EnrollmentHash != "" {
			// The guard is the spend: a link spent, expired or someone
			// else's changes no row, and nothing is stored.
			res, err := tx.ExecContext(ctx, `UPDATE passkey_enrollments SET spent_at = ?
				WHERE hash = ? AND tenant = ? AND actor = ? AND spent_at IS NULL AND expires_at > ?`,
				now, params.EnrollmentHash, p.Tenant, p.Actor, now)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return errors.Join(fmt.Errorf("enrollment: %w", store.ErrNotFound), err)
			}
			typ = store.EventPasskeyEnrolled
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO passkeys (id, tenant, actor, name, credential, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.ID, p.Tenant, p.Actor, p.Name, p.Credential, created, used)
		if _, dup := uniqueViolation(err); dup {
			return fmt.Errorf("%w: credential id exists", store.ErrInvalidParams)
		}
		if err != nil {
			return err
		}
		return passkeyEvent(ctx, tx, p, typ, store.PasskeyEventDetail(p), params.Via, params.Now)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey: %w", classify(err))
	}
	return nil
}

// ListPasskeys implements store.Store.
func (s *Store) ListPasskeys(ctx context.Context, params *store.ListPasskeysParams) ([]*store.Passkey, error) {
	out, err := queryAll(ctx, &s.rq, scanPasskey, `SELECT id, tenant, actor, name, credential, created_at, last_used_at FROM passkeys
		WHERE tenant = ? AND actor = ? ORDER BY created_at, id`, params.Tenant, params.Actor)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list passkeys: %w", classify(err))
	}
	return out, nil
}

// scanPasskey reads a row of id, tenant, actor, name, credential,
// created_at, last_used_at.
func scanPasskey(row scanner) (*store.Passkey, error) {
	var (
		p       store.Passkey
		created int64
		used    sql.NullInt64
	)
	if err := row.Scan(&p.ID, &p.Tenant, &p.Actor, &p.Name, &p.Credential, &created, &used); err != nil {
		return nil, err
	}
	p.CreatedAt, p.LastUsedAt = fromNanos(created), fromNullNanos(used)
	return &p, nil
}

// UpdatePasskey implements store.Store.
func (s *Store) UpdatePasskey(ctx context.Context, params *store.UpdatePasskeyParams) error {
	if len(params.Credential) == 0 || params.UsedAt.IsZero() {
		return fmt.Errorf("sqlitestore: update passkey: %w: credential record and time required", store.ErrInvalidParams)
	}
	used, err := nanos("used_at", params.UsedAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: update passkey: %w", classify(err))
	}
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		res, err := tx.ExecContext(ctx, `UPDATE passkeys SET credential = ?, last_used_at = ? WHERE id = ? AND tenant = ? AND actor = ?`,
			params.Credential, used, params.ID, params.Tenant, params.Actor)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(store.ErrNotFound, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: update passkey: %w", classify(err))
	}
	return nil
}

// DeletePasskey implements store.Store.
func (s *Store) DeletePasskey(ctx context.Context, params *store.DeletePasskeyParams) error {
	if params.Now.IsZero() {
		return fmt.Errorf("sqlitestore: delete passkey: %w: time required", store.ErrInvalidParams)
	}
	err := s.write(ctx, func(tx *wtx, _ time.Time) error {
		p := store.Passkey{Tenant: params.Tenant, Actor: params.Actor, ID: params.ID}
		err := tx.QueryRowContext(ctx, `DELETE FROM passkeys WHERE id = ? AND tenant = ? AND actor = ? RETURNING name`,
			params.ID, params.Tenant, params.Actor).Scan(&p.Name)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		return passkeyEvent(ctx, tx, &p, store.EventPasskeyRemoved, store.PasskeyEventDetail(&p), params.Via, params.Now)
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: delete passkey: %w", classify(err))
	}
	return nil
}

// CreatePasskeyChallenge implements store.Store.
func (s *Store) CreatePasskeyChallenge(ctx context.Context, params *store.CreatePasskeyChallengeParams) error {
	c := params.Challenge
	if err := store.ValidatePasskeyChallenge(c); err != nil {
		return fmt.Errorf("sqlitestore: create passkey challenge: %w", classify(err))
	}
	created, err := nanos("created_at", c.CreatedAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey challenge: %w", classify(err))
	}
	expires, err := nanos("expires_at", c.ExpiresAt)
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey challenge: %w", classify(err))
	}
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM passkey_challenges WHERE tenant = ? AND actor = ? AND expires_at <= ?`,
			c.Tenant, c.Actor, created); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO passkey_challenges
			(hash, tenant, actor, purpose, proposal_id, input_digest, enrollment_hash, session, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.Hash, c.Tenant, c.Actor, c.Purpose, c.ProposalID, c.InputDigest, c.EnrollmentHash, c.Session, created, expires)
		if _, dup := uniqueViolation(err); dup {
			return fmt.Errorf("%w: hash exists", store.ErrInvalidParams)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: create passkey challenge: %w", classify(err))
	}
	return nil
}

// SpendPasskeyChallenge implements store.Store: one DELETE guarded by every
// binding, so that of concurrent spends one removes the row.
func (s *Store) SpendPasskeyChallenge(ctx context.Context, params *store.SpendPasskeyChallengeParams) (*store.PasskeyChallenge, error) {
	now, err := nanos("now", params.Now)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: spend passkey challenge: %w", classify(err))
	}
	var c store.PasskeyChallenge
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		var created, expires int64
		err := tx.QueryRowContext(ctx, `DELETE FROM passkey_challenges
			WHERE hash = ? AND tenant = ? AND actor = ? AND purpose = ? AND proposal_id = ? AND input_digest = ? AND expires_at > ?
			RETURNING hash, tenant, actor, purpose, proposal_id, input_digest, enrollment_hash, session, created_at, expires_at`,
			params.Hash, params.Tenant, params.Actor, params.Purpose, params.ProposalID, params.InputDigest, now).
			Scan(&c.Hash, &c.Tenant, &c.Actor, &c.Purpose, &c.ProposalID, &c.InputDigest, &c.EnrollmentHash, &c.Session, &created, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		c.CreatedAt, c.ExpiresAt = fromNanos(created), fromNanos(expires)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: spend passkey challenge: %w", classify(err))
	}
	return &c, nil
}
