package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/store"
)

// The events_notify trigger (migration 0008) writes the notifications; this
// file claims, records, lists and retries them. Every time, leases
// included, is on the application's clock: the single writer judges them.

const notificationColumns = `id, tenant, target, event_id, event_type, proposal_id, at, status, attempts,
	next_attempt_at, last_error, payload, lease_token, updated_at`

func scanNotification(sc scanner) (*store.OutboxEntry, error) {
	var (
		e                 store.OutboxEntry
		at, next, updated int64
		token             sql.NullString
		eventType, status string
	)
	if err := sc.Scan(&e.ID, &e.Tenant, &e.Target, &e.EventID, &eventType, &e.ProposalID, &at, &status, &e.Attempts,
		&next, &e.LastError, &e.Payload, &token, &updated); err != nil {
		return nil, err
	}
	e.EventType, e.Status, e.LeaseToken = store.EventType(eventType), store.NotificationStatus(status), token.String
	e.At, e.NextAttemptAt, e.UpdatedAt = fromNanos(at), fromNanos(next), fromNanos(updated)
	return &e, nil
}

func queryNotifications(ctx context.Context, q querier, query string, args ...any) ([]*store.OutboxEntry, error) {
	return queryAll(ctx, q, scanNotification, query, args...)
}

func getNotification(ctx context.Context, q querier, tenant, id string) (*store.OutboxEntry, error) {
	e, err := scanNotification(q.QueryRowContext(ctx, `SELECT `+notificationColumns+` FROM notifications WHERE id = ? AND tenant = ?`, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("notification %s: %w", id, store.ErrNotFound)
	}
	return e, err
}

// SetNotificationTargets implements store.Store.
func (s *Store) SetNotificationTargets(ctx context.Context, params *store.SetNotificationTargetsParams) error {
	if err := store.ValidateNotificationTargets(params); err != nil {
		return fmt.Errorf("sqlitestore: set notification targets: %w", classify(err))
	}
	err := s.write(ctx, func(tx *wtx, _ time.Time) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM notification_targets`); err != nil {
			return err
		}
		for _, t := range params.Targets {
			for _, e := range t.Events {
				if _, err := tx.ExecContext(ctx, `INSERT INTO notification_targets (target, event_type) VALUES (?, ?)
					ON CONFLICT DO NOTHING`, t.Name, string(e)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: set notification targets: %w", classify(err))
	}
	return nil
}

// ClaimNotifications implements store.Store: one UPDATE … RETURNING under
// the single writer, so two claims never take the same row.
func (s *Store) ClaimNotifications(ctx context.Context, params *store.ClaimNotificationsParams) ([]*store.OutboxEntry, error) {
	if err := store.ValidateClaimNotifications(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: claim notifications: %w", classify(err))
	}
	if len(params.Targets) == 0 {
		return nil, nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(params.Targets)), ", ")
	var out []*store.OutboxEntry
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		n := now.UnixNano()
		args := []any{params.Owner, store.NewToken(), n + params.LeaseDuration.Nanoseconds(), n, n, n}
		for _, t := range params.Targets {
			args = append(args, t)
		}
		args = append(args, params.Limit)
		// One token for the whole claim: each row's fence is its token
		// and its status, and no two claims share a token.
		var err error
		out, err = queryNotifications(ctx, tx, `UPDATE notifications SET attempts = attempts + 1,
				lease_owner = ?, lease_token = ?, lease_expires_at = ?, updated_at = ?
			WHERE id IN (SELECT id FROM notifications
				WHERE status = 'pending' AND next_attempt_at <= ?
				AND (lease_token IS NULL OR lease_expires_at <= ?)
				AND target IN (`+marks+`)
				ORDER BY next_attempt_at, id LIMIT ?)
			RETURNING `+notificationColumns, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim notifications: %w", classify(err))
	}
	slices.SortFunc(out, func(a, b *store.OutboxEntry) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// RecordDelivery implements store.Store.
func (s *Store) RecordDelivery(ctx context.Context, params *store.RecordDeliveryParams) (*store.OutboxEntry, error) {
	if err := store.ValidateRecordDelivery(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: record delivery: %w", classify(err))
	}
	var out *store.OutboxEntry
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		e, err := getNotification(ctx, tx, params.Tenant, params.ID)
		if err != nil {
			return err
		}
		if e.Status != store.NotificationPending || e.LeaseToken != params.LeaseToken {
			return store.DeliveryConflict(e.ID, e.Status)
		}
		store.ApplyDelivery(e, params, now)
		_, err = tx.ExecContext(ctx, `UPDATE notifications SET status = ?, next_attempt_at = ?, last_error = ?, payload = ?,
				lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = ?
			WHERE id = ? AND lease_token = ?`,
			string(e.Status), e.NextAttemptAt.UnixNano(), e.LastError, e.Payload, now.UnixNano(), e.ID, params.LeaseToken)
		out = e
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: record delivery: %w", classify(err))
	}
	return out, nil
}

// ListNotifications implements store.Store, newest event first.
func (s *Store) ListNotifications(ctx context.Context, params *store.ListNotificationsParams) ([]*store.OutboxEntry, error) {
	limit, err := store.ValidateListNotifications(params)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list notifications: %w", classify(err))
	}
	q := `SELECT ` + notificationColumns + ` FROM notifications WHERE tenant = ?`
	args := []any{params.Tenant}
	if params.Status != "" {
		q += ` AND status = ?`
		args = append(args, string(params.Status))
	}
	out, err := queryNotifications(ctx, &s.rq, q+` ORDER BY event_id DESC, target DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list notifications: %w", classify(err))
	}
	for _, e := range out {
		e.LeaseToken = "" // a listing hands no one the fence
	}
	return out, nil
}

// RetryNotification implements store.Store.
func (s *Store) RetryNotification(ctx context.Context, params *store.RetryNotificationParams) (*store.OutboxEntry, error) {
	var out *store.OutboxEntry
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		e, err := getNotification(ctx, tx, params.Tenant, params.ID)
		if err != nil {
			return err
		}
		if e.Status != store.NotificationFailed {
			return store.RetryConflict(e.ID, e.Status)
		}
		e.Status, e.Attempts, e.NextAttemptAt, e.LeaseToken, e.UpdatedAt = store.NotificationPending, 0, now, "", now
		_, err = tx.ExecContext(ctx, `UPDATE notifications SET status = 'pending', attempts = 0, next_attempt_at = ?,
				lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = ?
			WHERE id = ? AND status = 'failed'`, now.UnixNano(), now.UnixNano(), e.ID)
		out = e
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: retry notification: %w", classify(err))
	}
	return out, nil
}
