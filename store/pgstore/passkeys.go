package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// The passkey statements; qualify puts the store's schema in.
const (
	// The actor's spent and expired links go with each new one.
	createPasskeyEnrollmentSQL = `WITH gone AS (
		DELETE FROM _S_.passkey_enrollments WHERE tenant = $2 AND actor = $3 AND (spent_at IS NOT NULL OR expires_at <= $5))
	INSERT INTO _S_.passkey_enrollments (hash, tenant, actor, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`
	getPasskeyEnrollmentSQL = `SELECT hash, tenant, actor, created_by, created_at, expires_at, spent_at
		FROM _S_.passkey_enrollments WHERE hash = $1`
	// One statement: the link is spent (when one is named), the passkey
	// stored only if it was, and its event written. $8 is '' for no link:
	// no row has that hash.
	createPasskeySQL = `WITH spent AS (
		UPDATE _S_.passkey_enrollments SET spent_at = $9
		WHERE hash = $8 AND tenant = $2 AND actor = $3 AND spent_at IS NULL AND expires_at > $9
		RETURNING hash),
	ins AS (
		INSERT INTO _S_.passkeys (id, tenant, actor, name, credential, created_at, last_used_at)
		SELECT $1::text, $2::text, $3::text, $4::text, $5::bytea, $6::timestamptz, $7::timestamptz WHERE $8::text = '' OR EXISTS (SELECT 1 FROM spent)
		RETURNING id),
	ev AS (
		INSERT INTO _S_.events (tenant, proposal_id, type, actor, actor_kind, via, status, detail, at)
		SELECT $2::text, '', $10::text, $3::text, 'human', $11::text, '', $12::text, $9::timestamptz FROM ins)
	SELECT count(*) FROM ins`
	listPasskeysSQL = `SELECT id, tenant, actor, name, credential, created_at, last_used_at FROM _S_.passkeys
		WHERE tenant = $1 AND actor = $2 ORDER BY created_at, id`
	updatePasskeySQL = `UPDATE _S_.passkeys SET credential = $4, last_used_at = $5 WHERE id = $1 AND tenant = $2 AND actor = $3`
	deletePasskeySQL = `WITH gone AS (
		DELETE FROM _S_.passkeys WHERE id = $1 AND tenant = $2 AND actor = $3 RETURNING id, name),
	ev AS (
		INSERT INTO _S_.events (tenant, proposal_id, type, actor, actor_kind, via, status, detail, at)
		SELECT $2::text, '', $4::text, $3::text, 'human', $5::text, '', 'passkey ' || id || ' (' || name || ')', $6::timestamptz FROM gone)
	SELECT count(*) FROM gone`
	createPasskeyChallengeSQL = `WITH gone AS (
		DELETE FROM _S_.passkey_challenges WHERE tenant = $2 AND actor = $3 AND expires_at <= $9)
	INSERT INTO _S_.passkey_challenges
		(hash, tenant, actor, purpose, proposal_id, input_digest, enrollment_hash, session, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	// The DELETE is the spend: of concurrent spends, one removes the row.
	spendPasskeyChallengeSQL = `DELETE FROM _S_.passkey_challenges
		WHERE hash = $1 AND tenant = $2 AND actor = $3 AND purpose = $4 AND proposal_id = $5 AND input_digest = $6 AND expires_at > $7
		RETURNING hash, tenant, actor, purpose, proposal_id, input_digest, enrollment_hash, session, created_at, expires_at`
)

// CreatePasskeyEnrollment implements store.Store.
func (s *Store) CreatePasskeyEnrollment(ctx context.Context, params *store.CreatePasskeyEnrollmentParams) error {
	e := params.Enrollment
	if err := store.ValidatePasskeyEnrollment(e); err != nil {
		return wrap("create passkey enrollment", err)
	}
	_, err := s.pool.Exec(ctx, qualify(s.q.schema, createPasskeyEnrollmentSQL), e.Hash, e.Tenant, e.Actor, e.CreatedBy, e.CreatedAt, e.ExpiresAt)
	return wrap("create passkey enrollment", err)
}

// GetPasskeyEnrollment implements store.Store.
func (s *Store) GetPasskeyEnrollment(ctx context.Context, params *store.GetPasskeyEnrollmentParams) (*store.PasskeyEnrollment, error) {
	var e store.PasskeyEnrollment
	err := s.pool.QueryRow(ctx, qualify(s.q.schema, getPasskeyEnrollmentSQL), params.Hash).Scan(
		&e.Hash, &e.Tenant, &e.Actor, &e.CreatedBy, &e.CreatedAt, &e.ExpiresAt, &e.SpentAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("get passkey enrollment", store.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get passkey enrollment", err)
	}
	e.CreatedAt, e.ExpiresAt, e.SpentAt = e.CreatedAt.UTC(), e.ExpiresAt.UTC(), utcPtr(e.SpentAt)
	return &e, nil
}

// CreatePasskey implements store.Store.
func (s *Store) CreatePasskey(ctx context.Context, params *store.CreatePasskeyParams) error {
	if err := store.ValidatePasskey(params); err != nil {
		return wrap("create passkey", err)
	}
	p := params.Passkey
	typ := store.EventPasskeyAdded
	if params.EnrollmentHash != "" {
		typ = store.EventPasskeyEnrolled
	}
	var n int
	err := s.pool.QueryRow(ctx, qualify(s.q.schema, createPasskeySQL),
		p.ID, p.Tenant, p.Actor, p.Name, p.Credential, p.CreatedAt, p.LastUsedAt, params.EnrollmentHash, params.Now,
		string(typ), params.Via, store.PasskeyEventDetail(p)).Scan(&n)
	if err != nil {
		return wrap("create passkey", err)
	}
	if n == 0 {
		return wrap("create passkey", fmt.Errorf("enrollment: %w", store.ErrNotFound))
	}
	return nil
}

// ListPasskeys implements store.Store.
func (s *Store) ListPasskeys(ctx context.Context, params *store.ListPasskeysParams) ([]*store.Passkey, error) {
	rows, err := s.pool.Query(ctx, qualify(s.q.schema, listPasskeysSQL), params.Tenant, params.Actor)
	if err != nil {
		return nil, wrap("list passkeys", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Passkey, error) {
		var p store.Passkey
		if err := row.Scan(&p.ID, &p.Tenant, &p.Actor, &p.Name, &p.Credential, &p.CreatedAt, &p.LastUsedAt); err != nil {
			return nil, err
		}
		p.CreatedAt, p.LastUsedAt = p.CreatedAt.UTC(), utcPtr(p.LastUsedAt)
		return &p, nil
	})
	if err != nil {
		return nil, wrap("list passkeys", err)
	}
	return out, nil
}

// UpdatePasskey implements store.Store.
func (s *Store) UpdatePasskey(ctx context.Context, params *store.UpdatePasskeyParams) error {
	if len(params.Credential) == 0 || params.UsedAt.IsZero() {
		return wrap("update passkey", fmt.Errorf("%w: credential record and time required", store.ErrInvalidParams))
	}
	ct, err := s.pool.Exec(ctx, qualify(s.q.schema, updatePasskeySQL), params.ID, params.Tenant, params.Actor, params.Credential, params.UsedAt)
	if err != nil {
		return wrap("update passkey", err)
	}
	if ct.RowsAffected() == 0 {
		return wrap("update passkey", store.ErrNotFound)
	}
	return nil
}

// DeletePasskey implements store.Store.
func (s *Store) DeletePasskey(ctx context.Context, params *store.DeletePasskeyParams) error {
	if params.Now.IsZero() {
		return wrap("delete passkey", fmt.Errorf("%w: time required", store.ErrInvalidParams))
	}
	var n int
	err := s.pool.QueryRow(ctx, qualify(s.q.schema, deletePasskeySQL), params.ID, params.Tenant, params.Actor,
		string(store.EventPasskeyRemoved), params.Via, params.Now).Scan(&n)
	if err != nil {
		return wrap("delete passkey", err)
	}
	if n == 0 {
		return wrap("delete passkey", store.ErrNotFound)
	}
	return nil
}

// CreatePasskeyChallenge implements store.Store.
func (s *Store) CreatePasskeyChallenge(ctx context.Context, params *store.CreatePasskeyChallengeParams) error {
	c := params.Challenge
	if err := store.ValidatePasskeyChallenge(c); err != nil {
		return wrap("create passkey challenge", err)
	}
	_, err := s.pool.Exec(ctx, qualify(s.q.schema, createPasskeyChallengeSQL),
		c.Hash, c.Tenant, c.Actor, c.Purpose, c.ProposalID, c.InputDigest, c.EnrollmentHash, c.Session, c.CreatedAt, c.ExpiresAt)
	return wrap("create passkey challenge", err)
}

// SpendPasskeyChallenge implements store.Store.
func (s *Store) SpendPasskeyChallenge(ctx context.Context, params *store.SpendPasskeyChallengeParams) (*store.PasskeyChallenge, error) {
	var c store.PasskeyChallenge
	err := s.pool.QueryRow(ctx, qualify(s.q.schema, spendPasskeyChallengeSQL),
		params.Hash, params.Tenant, params.Actor, params.Purpose, params.ProposalID, params.InputDigest, params.Now).Scan(
		&c.Hash, &c.Tenant, &c.Actor, &c.Purpose, &c.ProposalID, &c.InputDigest, &c.EnrollmentHash, &c.Session, &c.CreatedAt, &c.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("spend passkey challenge", store.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("spend passkey challenge", err)
	}
	c.CreatedAt, c.ExpiresAt = c.CreatedAt.UTC(), c.ExpiresAt.UTC()
	return &c, nil
}
