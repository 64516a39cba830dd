package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// The Slack announcements (store/slack.go). A claim inserts the new row or,
// when one is stored, locks it and applies store.ApplySlackClaim in the
// same transaction; a record and a rotation are single guarded updates.
// Times are the application's clock, as the conformance suite's fake clock
// moves them.

const slackColumns = `tenant, proposal_id, actor, slack_user, channel, ts, nonce, nonce_version, prev_nonce, post_token, post_until, created_at, updated_at`

const (
	insertSlackSQL = `INSERT INTO _S_.slack_announcements (` + slackColumns + `)
		VALUES ($1, $2, $3, $4, '', '', $5, $6, '', $7, $8, $9, $9)
		ON CONFLICT (tenant, proposal_id, actor) DO NOTHING
		RETURNING ` + slackColumns
	lockSlackSQL = `SELECT ` + slackColumns + ` FROM _S_.slack_announcements
		WHERE tenant = $1 AND proposal_id = $2 AND actor = $3 FOR UPDATE`
	takeOverSlackSQL = `UPDATE _S_.slack_announcements SET
		slack_user = $4, prev_nonce = '', nonce = $5, nonce_version = $6, post_token = $7, post_until = $8, updated_at = $9
		WHERE tenant = $1 AND proposal_id = $2 AND actor = $3
		RETURNING ` + slackColumns
	recordSlackSQL = `UPDATE _S_.slack_announcements SET
		channel = $5, ts = $6, post_token = NULL, post_until = NULL, updated_at = $7
		WHERE tenant = $1 AND proposal_id = $2 AND actor = $3 AND ts = '' AND post_token = $4
		RETURNING ` + slackColumns
	rotateSlackSQL = `UPDATE _S_.slack_announcements SET
		prev_nonce = nonce, nonce = $5, nonce_version = $6, updated_at = $7
		WHERE tenant = $1 AND proposal_id = $2 AND actor = $3 AND nonce = $4 AND nonce_version <= $6
		RETURNING ` + slackColumns
	retireSlackSQL = `UPDATE _S_.slack_announcements SET prev_nonce = '', updated_at = $5
		WHERE tenant = $1 AND proposal_id = $2 AND actor = $3 AND nonce = $4 AND prev_nonce <> ''`
	getSlackSQL = `SELECT ` + slackColumns + ` FROM _S_.slack_announcements
		WHERE tenant = $1 AND proposal_id = $2 AND actor = $3`
	listSlackSQL = `SELECT ` + slackColumns + ` FROM _S_.slack_announcements
		WHERE tenant = $1 AND proposal_id = $2 ORDER BY actor`
)

func scanSlack(row pgx.Row) (*store.SlackAnnouncement, error) {
	var (
		a     store.SlackAnnouncement
		token *string
		until *time.Time
	)
	if err := row.Scan(&a.Tenant, &a.ProposalID, &a.Actor, &a.SlackUser, &a.Channel, &a.TS, &a.Nonce, &a.NonceVersion,
		&a.PrevNonce, &token, &until, &a.CreatedAt, &a.UpdatedAt); err != nil {
		return nil, err
	}
	if token != nil {
		a.PostToken = *token
	}
	if until != nil {
		a.PostUntil = until.UTC()
	}
	a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return &a, nil
}

// ClaimSlackPost implements store.Store.
func (s *Store) ClaimSlackPost(ctx context.Context, params *store.ClaimSlackPostParams) (*store.SlackPostClaim, error) {
	if err := store.ValidateClaimSlackPost(params); err != nil {
		return nil, wrap("claim slack post", err)
	}
	now := s.clock()
	var out *store.SlackPostClaim
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		a, err := scanSlack(tx.QueryRow(ctx, qualify(s.q.schema, insertSlackSQL), params.Tenant, params.ProposalID, params.Actor,
			params.SlackUser, params.Nonce, params.NonceVersion, params.Token, now.Add(params.LeaseDuration), now))
		if err == nil {
			out = &store.SlackPostClaim{Announcement: a, Claimed: true}
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// Stored already (the insert waited for a concurrent one to
		// commit): lock it and judge the claim.
		stored, err := scanSlack(tx.QueryRow(ctx, qualify(s.q.schema, lockSlackSQL), params.Tenant, params.ProposalID, params.Actor))
		if err != nil {
			return err
		}
		next, claimed := store.ApplySlackClaim(stored, params, now)
		if !claimed {
			out = &store.SlackPostClaim{Announcement: stored}
			return nil
		}
		a, err = scanSlack(tx.QueryRow(ctx, qualify(s.q.schema, takeOverSlackSQL), params.Tenant, params.ProposalID, params.Actor,
			next.SlackUser, next.Nonce, next.NonceVersion, next.PostToken, next.PostUntil, next.UpdatedAt))
		if err != nil {
			return err
		}
		out = &store.SlackPostClaim{Announcement: a, Claimed: true}
		return nil
	})
	if err != nil {
		return nil, wrap("claim slack post", err)
	}
	return out, nil
}

