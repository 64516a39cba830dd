package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// The events_notify trigger (migration 0007) writes the notifications in
// the statement that appends their events; this file claims, records,
// lists and retries them, each in one statement.

const notificationColumns = `id, tenant, target, event_id, event_type, proposal_id, at, status, attempts,
	next_attempt_at, last_error, payload, lease_token, updated_at`

// claimNotificationsSQL picks the due rows earliest first, skipping rows
// another claim holds, and leases each under a token of its own. The next
// attempt is an application deadline ($1); lease expiry is judged by the
// database's clock, as for proposals. The picked rows are reached through
// the primary key (the ANY), as the proposals' claim does: under a backlog
// the generic plan would otherwise hash the whole table to join them
// (TestClaimPlanUnderBacklog). Parameters: application now, owner, lease
// microseconds, limit, targets.
const claimNotificationsSQL = `WITH pick AS (
	SELECT id FROM _S_.notifications
	WHERE status = 'pending' AND next_attempt_at <= $1
	AND (lease_token IS NULL OR lease_expires_at <= statement_timestamp())
	AND target = ANY($5::text[])
	ORDER BY next_attempt_at, id
	LIMIT $4
	FOR UPDATE SKIP LOCKED
)
UPDATE _S_.notifications n SET
	attempts = n.attempts + 1,
	lease_owner = $2,
	lease_token = replace(gen_random_uuid()::text, '-', ''),
	lease_expires_at = statement_timestamp() + $3::bigint * interval '1 microsecond',
	updated_at = $1
FROM pick WHERE n.id = pick.id AND n.id = ANY (ARRAY(SELECT id FROM pick))
RETURNING n.id, n.tenant, n.target, n.event_id, n.event_type, n.proposal_id, n.at, n.status, n.attempts,
	n.next_attempt_at, n.last_error, n.payload, n.lease_token, n.updated_at`

// recordDeliverySQL is store.ApplyDelivery in SQL, guarded by the status
// and the lease token. Parameters: tenant, id, token, result, next attempt
// (for a retry), error, payload, application now.
const recordDeliverySQL = `UPDATE _S_.notifications SET
	status = CASE $4::text WHEN 'delivered' THEN 'delivered' WHEN 'failed' THEN 'failed' ELSE 'pending' END,
	next_attempt_at = CASE WHEN $4::text = 'retry' THEN $5 ELSE next_attempt_at END,
	last_error = CASE WHEN $4::text = 'delivered' THEN '' ELSE $6 END,
	payload = COALESCE(payload, $7),
	lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
	updated_at = $8
WHERE tenant = $1 AND id = $2 AND status = 'pending' AND lease_token = $3
RETURNING ` + notificationColumns

func scanNotification(row pgx.Row) (*store.OutboxEntry, error) {
	var (
		e                 store.OutboxEntry
		eventType, status string
		token             *string
	)
	if err := row.Scan(&e.ID, &e.Tenant, &e.Target, &e.EventID, &eventType, &e.ProposalID, &e.At, &status, &e.Attempts,
		&e.NextAttemptAt, &e.LastError, &e.Payload, &token, &e.UpdatedAt); err != nil {
		return nil, err
	}
	e.EventType, e.Status = store.EventType(eventType), store.NotificationStatus(status)
	if token != nil {
		e.LeaseToken = *token
	}
	e.At, e.NextAttemptAt, e.UpdatedAt = e.At.UTC(), e.NextAttemptAt.UTC(), e.UpdatedAt.UTC()
	return &e, nil
}

func (s *Store) queryNotifications(ctx context.Context, query string, args ...any) ([]*store.OutboxEntry, error) {
	return queryAll(ctx, s.pool, scanNotification, qualify(s.q.schema, query), args...)
}

// notificationStatus reads a notification's status, to tell a refused
// write's reason: ErrNotFound or the status it is in.
func (s *Store) notificationStatus(ctx context.Context, tenant, id string) (store.NotificationStatus, error) {
	var status string
	err := s.pool.QueryRow(ctx, qualify(s.q.schema, `SELECT status FROM _S_.notifications WHERE tenant = $1 AND id = $2`), tenant, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("notification %s: %w", id, store.ErrNotFound)
	}
	return store.NotificationStatus(status), err
}

