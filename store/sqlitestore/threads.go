package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

const getThreadSQL = `SELECT owner, run_id, created_at FROM threads WHERE tenant = ? AND id = ?`

func getThread(ctx context.Context, q querier, tenant, id string) (*store.Thread, error) {
	t := &store.Thread{Tenant: tenant, ID: id}
	var created int64
	err := q.QueryRowContext(ctx, getThreadSQL, tenant, id).Scan(&t.Owner, &t.RunID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("thread %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	t.CreatedAt = fromNanos(created)
	return t, nil
}

// threadOwner returns the owner of a thread, or nil when it does not exist.
func threadOwner(ctx context.Context, q querier, tenant, id string) (*string, error) {
	t, err := getThread(ctx, q, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &t.Owner, nil
}

// EnsureThread implements store.Store.
func (s *Store) EnsureThread(ctx context.Context, params *store.EnsureThreadParams) (*store.Thread, error) {
	if params.Tenant == "" || params.ID == "" {
		return nil, fmt.Errorf("sqlitestore: ensure thread: %w: tenant and id required", store.ErrInvalidParams)
	}
	var t *store.Thread
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO threads (tenant, id, owner, created_at) VALUES (?, ?, ?, ?)`,
			params.Tenant, params.ID, params.Owner, now.UnixNano())
		if err != nil {
			return err
		}
		t, err = getThread(ctx, tx, params.Tenant, params.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: ensure thread: %w", classify(err))
	}
	return t, nil
}

// GetThread implements store.Store.
func (s *Store) GetThread(ctx context.Context, params *store.GetThreadParams) (*store.Thread, error) {
	t, err := getThread(ctx, &s.rq, params.Tenant, params.ID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get thread: %w", classify(err))
	}
	return t, nil
}

// DeleteThread implements store.Store. Its messages go with it; its
// proposals stay, and outcomes they settle later are dropped.
func (s *Store) DeleteThread(ctx context.Context, params *store.GetThreadParams) error {
	err := s.write(ctx, func(tx *wtx, _ time.Time) error {
		// Explicit, though the foreign key cascades too: the delete must
		// not depend on the connection's foreign_keys setting.
		if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE tenant = ? AND thread_id = ?`, params.Tenant, params.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE tenant = ? AND thread_id = ?`, params.Tenant, params.ID); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM threads WHERE tenant = ? AND id = ?`, params.Tenant, params.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("thread %s: %w", params.ID, store.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: delete thread: %w", classify(err))
	}
	return nil
}

// ListMessages implements store.Store.
func (s *Store) ListMessages(ctx context.Context, params *store.ListMessagesParams) ([]*store.Message, error) {
	// One statement, so the thread's existence and its messages come from
	// one snapshot: no row at all means no thread; a row of NULLs, a
	// thread without messages.
	rows, err := s.rq.QueryContext(ctx, `SELECT m.id, m.role, m.text, m.proposal_id, m.outcome, m.created_at,
			m.sender, m.run_id, m.tool_calls, m.tool_call_id, m.result, m.decision
		FROM threads t LEFT JOIN messages m ON m.tenant = t.tenant AND m.thread_id = t.id
		WHERE t.tenant = ? AND t.id = ?
		ORDER BY m.seq`, params.Tenant, params.ThreadID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list messages: %w", classify(err))
	}
	defer rows.Close()
	var (
		out   []*store.Message
		found bool
	)
	for rows.Next() {
		found = true
		var (
			id, role, text, proposal sql.NullString
			outcome                  sql.NullString
			created                  sql.NullInt64
			sender, run, callID      sql.NullString
			calls                    sql.NullString
			result                   []byte
			decision                 sql.NullBool
		)
		if err := rows.Scan(&id, &role, &text, &proposal, &outcome, &created, &sender, &run, &calls, &callID, &result, &decision); err != nil {
			return nil, fmt.Errorf("sqlitestore: list messages: %w", classify(err))
		}
		if !id.Valid {
			continue
		}
		m := &store.Message{
			ID: id.String, Tenant: params.Tenant, ThreadID: params.ThreadID, Role: role.String,
			Text: text.String, ProposalID: proposal.String, CreatedAt: fromNanos(created.Int64),
			Sender: sender.String, RunID: run.String, ToolCallID: callID.String, Result: result, Decision: decision.Bool,
		}
		if m.ToolCalls, err = decodeToolCalls(calls); err != nil {
			return nil, fmt.Errorf("sqlitestore: list messages: message %s: %w", m.ID, classify(err))
		}
		if m.Outcome, err = decodeOutcome(outcome); err != nil {
			return nil, fmt.Errorf("sqlitestore: list messages: message %s: %w", m.ID, classify(err))
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list messages: %w", classify(err))
	}
	if !found {
		return nil, fmt.Errorf("sqlitestore: list messages: thread %s: %w", params.ThreadID, store.ErrNotFound)
	}
	return out, nil
}

// DefaultEventLimit is the page size of ListEvents when Limit is 0.
const DefaultEventLimit = 1000

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, params *store.ListEventsParams) ([]*store.Event, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = DefaultEventLimit
	}
	// The filter is spelled out rather than "(? = '' OR proposal_id = ?)",
	// which would keep SQLite from using events_proposal.
	query := `SELECT id, proposal_id, type, actor, actor_kind, via, status, detail, at FROM events WHERE tenant = ? AND id > ?`
	args := []any{params.Tenant, params.AfterID}
	if params.ProposalID != "" {
		query += ` AND proposal_id = ?`
		args = append(args, params.ProposalID)
	}
	scan := func(row scanner) (*store.Event, error) {
		e := &store.Event{Tenant: params.Tenant}
		var typ, status string
		var at int64
		if err := row.Scan(&e.ID, &e.ProposalID, &typ, &e.Actor, &e.ActorKind, &e.Via, &status, &e.Detail, &at); err != nil {
			return nil, err
		}
		e.Type, e.Status, e.At = store.EventType(typ), store.Status(status), fromNanos(at)
		return e, nil
	}
	out, err := queryAll(ctx, &s.rq, scan, query+` ORDER BY id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list events: %w", classify(err))
	}
	return out, nil
}

// LastEventID implements store.Store: one probe of events_tenant.
func (s *Store) LastEventID(ctx context.Context, params *store.LastEventIDParams) (int64, error) {
	var id int64
	err := s.rq.QueryRowContext(ctx, lastEventIDSQL, params.Tenant).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: last event id: %w", classify(err))
	}
	return id, nil
}

// lastEventIDSQL reads the tenant's newest event from the end of
// events_tenant. Parameters: tenant.
const lastEventIDSQL = `SELECT id FROM events WHERE tenant = ? ORDER BY id DESC LIMIT 1`
