package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// selectEmailLinkSQL reads one link with its approver's spend.
const selectEmailLinkSQL = `SELECT l.token_sha256, l.tenant, l.proposal_id, l.actor, l.verdict, l.notification_id,
	l.created_at, l.expires_at, l.sent_at, l.retired_at, s.token_sha256, s.verdict, s.spent_at
	FROM email_links l LEFT JOIN email_link_spends s
	ON s.tenant = l.tenant AND s.proposal_id = l.proposal_id AND s.actor = l.actor
	WHERE l.token_sha256 = ? AND l.tenant = ?`

// listEmailLinksSQL reads a proposal's links with their approvers' spends,
// in store.EmailLinks's order; email_links_message serves the filter.
const listEmailLinksSQL = `SELECT l.token_sha256, l.tenant, l.proposal_id, l.actor, l.verdict, l.notification_id,
	l.created_at, l.expires_at, l.sent_at, l.retired_at, s.token_sha256, s.verdict, s.spent_at
	FROM email_links l LEFT JOIN email_link_spends s
	ON s.tenant = l.tenant AND s.proposal_id = l.proposal_id AND s.actor = l.actor
	WHERE l.tenant = ? AND l.proposal_id = ?
	ORDER BY l.actor, l.created_at, l.verdict, l.token_sha256`

func scanEmailLink(row scanner) (*store.EmailLink, error) {
	var (
		l                      store.EmailLink
		created, expires       int64
		sent, retired, spentAt sql.NullInt64
		spentBy, spentVerdict  sql.NullString
	)
	err := row.Scan(&l.TokenSHA256, &l.Tenant, &l.ProposalID, &l.Actor, &l.Verdict, &l.NotificationID,
		&created, &expires, &sent, &retired, &spentBy, &spentVerdict, &spentAt)
	if err != nil {
		return nil, err
	}
	l.CreatedAt, l.ExpiresAt = fromNanos(created), fromNanos(expires)
	if sent.Valid {
		l.SentAt = fromNanos(sent.Int64)
	}
	if retired.Valid {
		l.RetiredAt = fromNanos(retired.Int64)
	}
	if spentBy.Valid {
		l.Spend = &store.EmailLinkSpend{TokenSHA256: spentBy.String, Verdict: store.Verdict(spentVerdict.String), At: fromNanos(spentAt.Int64)}
	}
	return &l, nil
}

// IssueEmailLinks implements store.Store.
func (s *Store) IssueEmailLinks(ctx context.Context, params *store.IssueEmailLinksParams) (*store.IssueEmailLinksResult, error) {
	if err := store.ValidateIssueEmailLinks(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: issue email links: %w", err)
	}
	type row struct{ created, expires int64 }
	rows := make([]row, len(params.Links))
	for i, l := range params.Links {
		var err error
		if rows[i].created, err = nanos("created_at", l.CreatedAt); err != nil {
			return nil, fmt.Errorf("sqlitestore: issue email links: %w", err)
		}
		if rows[i].expires, err = nanos("expires_at", l.ExpiresAt); err != nil {
			return nil, fmt.Errorf("sqlitestore: issue email links: %w", err)
		}
	}
	first := params.Links[0]
	var res *store.IssueEmailLinksResult
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		res = &store.IssueEmailLinksResult{}
		var sent int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM email_links
			WHERE tenant = ? AND proposal_id = ? AND actor = ? AND notification_id = ? AND sent_at IS NOT NULL`,
			first.Tenant, first.ProposalID, first.Actor, first.NotificationID).Scan(&sent)
		if err != nil {
			return err
		}
		if sent > 0 {
			res.AlreadySent = true
			return nil
		}
		// A spent link is never retired: the spend is final, and the
		// approver's other links are spent with it anyway.
		r, err := tx.ExecContext(ctx, `UPDATE email_links SET retired_at = ?
			WHERE tenant = ? AND proposal_id = ? AND actor = ? AND notification_id = ? AND retired_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM email_link_spends s
				WHERE s.tenant = email_links.tenant AND s.proposal_id = email_links.proposal_id AND s.actor = email_links.actor)`,
			now.UnixNano(), first.Tenant, first.ProposalID, first.Actor, first.NotificationID)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil {
			return err
		}
		res.Retired = int(n)
		for i, l := range params.Links {
			_, err := tx.ExecContext(ctx, `INSERT INTO email_links (token_sha256, tenant, proposal_id, actor, verdict,
				notification_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				l.TokenSHA256, l.Tenant, l.ProposalID, l.Actor, string(l.Verdict), l.NotificationID, rows[i].created, rows[i].expires)
			if _, dup := uniqueViolation(err); dup {
				return fmt.Errorf("%w: token exists", store.ErrInvalidParams)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: issue email links: %w", classify(err))
	}
	return res, nil
}

// MarkEmailLinksSent implements store.Store.
func (s *Store) MarkEmailLinksSent(ctx context.Context, params *store.MarkEmailLinksSentParams) error {
	if err := store.ValidateMarkEmailLinksSent(params); err != nil {
		return fmt.Errorf("sqlitestore: mark email links sent: %w", err)
	}
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		for _, h := range params.TokenSHA256s {
			_, err := tx.ExecContext(ctx, `UPDATE email_links SET sent_at = ?
				WHERE token_sha256 = ? AND tenant = ? AND sent_at IS NULL`, now.UnixNano(), h, params.Tenant)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: mark email links sent: %w", classify(err))
	}
	return nil
}

// GetEmailLink implements store.Store.
func (s *Store) GetEmailLink(ctx context.Context, params *store.GetEmailLinkParams) (*store.EmailLink, error) {
	if err := store.CheckEmailLinkKey(params.Tenant, params.TokenSHA256); err != nil {
		return nil, fmt.Errorf("sqlitestore: get email link: %w", err)
	}
	l, err := scanEmailLink(s.rq.QueryRowContext(ctx, selectEmailLinkSQL, params.TokenSHA256, params.Tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: get email link: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get email link: %w", classify(err))
	}
	return l, nil
}

// SpendEmailLink implements store.Store. Writes are serialized on the
// file, so the read and the insert of one spend see no other spend between
// them; the spends table's key would refuse a second one all the same.
func (s *Store) SpendEmailLink(ctx context.Context, params *store.SpendEmailLinkParams) (*store.EmailLink, error) {
	if err := store.CheckEmailLinkKey(params.Tenant, params.TokenSHA256); err != nil {
		return nil, fmt.Errorf("sqlitestore: spend email link: %w", err)
	}
	var spent *store.EmailLink
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		l, err := scanEmailLink(tx.QueryRowContext(ctx, selectEmailLinkSQL, params.TokenSHA256, params.Tenant))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := store.NotLive(l, now); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO email_link_spends (tenant, proposal_id, actor, token_sha256, verdict, spent_at)
			VALUES (?, ?, ?, ?, ?, ?)`, l.Tenant, l.ProposalID, l.Actor, l.TokenSHA256, string(l.Verdict), now.UnixNano())
		if err != nil {
			return err
		}
		l.Spend = &store.EmailLinkSpend{TokenSHA256: l.TokenSHA256, Verdict: l.Verdict, At: fromNanos(now.UnixNano())}
		spent = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: spend email link: %w", classify(err))
	}
	return spent, nil
}

// ListEmailLinks implements store.Store.
func (s *Store) ListEmailLinks(ctx context.Context, params *store.ListEmailLinksParams) ([]*store.EmailLink, error) {
	out, err := queryAll(ctx, &s.rq, scanEmailLink, listEmailLinksSQL, params.Tenant, params.ProposalID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list email links: %w", classify(err))
	}
	return out, nil
}
