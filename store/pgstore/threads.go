package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// EnsureThread implements store.Store.
func (s *Store) EnsureThread(ctx context.Context, params *store.EnsureThreadParams) (*store.Thread, error) {
	if params.Tenant == "" || params.ID == "" {
		return nil, wrap("ensure thread", fmt.Errorf("%w: tenant and id required", store.ErrInvalidParams))
	}
	var t *store.Thread
	err := s.batch(ctx, func(b *pgx.Batch) {
		t = &store.Thread{Tenant: params.Tenant, ID: params.ID}
		b.Queue(s.q.ensureThread, params.Tenant, params.ID, params.Owner, s.clock())
		// A statement of its own: it sees the row a concurrent creator
		// committed while this insert waited on it.
		b.Queue(s.q.getThread, params.Tenant, params.ID).QueryRow(func(row pgx.Row) error {
			return row.Scan(&t.Owner, &t.RunID, &t.CreatedAt)
		})
	})
	if err != nil {
		return nil, wrap("ensure thread", err)
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return t, nil
}

// GetThread implements store.Store.
func (s *Store) GetThread(ctx context.Context, params *store.GetThreadParams) (*store.Thread, error) {
	t := &store.Thread{Tenant: params.Tenant, ID: params.ID}
	err := s.pool.QueryRow(ctx, s.q.getThread, params.Tenant, params.ID).Scan(&t.Owner, &t.RunID, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap("get thread", fmt.Errorf("thread %s: %w", params.ID, store.ErrNotFound))
	}
	if err != nil {
		return nil, wrap("get thread", err)
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return t, nil
}

// DeleteThread implements store.Store. Its messages and runs go with it (the
// foreign keys cascade); its proposals stay, and outcomes they settle later are
// dropped.
func (s *Store) DeleteThread(ctx context.Context, params *store.GetThreadParams) error {
	ct, err := s.pool.Exec(ctx, s.q.deleteThread, params.Tenant, params.ID)
	if err != nil {
		return wrap("delete thread", err)
	}
	if ct.RowsAffected() == 0 {
		return wrap("delete thread", fmt.Errorf("thread %s: %w", params.ID, store.ErrNotFound))
	}
	return nil
}

// ListMessages implements store.Store.
func (s *Store) ListMessages(ctx context.Context, params *store.ListMessagesParams) ([]*store.Message, error) {
	rows, err := s.pool.Query(ctx, s.q.listMessages, params.Tenant, params.ThreadID)
	if err != nil {
		return nil, wrap("list messages", err)
	}
	defer rows.Close()
	var (
		out   []*store.Message
		found bool
	)
	for rows.Next() {
		found = true
		var (
			id, role, text, proposal *string
			outcome                  []byte
			created                  *time.Time
			sender, run, callID      *string
			calls, result            []byte
			decision                 *bool
		)
		if err := rows.Scan(&id, &role, &text, &proposal, &outcome, &created, &sender, &run, &calls, &callID, &result, &decision); err != nil {
			return nil, wrap("list messages", err)
		}
		if id == nil {
			continue // the thread has no messages
		}
		m := &store.Message{
			ID: *id, Tenant: params.Tenant, ThreadID: params.ThreadID, Role: *role,
			Text: *text, ProposalID: *proposal, CreatedAt: created.UTC(),
			Sender: *sender, RunID: *run, ToolCallID: *callID, Result: result, Decision: decision != nil && *decision,
		}
		if m.ToolCalls, err = decodeToolCalls(calls); err != nil {
			return nil, wrap("list messages", fmt.Errorf("message %s: %w", m.ID, err))
		}
		if m.Outcome, err = decodeOutcome(outcome); err != nil {
			return nil, wrap("list messages", fmt.Errorf("message %s: %w", m.ID, err))
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list messages", err)
	}
	if !found {
		return nil, wrap("list messages", fmt.Errorf("thread %s: %w", params.ThreadID, store.ErrNotFound))
	}
	return out, nil
}

// DefaultEventLimit is the page size of ListEvents when Limit is 0.
const DefaultEventLimit = 1000

// ListEvents implements store.Store. See the package documentation on
// following events as a stream across processes.
func (s *Store) ListEvents(ctx context.Context, params *store.ListEventsParams) ([]*store.Event, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = DefaultEventLimit
	}
	query := s.q.listEvents
	args := []any{params.Tenant, params.AfterID}
	if params.ProposalID != "" {
		args = append(args, params.ProposalID)
		query += ` AND proposal_id = $3`
	}
	args = append(args, limit)
	scan := func(row pgx.Row) (*store.Event, error) {
		e := &store.Event{Tenant: params.Tenant}
		var typ, status string
		if err := row.Scan(&e.ID, &e.ProposalID, &typ, &e.Actor, &e.ActorKind, &e.Via, &status, &e.Detail, &e.At); err != nil {
			return nil, err
		}
		e.Type, e.Status, e.At = store.EventType(typ), store.Status(status), e.At.UTC()
		return e, nil
	}
	out, err := queryAll(ctx, s.pool, scan, query+fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args)), args...)
	if err != nil {
		return nil, wrap("list events", err)
	}
	return out, nil
}

// LastEventID implements store.Store: one probe of events_tenant.
func (s *Store) LastEventID(ctx context.Context, params *store.LastEventIDParams) (int64, error) {
	var id int64
	err := s.pool.QueryRow(ctx, s.q.lastEventID, params.Tenant).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, wrap("last event id", err)
	}
	return id, nil
}
