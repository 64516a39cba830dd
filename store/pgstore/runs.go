package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// Runs and the messages they write. Each change is one short transaction:
// the run (or the thread) is read FOR UPDATE, judged by the shared rules
// (store.ApplyRunUpdate and friends), and written back guarded by the
// version read. A run changes a few times per model turn, so unlike a
// proposal's transitions these do not need the compare-and-set-in-one-
// statement treatment of cas.go; the lock is held for the two statements
// of one transaction, not across anything the caller does.

const runColumns = `id, tenant, thread_id, agent, roles, status, proposal_ids, awaiting, steps, error,
	lease_owner, lease_token, lease_generation, lease_expires_at, version, started_at, updated_at, ended_at`

const insertMessageSQL = `INSERT INTO _S_.messages
	(id, tenant, thread_id, role, text, sender, run_id, tool_calls, tool_call_id, result, proposal_id, outcome, created_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, $12)`

func (s *Store) sql(query string) string { return qualify(s.q.schema, query) }

// tx runs fn in a transaction, again when PostgreSQL aborts it for a
// serialisation failure or a deadlock.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var err error
	for range maxAttempts {
		err = pgx.BeginFunc(ctx, s.pool, fn)
		if !retryable(err) {
			break
		}
	}
	return err
}

// PostMessage implements store.Store.
func (s *Store) PostMessage(ctx context.Context, params *store.PostMessageParams) (*store.PostMessageResult, error) {
	if err := store.ValidatePostMessageParams(params); err != nil {
		return nil, wrap("post message", err)
	}
	m := params.Message
	var res *store.PostMessageResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		now := s.clock()
		res = &store.PostMessageResult{}
		if !params.Decision {
			if _, err := tx.Exec(ctx, s.q.ensureThread, m.Tenant, m.ThreadID, params.Owner, now); err != nil {
				return err
			}
		}
		// A statement of its own, after the insert: it sees the row a
		// concurrent creator committed while the insert waited on it, and
		// holds the thread until this transaction ends, so that of two
		// messages only one starts a run.
		t := &store.Thread{Tenant: m.Tenant, ID: m.ThreadID}
		err := tx.QueryRow(ctx, s.sql(`SELECT owner, run_id, created_at FROM _S_.threads WHERE tenant = $1 AND id = $2 FOR UPDATE`),
			m.Tenant, m.ThreadID).Scan(&t.Owner, &t.RunID, &t.CreatedAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("thread %s: %w", m.ThreadID, store.ErrNotFound)
		case err != nil:
			return err
		case !params.Decision && t.Owner != params.Owner:
			return fmt.Errorf("thread %s: %w", m.ThreadID, store.ErrNotThreadOwner)
		case !params.Decision && t.RunID != "":
			return &store.ThreadBusyError{ThreadID: m.ThreadID, RunID: t.RunID}
		}
		t.CreatedAt = t.CreatedAt.UTC()
		mc := m.Clone()
		mc.CreatedAt = now
		if err := s.insertMessage(ctx, tx, mc); err != nil {
			return err
		}
		if params.Run != nil {
			r := store.NewRun(params, now)
			if _, err := tx.Exec(ctx, s.sql(`INSERT INTO _S_.runs (`+runColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`), runArgs(r)...); err != nil {
				if _, dup := uniqueViolation(err); dup {
					return fmt.Errorf("%w: run id %s is taken", store.ErrInvalidParams, r.ID)
				}
				return err
			}
			if _, err := tx.Exec(ctx, s.sql(`UPDATE _S_.threads SET run_id = $3 WHERE tenant = $1 AND id = $2`),
				r.Tenant, r.ThreadID, r.ID); err != nil {
				return err
			}
			t.RunID = r.ID
			res.Run = r
		}
		res.Thread, res.Message = t, mc
		return nil
	})
	if err != nil {
		return nil, wrap("post message", err)
	}
	return res, nil
}

func (s *Store) insertMessage(ctx context.Context, tx pgx.Tx, m *store.Message) error {
	var calls []byte
	if m.ToolCalls != nil {
		out := make([]toolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			out[i] = toolCall{ID: c.ID, Action: c.Action, Input: c.Input}
		}
		var err error
		if calls, err = json.Marshal(out); err != nil {
			return fmt.Errorf("%w: message %s: tool calls: %v", store.ErrInvalidParams, m.ID, err)
		}
	}
	var result []byte
	if m.Result != nil {
		result = m.Result
	}
	_, err := tx.Exec(ctx, s.sql(insertMessageSQL), m.ID, m.Tenant, m.ThreadID, m.Role, m.Text, m.Sender, m.RunID,
		jsonbArg(calls), m.ToolCallID, result, m.ProposalID, m.CreatedAt)
	if _, dup := uniqueViolation(err); dup {
		return fmt.Errorf("%w: message id %s is taken", store.ErrInvalidParams, m.ID)
	}
	return err
}

// jsonbArg passes JSON text to a jsonb parameter, NULL when there is none.
func jsonbArg(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// toolCall is a tool call as messages.tool_calls holds it.
type toolCall struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input"`
}

func decodeToolCalls(b []byte) ([]store.ToolCall, error) {
	if b == nil {
		return nil, nil
	}
	var calls []toolCall
	if err := json.Unmarshal(b, &calls); err != nil {
		return nil, fmt.Errorf("tool calls: %w", err)
	}
	out := make([]store.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = store.ToolCall{ID: c.ID, Action: c.Action, Input: c.Input}
	}
	return out, nil
}

// runArgs are a run's column values in runColumns order.
func runArgs(r *store.Run) []any {
	ids := r.ProposalIDs
	if ids == nil {
		ids = []string{}
	}
	roles := r.Roles
	if roles == nil {
		roles = []string{}
	}
	var owner, token *string
	var gen *int64
	var exp *time.Time
	if l := r.Lease; l != nil {
		owner, token, gen, exp = &l.Owner, &l.Token, &l.Generation, &l.ExpiresAt
	}
	return []any{r.ID, r.Tenant, r.ThreadID, r.Agent, roles, string(r.Status), ids, r.Awaiting, r.Steps, r.Error,
		owner, token, gen, exp, r.Version, r.StartedAt, r.UpdatedAt, r.EndedAt}
}

func scanRun(row pgx.Row) (*store.Run, error) {
	r := &store.Run{}
	var (
		status       string
		owner, token *string
		gen          *int64
		exp, ended   *time.Time
	)
	if err := row.Scan(&r.ID, &r.Tenant, &r.ThreadID, &r.Agent, &r.Roles, &status, &r.ProposalIDs, &r.Awaiting, &r.Steps, &r.Error,
		&owner, &token, &gen, &exp, &r.Version, &r.StartedAt, &r.UpdatedAt, &ended); err != nil {
		return nil, err
	}
	r.Status = store.RunStatus(status)
	if len(r.ProposalIDs) == 0 {
		r.ProposalIDs = nil
	}
	if len(r.Roles) == 0 {
		r.Roles = nil
	}
	if token != nil && owner != nil && gen != nil && exp != nil {
		r.Lease = &store.Lease{Owner: *owner, Token: *token, Generation: *gen, ExpiresAt: exp.UTC()}
	}
	r.StartedAt, r.UpdatedAt = r.StartedAt.UTC(), r.UpdatedAt.UTC()
	if ended != nil {
		e := ended.UTC()
		r.EndedAt = &e
	}
	return r, nil
}

func (s *Store) getRun(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, tenant, id string, lock bool) (*store.Run, error) {
	query := `SELECT ` + runColumns + ` FROM _S_.runs WHERE tenant = $1 AND id = $2`
	if lock {
		query += ` FOR UPDATE`
	}
	r, err := scanRun(q.QueryRow(ctx, s.sql(query), tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	return r, err
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, params *store.GetRunParams) (*store.Run, error) {
	r, err := s.getRun(ctx, s.pool, params.Tenant, params.ID, false)
	if err != nil {
		return nil, wrap("get run", err)
	}
	return r, nil
}

// ListRuns implements store.Store.
func (s *Store) ListRuns(ctx context.Context, params *store.ListRunsParams) ([]*store.Run, error) {
	var limit *int
	if params.Limit > 0 {
		limit = &params.Limit
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT `+runColumns+` FROM _S_.runs WHERE tenant = $1 AND thread_id = $2
		ORDER BY seq DESC LIMIT $3`), params.Tenant, params.ThreadID, limit)
	if err != nil {
		return nil, wrap("list runs", err)
	}
	defer rows.Close()
	var out []*store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, wrap("list runs", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list runs", err)
	}
	return out, nil
}

// writeRun writes r back over the version it was read at, then its change.
func (s *Store) writeRun(ctx context.Context, tx pgx.Tx, r *store.Run, readVersion int64, c *store.RunChange) error {
	args := runArgs(r)
	ct, err := tx.Exec(ctx, s.sql(`UPDATE _S_.runs SET status = $1, proposal_ids = $2, awaiting = $3, steps = $4, error = $5,
		lease_owner = $6, lease_token = $7, lease_generation = $8, lease_expires_at = $9, version = $10, updated_at = $11, ended_at = $12
		WHERE tenant = $13 AND id = $14 AND version = $15`),
		slices.Concat(args[5:15], []any{args[16], args[17], r.Tenant, r.ID, readVersion})...)
	if err != nil {
		return err
	}
	if ct.RowsAffected() != 1 {
		return &store.RunConflictError{ID: r.ID, Op: "update", Got: r.Status, LeaseLost: true}
	}
	for _, m := range c.Messages {
		if err := s.insertMessage(ctx, tx, m); err != nil {
			return err
		}
	}
	if c.Release {
		_, err = tx.Exec(ctx, s.sql(`UPDATE _S_.threads SET run_id = '' WHERE tenant = $1 AND id = $2 AND run_id = $3`),
			r.Tenant, r.ThreadID, r.ID)
	}
	return err
}

// changeRun reads a run FOR UPDATE, lets apply change it, and writes it.
func (s *Store) changeRun(ctx context.Context, op, tenant, id string, apply func(r *store.Run, now time.Time) (*store.RunChange, error)) (*store.Run, error) {
	var out *store.Run
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := s.getRun(ctx, tx, tenant, id, true)
		if err != nil {
			return err
		}
		read := r.Version
		c, err := apply(r, s.clock())
		if err != nil {
			return err
		}
		if c != nil {
			if err := s.writeRun(ctx, tx, r, read, c); err != nil {
				return err
			}
		}
		out = r
		return nil
	})
	if err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// UpdateRun implements store.Store.
func (s *Store) UpdateRun(ctx context.Context, params *store.UpdateRunParams) (*store.Run, error) {
	return s.changeRun(ctx, "update run", params.Tenant, params.ID, func(r *store.Run, now time.Time) (*store.RunChange, error) {
		return store.ApplyRunUpdate(r, params, now)
	})
}

// CancelRun implements store.Store.
func (s *Store) CancelRun(ctx context.Context, params *store.CancelRunParams) (*store.Run, error) {
	return s.changeRun(ctx, "cancel run", params.Tenant, params.ID, func(r *store.Run, now time.Time) (*store.RunChange, error) {
		if !store.ApplyRunCancel(r, now) {
			return nil, nil
		}
		return &store.RunChange{Release: true}, nil
	})
}

// claimRunsSQL picks the runs store.RunResumable allows, longest unchanged
// first, skipping runs another transaction holds: parked runs whose awaited
// proposal is not pending (or is gone), running runs whose lease ran out by
// $1. Its first term repeats runs_open's predicate.
const claimRunsSQL = `SELECT ` + runColumns + ` FROM _S_.runs r
	WHERE r.status IN ('running', 'parked')
	AND ((r.status = 'parked' AND NOT EXISTS (
			SELECT 1 FROM _S_.proposals p WHERE p.id = r.awaiting AND p.tenant = r.tenant AND p.status = 'pending'))
		OR (r.status = 'running' AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= $1)))
	ORDER BY r.updated_at, r.id LIMIT $2
	FOR UPDATE OF r SKIP LOCKED`

// ClaimRuns implements store.Store.
func (s *Store) ClaimRuns(ctx context.Context, params *store.ClaimRunsParams) ([]*store.Run, error) {
	if params.Limit <= 0 || params.LeaseDuration <= 0 || params.Owner == "" {
		return nil, wrap("claim runs", fmt.Errorf("%w: owner, limit and lease are required", store.ErrInvalidParams))
	}
	var out []*store.Run
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out = nil
		now := s.clock()
		rows, err := tx.Query(ctx, s.sql(claimRunsSQL), now, params.Limit)
		if err != nil {
			return err
		}
		ready, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
		if err != nil {
			return err
		}
		for _, r := range ready {
			read := r.Version
			store.ApplyRunClaim(r, params, now)
			if err := s.writeRun(ctx, tx, r, read, &store.RunChange{}); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("claim runs", err)
	}
	return out, nil
}
