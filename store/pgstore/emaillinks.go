package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// The email link statements; qualify puts the store's schema in.
const (
	// selectEmailLinkSQL reads one link with its approver's spend.
	selectEmailLinkSQL = `SELECT l.token_sha256, l.tenant, l.proposal_id, l.actor, l.verdict, l.notification_id,
		l.created_at, l.expires_at, l.sent_at, l.retired_at, s.token_sha256, s.verdict, s.spent_at
		FROM _S_.email_links l LEFT JOIN _S_.email_link_spends s
		ON s.tenant = l.tenant AND s.proposal_id = l.proposal_id AND s.actor = l.actor
		WHERE l.token_sha256 = $1 AND l.tenant = $2`
	// listEmailLinksSQL reads a proposal's links with their approvers'
	// spends, in store.EmailLinks's order; email_links_message serves the
	// filter.
	listEmailLinksSQL = `SELECT l.token_sha256, l.tenant, l.proposal_id, l.actor, l.verdict, l.notification_id,
		l.created_at, l.expires_at, l.sent_at, l.retired_at, s.token_sha256, s.verdict, s.spent_at
		FROM _S_.email_links l LEFT JOIN _S_.email_link_spends s
		ON s.tenant = l.tenant AND s.proposal_id = l.proposal_id AND s.actor = l.actor
		WHERE l.tenant = $1 AND l.proposal_id = $2
		ORDER BY l.actor, l.created_at, l.verdict, l.token_sha256`
	emailLinksSentSQL = `SELECT EXISTS (SELECT 1 FROM _S_.email_links
		WHERE tenant = $1 AND proposal_id = $2 AND actor = $3 AND notification_id = $4 AND sent_at IS NOT NULL)`
	// A spent link is never retired: the spend is final, and the
	// approver's other links are spent with it anyway.
	retireEmailLinksSQL = `UPDATE _S_.email_links l SET retired_at = $5
		WHERE l.tenant = $1 AND l.proposal_id = $2 AND l.actor = $3 AND l.notification_id = $4 AND l.retired_at IS NULL
		AND NOT EXISTS (SELECT 1 FROM _S_.email_link_spends s
			WHERE s.tenant = l.tenant AND s.proposal_id = l.proposal_id AND s.actor = l.actor)`
	insertEmailLinkSQL = `INSERT INTO _S_.email_links (token_sha256, tenant, proposal_id, actor, verdict,
		notification_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	markEmailLinksSentSQL = `UPDATE _S_.email_links SET sent_at = $3
		WHERE token_sha256 = ANY($1) AND tenant = $2 AND sent_at IS NULL`
	// Of concurrent inserts for one approver and proposal, in any
	// process, one inserts and the others wait for it, then do nothing.
	insertEmailLinkSpendSQL = `INSERT INTO _S_.email_link_spends (tenant, proposal_id, actor, token_sha256, verdict, spent_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`
)

func scanEmailLink(row pgx.Row) (*store.EmailLink, error) {
	var (
		l                      store.EmailLink
		verdict                string
		sent, retired, spentAt *time.Time
		spentBy, spentVerdict  *string
	)
	err := row.Scan(&l.TokenSHA256, &l.Tenant, &l.ProposalID, &l.Actor, &verdict, &l.NotificationID,
		&l.CreatedAt, &l.ExpiresAt, &sent, &retired, &spentBy, &spentVerdict, &spentAt)
	if err != nil {
		return nil, err
	}
	l.Verdict = store.Verdict(verdict)
	l.CreatedAt, l.ExpiresAt = l.CreatedAt.UTC(), l.ExpiresAt.UTC()
	if sent != nil {
		l.SentAt = sent.UTC()
	}
	if retired != nil {
		l.RetiredAt = retired.UTC()
	}
	if spentBy != nil {
		l.Spend = &store.EmailLinkSpend{TokenSHA256: *spentBy, Verdict: store.Verdict(*spentVerdict), At: spentAt.UTC()}
	}
	return &l, nil
}

// IssueEmailLinks implements store.Store.
func (s *Store) IssueEmailLinks(ctx context.Context, params *store.IssueEmailLinksParams) (*store.IssueEmailLinksResult, error) {
	if err := store.ValidateIssueEmailLinks(params); err != nil {
		return nil, wrap("issue email links", err)
	}
	first := params.Links[0]
	now := s.clock()
	var res *store.IssueEmailLinksResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = &store.IssueEmailLinksResult{}
		var sent bool
		err := tx.QueryRow(ctx, qualify(s.q.schema, emailLinksSentSQL), first.Tenant, first.ProposalID, first.Actor, first.NotificationID).Scan(&sent)
		if err != nil || sent {
			res.AlreadySent = sent
			return err
		}
		ct, err := tx.Exec(ctx, qualify(s.q.schema, retireEmailLinksSQL), first.Tenant, first.ProposalID, first.Actor, first.NotificationID, now)
		if err != nil {
			return err
		}
		res.Retired = int(ct.RowsAffected())
		for _, l := range params.Links {
			_, err := tx.Exec(ctx, qualify(s.q.schema, insertEmailLinkSQL), l.TokenSHA256, l.Tenant, l.ProposalID, l.Actor,
				string(l.Verdict), l.NotificationID, dbTime(l.CreatedAt), dbTime(l.ExpiresAt))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("issue email links", err)
	}
	return res, nil
}

// MarkEmailLinksSent implements store.Store.
func (s *Store) MarkEmailLinksSent(ctx context.Context, params *store.MarkEmailLinksSentParams) error {
	if err := store.ValidateMarkEmailLinksSent(params); err != nil {
		return wrap("mark email links sent", err)
	}
	_, err := s.pool.Exec(ctx, qualify(s.q.schema, markEmailLinksSentSQL), params.TokenSHA256s, params.Tenant, s.clock())
	return wrap("mark email links sent", err)
}

// GetEmailLink implements store.Store.
func (s *Store) GetEmailLink(ctx context.Context, params *store.GetEmailLinkParams) (*store.EmailLink, error) {
	if err := store.CheckEmailLinkKey(params.Tenant, params.TokenSHA256); err != nil {
		return nil, wrap("get email link", err)
	}
	l, err := scanEmailLink(s.pool.QueryRow(ctx, qualify(s.q.schema, selectEmailLinkSQL), params.TokenSHA256, params.Tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("get email link", store.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get email link", err)
	}
	return l, nil
}

// SpendEmailLink implements store.Store: the spends table's key is the
// arbiter, so of concurrent spends of one approver's links exactly one
// inserts its row; a loser reads the winner's spend back.
func (s *Store) SpendEmailLink(ctx context.Context, params *store.SpendEmailLinkParams) (*store.EmailLink, error) {
	if err := store.CheckEmailLinkKey(params.Tenant, params.TokenSHA256); err != nil {
		return nil, wrap("spend email link", err)
	}
	now := s.clock()
	var spent *store.EmailLink
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		l, err := scanEmailLink(tx.QueryRow(ctx, qualify(s.q.schema, selectEmailLinkSQL), params.TokenSHA256, params.Tenant))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := store.NotLive(l, now); err != nil {
			return err
		}
		ct, err := tx.Exec(ctx, qualify(s.q.schema, insertEmailLinkSpendSQL), l.Tenant, l.ProposalID, l.Actor, l.TokenSHA256, string(l.Verdict), now)
		if err != nil {
			return err
		}
		if ct.RowsAffected() == 0 {
			// Another spend committed between the read and the insert:
			// read the link again, with it (a new statement sees it).
			if l, err = scanEmailLink(tx.QueryRow(ctx, qualify(s.q.schema, selectEmailLinkSQL), params.TokenSHA256, params.Tenant)); err != nil {
				return err
			}
			if err := store.NotLive(l, now); err != nil {
				return err
			}
			return errors.New("email link spend refused, yet no spend found")
		}
		l.Spend = &store.EmailLinkSpend{TokenSHA256: l.TokenSHA256, Verdict: l.Verdict, At: now}
		spent = l
		return nil
	})
	if err != nil {
		return nil, wrap("spend email link", err)
	}
	return spent, nil
}

// ListEmailLinks implements store.Store.
func (s *Store) ListEmailLinks(ctx context.Context, params *store.ListEmailLinksParams) ([]*store.EmailLink, error) {
	out, err := queryAll(ctx, s.pool, scanEmailLink, qualify(s.q.schema, listEmailLinksSQL), params.Tenant, params.ProposalID)
	if err != nil {
		return nil, wrap("list email links", err)
	}
	return out, nil
}