// slackRefusal tells why a guarded update changed nothing: the
// announcement is not stored, or conflict.
func (s *Store) slackRefusal(ctx context.Context, tenant, proposal, actor string, conflict error) error {
	_, err := s.GetSlackAnnouncement(ctx, &store.GetSlackAnnouncementParams{Tenant: tenant, ProposalID: proposal, Actor: actor})
	if err != nil {
		return err
	}
	return conflict
}

// RecordSlackPost implements store.Store.
func (s *Store) RecordSlackPost(ctx context.Context, params *store.RecordSlackPostParams) (*store.SlackAnnouncement, error) {
	if err := store.ValidateRecordSlackPost(params); err != nil {
		return nil, wrap("record slack post", err)
	}
	a, err := scanSlack(s.pool.QueryRow(ctx, qualify(s.q.schema, recordSlackSQL), params.Tenant, params.ProposalID, params.Actor,
		params.Token, params.Channel, params.TS, s.clock()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("record slack post", s.slackRefusal(ctx, params.Tenant, params.ProposalID, params.Actor,
			store.SlackPostConflict(params.ProposalID, params.Actor)))
	}
	if err != nil {
		return nil, wrap("record slack post", err)
	}
	return a, nil
}

// RotateSlackNonce implements store.Store.
func (s *Store) RotateSlackNonce(ctx context.Context, params *store.RotateSlackNonceParams) (*store.SlackAnnouncement, error) {
	if err := store.ValidateRotateSlackNonce(params); err != nil {
		return nil, wrap("rotate slack nonce", err)
	}
	a, err := scanSlack(s.pool.QueryRow(ctx, qualify(s.q.schema, rotateSlackSQL), params.Tenant, params.ProposalID, params.Actor,
		params.From, params.Nonce, params.NonceVersion, s.clock()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("rotate slack nonce", s.slackRefusal(ctx, params.Tenant, params.ProposalID, params.Actor,
			store.SlackNonceConflict(params.ProposalID, params.Actor)))
	}
	if err != nil {
		return nil, wrap("rotate slack nonce", err)
	}
	return a, nil
}

// RetireSlackNonce implements store.Store.
func (s *Store) RetireSlackNonce(ctx context.Context, params *store.RetireSlackNonceParams) error {
	if err := store.ValidateRetireSlackNonce(params); err != nil {
		return wrap("retire slack nonce", err)
	}
	ct, err := s.pool.Exec(ctx, qualify(s.q.schema, retireSlackSQL), params.Tenant, params.ProposalID, params.Actor, params.Nonce, s.clock())
	if err != nil {
		return wrap("retire slack nonce", err)
	}
	if ct.RowsAffected() == 1 {
		return nil
	}
	_, err = s.GetSlackAnnouncement(ctx, &store.GetSlackAnnouncementParams{Tenant: params.Tenant, ProposalID: params.ProposalID, Actor: params.Actor})
	return err
}

// GetSlackAnnouncement implements store.Store.
func (s *Store) GetSlackAnnouncement(ctx context.Context, params *store.GetSlackAnnouncementParams) (*store.SlackAnnouncement, error) {
	a, err := scanSlack(s.pool.QueryRow(ctx, qualify(s.q.schema, getSlackSQL), params.Tenant, params.ProposalID, params.Actor))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("get slack announcement", store.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get slack announcement", err)
	}
	return a, nil
}

// ListSlackAnnouncements implements store.Store.
func (s *Store) ListSlackAnnouncements(ctx context.Context, params *store.ListSlackAnnouncementsParams) ([]*store.SlackAnnouncement, error) {
	out, err := queryAll(ctx, s.pool, scanSlack, qualify(s.q.schema, listSlackSQL), params.Tenant, params.ProposalID)
	if err != nil {
		return nil, wrap("list slack announcements", err)
	}
	return out, nil
}
