package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// The Slack announcements (store/slack.go). Each write reads the row and
// writes it in one write transaction: SQLite has one writer, so the read
// and the compare-and-set cannot interleave with another's.

const slackColumns = `tenant, proposal_id, actor, slack_user, channel, ts, nonce, nonce_version, prev_nonce, post_token, post_until, created_at, updated_at`

func scanSlack(row scanner) (*store.SlackAnnouncement, error) {
	var (
		a                store.SlackAnnouncement
		token            sql.NullString
		until            sql.NullInt64
		created, updated int64
	)
	if err := row.Scan(&a.Tenant, &a.ProposalID, &a.Actor, &a.SlackUser, &a.Channel, &a.TS, &a.Nonce, &a.NonceVersion,
		&a.PrevNonce, &token, &until, &created, &updated); err != nil {
		return nil, err
	}
	a.PostToken = token.String
	if until.Valid {
		a.PostUntil = fromNanos(until.Int64)
	}
	a.CreatedAt, a.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &a, nil
}

// slackIn reads an announcement in a write transaction; nil when none.
func slackIn(ctx context.Context, tx *wtx, tenant, proposal, actor string) (*store.SlackAnnouncement, error) {
	a, err := scanSlack(tx.QueryRowContext(ctx, `SELECT `+slackColumns+` FROM slack_announcements
		WHERE tenant = ? AND proposal_id = ? AND actor = ?`, tenant, proposal, actor))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return a, err
}

// putSlack writes a whole announcement, inserting or replacing it.
func putSlack(ctx context.Context, tx *wtx, a *store.SlackAnnouncement) error {
	var (
		token any
		until any
	)
	if a.PostToken != "" {
		token = a.PostToken
		n, err := nanos("post_until", a.PostUntil)
		if err != nil {
			return err
		}
		until = n
	}
	created, err := nanos("created_at", a.CreatedAt)
	if err != nil {
		return err
	}
	updated, err := nanos("updated_at", a.UpdatedAt)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT OR REPLACE INTO slack_announcements (`+slackColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.Tenant, a.ProposalID, a.Actor, a.SlackUser, a.Channel, a.TS, a.Nonce, a.NonceVersion, a.PrevNonce, token, until, created, updated)
	return err
}

// ClaimSlackPost implements store.Store.
func (s *Store) ClaimSlackPost(ctx context.Context, params *store.ClaimSlackPostParams) (*store.SlackPostClaim, error) {
	if err := store.ValidateClaimSlackPost(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: claim slack post: %w", err)
	}
	var out *store.SlackPostClaim
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		stored, err := slackIn(ctx, tx, params.Tenant, params.ProposalID, params.Actor)
		if err != nil {
			return err
		}
		next, claimed := store.ApplySlackClaim(stored, params, now)
		if !claimed {
			out = &store.SlackPostClaim{Announcement: stored}
			return nil
		}
		if err := putSlack(ctx, tx, next); err != nil {
			return err
		}
		out = &store.SlackPostClaim{Announcement: next, Claimed: true}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim slack post: %w", classify(err))
	}
	// Times come back as the table holds them.
	out.Announcement = roundTripSlack(out.Announcement)
	return out, nil
}

// roundTripSlack gives a written announcement's times the form a read
// gives them (UTC, nanoseconds).
func roundTripSlack(a *store.SlackAnnouncement) *store.SlackAnnouncement {
	c := a.Clone()
	c.CreatedAt, c.UpdatedAt = fromNanos(c.CreatedAt.UnixNano()), fromNanos(c.UpdatedAt.UnixNano())
	if !c.PostUntil.IsZero() {
		c.PostUntil = fromNanos(c.PostUntil.UnixNano())
	}
	return c
}

// RecordSlackPost implements store.Store.
func (s *Store) RecordSlackPost(ctx context.Context, params *store.RecordSlackPostParams) (*store.SlackAnnouncement, error) {
	if err := store.ValidateRecordSlackPost(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: record slack post: %w", err)
	}
	var out *store.SlackAnnouncement
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		a, err := slackIn(ctx, tx, params.Tenant, params.ProposalID, params.Actor)
		switch {
		case err != nil:
			return err
		case a == nil:
			return store.ErrNotFound
		case a.Posted() || a.PostToken != params.Token:
			return store.SlackPostConflict(params.ProposalID, params.Actor)
		}
		a.Channel, a.TS, a.PostToken, a.PostUntil, a.UpdatedAt = params.Channel, params.TS, "", time.Time{}, now
		out = a
		return putSlack(ctx, tx, a)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: record slack post: %w", classify(err))
	}
	return roundTripSlack(out), nil
}

// RotateSlackNonce implements store.Store.
func (s *Store) RotateSlackNonce(ctx context.Context, params *store.RotateSlackNonceParams) (*store.SlackAnnouncement, error) {
	if err := store.ValidateRotateSlackNonce(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: rotate slack nonce: %w", err)
	}
	var out *store.SlackAnnouncement
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		a, err := slackIn(ctx, tx, params.Tenant, params.ProposalID, params.Actor)
		switch {
		case err != nil:
			return err
		case a == nil:
			return store.ErrNotFound
		case a.Nonce != params.From || a.NonceVersion > params.NonceVersion:
			return store.SlackNonceConflict(params.ProposalID, params.Actor)
		}
		a.PrevNonce, a.Nonce, a.NonceVersion, a.UpdatedAt = a.Nonce, params.Nonce, params.NonceVersion, now
		out = a
		return putSlack(ctx, tx, a)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: rotate slack nonce: %w", classify(err))
	}
	return roundTripSlack(out), nil
}

// RetireSlackNonce implements store.Store.
func (s *Store) RetireSlackNonce(ctx context.Context, params *store.RetireSlackNonceParams) error {
	if err := store.ValidateRetireSlackNonce(params); err != nil {
		return fmt.Errorf("sqlitestore: retire slack nonce: %w", err)
	}
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		stamp, err := nanos("updated_at", now)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE slack_announcements SET prev_nonce = '', updated_at = ?
			WHERE tenant = ? AND proposal_id = ? AND actor = ? AND nonce = ? AND prev_nonce <> ''`,
			stamp, params.Tenant, params.ProposalID, params.Actor, params.Nonce)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		a, err := slackIn(ctx, tx, params.Tenant, params.ProposalID, params.Actor)
		if err == nil && a == nil {
			return store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: retire slack nonce: %w", classify(err))
	}
	return nil
}

// GetSlackAnnouncement implements store.Store.
func (s *Store) GetSlackAnnouncement(ctx context.Context, params *store.GetSlackAnnouncementParams) (*store.SlackAnnouncement, error) {
	a, err := scanSlack(s.rq.QueryRowContext(ctx, `SELECT `+slackColumns+` FROM slack_announcements
		WHERE tenant = ? AND proposal_id = ? AND actor = ?`, params.Tenant, params.ProposalID, params.Actor))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: get slack announcement: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get slack announcement: %w", classify(err))
	}
	return a, nil
}

// ListSlackAnnouncements implements store.Store.
func (s *Store) ListSlackAnnouncements(ctx context.Context, params *store.ListSlackAnnouncementsParams) ([]*store.SlackAnnouncement, error) {
	out, err := queryAll(ctx, &s.rq, scanSlack, `SELECT `+slackColumns+` FROM slack_announcements
		WHERE tenant = ? AND proposal_id = ? ORDER BY actor`, params.Tenant, params.ProposalID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list slack announcements: %w", classify(err))
	}
	return out, nil
}