// SetNotificationTargets implements store.Store, in one transaction. The
// events_notify trigger is enabled while there are targets and disabled
// while there are none (it costs a statement trigger's firing on every
// event otherwise); the state is changed only when it differs, so that a
// process starting with the same targets takes no lock on events.
func (s *Store) SetNotificationTargets(ctx context.Context, params *store.SetNotificationTargetsParams) error {
	if err := store.ValidateNotificationTargets(params); err != nil {
		return wrap("set notification targets", err)
	}
	var names, types []string
	for _, t := range params.Targets {
		for _, e := range t.Events {
			names, types = append(names, t.Name), append(types, string(e))
		}
	}
	want := "DISABLE"
	if len(names) > 0 {
		want = "ENABLE"
	}
	for range maxAttempts {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, qualify(s.q.schema, `DELETE FROM _S_.notification_targets`)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, qualify(s.q.schema, `INSERT INTO _S_.notification_targets (target, event_type)
				SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING`), names, types); err != nil {
				return err
			}
			var enabled bool
			if err := tx.QueryRow(ctx, `SELECT tgenabled <> 'D' FROM pg_trigger
				WHERE tgrelid = $1::regclass AND tgname = 'events_notify'`, s.q.schema+".events").Scan(&enabled); err != nil {
				return err
			}
			if enabled == (want == "ENABLE") {
				return nil
			}
			_, err := tx.Exec(ctx, qualify(s.q.schema, `ALTER TABLE _S_.events `+want+` TRIGGER events_notify`))
			return err
		})
		if !retryable(err) {
			return wrap("set notification targets", err)
		}
	}
	return wrap("set notification targets", fmt.Errorf("gave up after %d serialization failures", maxAttempts))
}

// ClaimNotifications implements store.Store.
func (s *Store) ClaimNotifications(ctx context.Context, params *store.ClaimNotificationsParams) ([]*store.OutboxEntry, error) {
	if err := store.ValidateClaimNotifications(params); err != nil {
		return nil, wrap("claim notifications", err)
	}
	out, err := s.queryNotifications(ctx, claimNotificationsSQL, s.clock(), params.Owner,
		params.LeaseDuration.Microseconds(), params.Limit, params.Targets)
	if err != nil {
		return nil, wrap("claim notifications", err)
	}
	return out, nil
}

// RecordDelivery implements store.Store: one guarded statement, and a read
// of the status only when it changed nothing.
func (s *Store) RecordDelivery(ctx context.Context, params *store.RecordDeliveryParams) (*store.OutboxEntry, error) {
	if err := store.ValidateRecordDelivery(params); err != nil {
		return nil, wrap("record delivery", err)
	}
	now := s.clock()
	out, err := s.queryNotifications(ctx, recordDeliverySQL, params.Tenant, params.ID, params.LeaseToken,
		string(params.Result), dbTime(now.Add(params.RetryAfter)), params.Error, params.Payload, now)
	if err != nil {
		return nil, wrap("record delivery", err)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	status, err := s.notificationStatus(ctx, params.Tenant, params.ID)
	if err != nil {
		return nil, wrap("record delivery", err)
	}
	return nil, fmt.Errorf("pgstore: %w", store.DeliveryConflict(params.ID, status))
}

// ListNotifications implements store.Store, newest event first.
func (s *Store) ListNotifications(ctx context.Context, params *store.ListNotificationsParams) ([]*store.OutboxEntry, error) {
	limit, err := store.ValidateListNotifications(params)
	if err != nil {
		return nil, wrap("list notifications", err)
	}
	out, err := s.queryNotifications(ctx, `SELECT `+notificationColumns+` FROM _S_.notifications
		WHERE tenant = $1 AND ($2 = '' OR status = $2)
		ORDER BY event_id DESC, target DESC LIMIT $3`, params.Tenant, string(params.Status), limit)
	if err != nil {
		return nil, wrap("list notifications", err)
	}
	for _, e := range out {
		e.LeaseToken = "" // a listing hands no one the fence
	}
	return out, nil
}

// RetryNotification implements store.Store.
func (s *Store) RetryNotification(ctx context.Context, params *store.RetryNotificationParams) (*store.OutboxEntry, error) {
	now := s.clock()
	out, err := s.queryNotifications(ctx, `UPDATE _S_.notifications SET status = 'pending', attempts = 0,
			next_attempt_at = $3, lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = $3
		WHERE tenant = $1 AND id = $2 AND status = 'failed'
		RETURNING `+notificationColumns, params.Tenant, params.ID, now)
	if err != nil {
		return nil, wrap("retry notification", err)
	}
	if len(out) == 1 {
		return out[0], nil
	}
	status, err := s.notificationStatus(ctx, params.Tenant, params.ID)
	if err != nil {
		return nil, wrap("retry notification", err)
	}
	return nil, fmt.Errorf("pgstore: %w", store.RetryConflict(params.ID, status))
}
