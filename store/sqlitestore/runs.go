package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/store"
)

// Runs and the messages they write. Every change is read, judged by the
// shared rules (store.ApplyRunUpdate and friends) and written back in one
// write transaction, guarded by the version read: the single writer makes
// the guard redundant today, and it keeps the write correct if that
// changes.

const runColumns = `id, tenant, thread_id, agent, roles, status, proposal_ids, awaiting, steps, error,
	lease_owner, lease_token, lease_generation, lease_expires_at, version, started_at, updated_at, ended_at, client_tools`

const getRunSQL = `SELECT ` + runColumns + ` FROM runs WHERE tenant = ? AND id = ?`

const insertMessageSQL = `INSERT INTO messages
	(id, tenant, thread_id, role, text, sender, run_id, tool_calls, tool_call_id, result, proposal_id, outcome, created_at, decision)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)`

// PostMessage implements store.Store.
func (s *Store) PostMessage(ctx context.Context, params *store.PostMessageParams) (*store.PostMessageResult, error) {
	if err := store.ValidatePostMessageParams(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: post message: %w", classify(err))
	}
	tenant, thread := params.Thread()
	var res *store.PostMessageResult
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		res = &store.PostMessageResult{}
		t, err := getThread(ctx, tx, tenant, thread)
		switch {
		case errors.Is(err, store.ErrNotFound) && !params.Decision:
			t = &store.Thread{Tenant: tenant, ID: thread, Owner: params.Owner, CreatedAt: now}
			if _, err := tx.ExecContext(ctx, `INSERT INTO threads (tenant, id, owner, run_id, created_at) VALUES (?, ?, ?, '', ?)`,
				t.Tenant, t.ID, t.Owner, now.UnixNano()); err != nil {
				return err
			}
		case err != nil:
			return err
		case !params.Decision && t.Owner != params.Owner:
			return fmt.Errorf("thread %s: %w", thread, store.ErrNotThreadOwner)
		case !params.Decision && t.RunID != "":
			return &store.ThreadBusyError{ThreadID: thread, RunID: t.RunID}
		}
		for _, m := range params.Posted() {
			mc := m.Clone()
			mc.CreatedAt, mc.Decision = now, params.Decision
			if err := insertMessage(ctx, tx, mc); err != nil {
				return err
			}
			if m == params.Message {
				res.Message = mc
			} else {
				res.Results = append(res.Results, mc)
			}
		}
		if params.Run != nil {
			r := store.NewRun(params, now)
			if err := insertRun(ctx, tx, r); err != nil {
				return err
			}
			// The thread was read in this transaction, and the one writer
			// serialises them: no other run can have taken it since.
			if _, err := tx.ExecContext(ctx, `UPDATE threads SET run_id = ? WHERE tenant = ? AND id = ? AND run_id = ''`,
				r.ID, r.Tenant, r.ThreadID); err != nil {
				return err
			}
			t.RunID = r.ID
			res.Run = r
		}
		res.Thread = t
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: post message: %w", classify(err))
	}
	return res, nil
}

func insertMessage(ctx context.Context, tx *wtx, m *store.Message) error {
	var calls any
	if m.ToolCalls != nil {
		b, err := json.Marshal(encodeToolCalls(m.ToolCalls))
		if err != nil {
			return fmt.Errorf("%w: message %s: tool calls: %v", store.ErrInvalidParams, m.ID, err)
		}
		calls = string(b)
	}
	var result any
	if m.Result != nil {
		result = []byte(m.Result)
	}
	_, err := tx.ExecContext(ctx, insertMessageSQL, m.ID, m.Tenant, m.ThreadID, m.Role, m.Text, m.Sender, m.RunID,
		calls, m.ToolCallID, result, m.ProposalID, m.CreatedAt.UnixNano(), m.Decision)
	if _, dup := uniqueViolation(err); dup {
		// The only key a posted or run message can meet: (tenant,
		// thread_id, id). Outcome messages are admitted elsewhere.
		return &store.MessageIDTakenError{ThreadID: m.ThreadID, ID: m.ID}
	}
	return err
}

// toolCall is a tool call as messages.tool_calls holds it.
type toolCall struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input"`
	Client bool            `json:"client,omitempty"`
}

func encodeToolCalls(calls []store.ToolCall) []toolCall {
	out := make([]toolCall, len(calls))
	for i, c := range calls {
		out[i] = toolCall{ID: c.ID, Action: c.Action, Input: c.Input, Client: c.Client}
	}
	return out
}

func decodeToolCalls(text sql.NullString) ([]store.ToolCall, error) {
	if !text.Valid {
		return nil, nil
	}
	var calls []toolCall
	if err := json.Unmarshal([]byte(text.String), &calls); err != nil {
		return nil, fmt.Errorf("tool calls: %w", err)
	}
	out := make([]store.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = store.ToolCall{ID: c.ID, Action: c.Action, Input: c.Input, Client: c.Client}
	}
	return out, nil
}

func insertRun(ctx context.Context, tx *wtx, r *store.Run) error {
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
	if _, dup := uniqueViolation(err); dup {
		return fmt.Errorf("%w: run id %s is taken", store.ErrInvalidParams, r.ID)
	}
	return err
}

// runArgs are a run's column values in runColumns order.
func runArgs(r *store.Run) ([]any, error) {
	ids, err := json.Marshal(nonNil(r.ProposalIDs))
	if err != nil {
		return nil, err
	}
	roles, err := json.Marshal(nonNil(r.Roles))
	if err != nil {
		return nil, err
	}
	var owner, token, gen, exp any
	if l := r.Lease; l != nil {
		n, err := nanos("lease expiry", l.ExpiresAt)
		if err != nil {
			return nil, err
		}
		owner, token, gen, exp = l.Owner, l.Token, l.Generation, n
	}
	ended, err := nullNanos("ended_at", r.EndedAt)
	if err != nil {
		return nil, err
	}
	tools, err := store.EncodeClientTools(r.ClientTools)
	if err != nil {
		return nil, err
	}
	var clientTools any
	if tools != nil {
		clientTools = string(tools)
	}
	return []any{r.ID, r.Tenant, r.ThreadID, r.Agent, string(roles), string(r.Status), string(ids), r.Awaiting, r.Steps, r.Error,
		owner, token, gen, exp, r.Version, r.StartedAt.UnixNano(), r.UpdatedAt.UnixNano(), ended, clientTools}, nil
}

func nonNil(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

func scanRun(row scanner) (*store.Run, error) {
	r := &store.Run{}
	var (
		status, ids, roles sql.NullString
		owner, token       sql.NullString
		tools              sql.NullString
		gen, exp, ended    sql.NullInt64
		started, updated   int64
	)
	if err := row.Scan(&r.ID, &r.Tenant, &r.ThreadID, &r.Agent, &roles, &status, &ids, &r.Awaiting, &r.Steps, &r.Error,
		&owner, &token, &gen, &exp, &r.Version, &started, &updated, &ended, &tools); err != nil {
		return nil, err
	}
	r.Status = store.RunStatus(status.String)
	if tools.Valid {
		var err error
		if r.ClientTools, err = store.DecodeClientTools([]byte(tools.String)); err != nil {
			return nil, fmt.Errorf("run %s: %w", r.ID, err)
		}
	}
	if err := json.Unmarshal([]byte(ids.String), &r.ProposalIDs); err != nil {
		return nil, fmt.Errorf("run %s: proposal ids: %w", r.ID, err)
	}
	if len(r.ProposalIDs) == 0 {
		r.ProposalIDs = nil
	}
	if err := json.Unmarshal([]byte(roles.String), &r.Roles); err != nil {
		return nil, fmt.Errorf("run %s: roles: %w", r.ID, err)
	}
	if len(r.Roles) == 0 {
		r.Roles = nil
	}
	if token.Valid {
		r.Lease = &store.Lease{Owner: owner.String, Token: token.String, Generation: gen.Int64, ExpiresAt: fromNanos(exp.Int64)}
	}
	r.StartedAt, r.UpdatedAt, r.EndedAt = fromNanos(started), fromNanos(updated), fromNullNanos(ended)
	return r, nil
}

func getRun(ctx context.Context, q querier, tenant, id string) (*store.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, getRunSQL, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	return r, err
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, params *store.GetRunParams) (*store.Run, error) {
	r, err := getRun(ctx, &s.rq, params.Tenant, params.ID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get run: %w", classify(err))
	}
	return r, nil
}

// ListRuns implements store.Store.
func (s *Store) ListRuns(ctx context.Context, params *store.ListRunsParams) ([]*store.Run, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	out, err := queryAll(ctx, &s.rq, scanRun, `SELECT `+runColumns+` FROM runs WHERE tenant = ? AND thread_id = ? ORDER BY seq DESC LIMIT ?`,
		params.Tenant, params.ThreadID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list runs: %w", classify(err))
	}
	return out, nil
}

// writeRun writes r back over the version it was read at, then its change.
func writeRun(ctx context.Context, tx *wtx, r *store.Run, readVersion int64, c *store.RunChange) error {
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	// A run parking on a proposal that already left pending is ready at
	// once: no transition will come to mark it.
	res, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, proposal_ids = ?, awaiting = ?, steps = ?, error = ?,
		lease_owner = ?, lease_token = ?, lease_generation = ?, lease_expires_at = ?, version = ?, updated_at = ?, ended_at = ?,
		ready = (? = 'parked' AND NOT EXISTS (
			SELECT 1 FROM proposals p WHERE p.id = ? AND p.tenant = ? AND p.status = 'pending'))
		WHERE tenant = ? AND id = ? AND version = ?`,
		slices.Concat(args[5:15], []any{args[16], args[17], string(r.Status), r.Awaiting, r.Tenant, r.Tenant, r.ID, readVersion})...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return &store.RunConflictError{ID: r.ID, Op: "update", Got: r.Status, LeaseLost: true}
	}
	for _, m := range c.Messages {
		if err := insertMessage(ctx, tx, m); err != nil {
			return err
		}
	}
	if c.Release {
		_, err = tx.ExecContext(ctx, `UPDATE threads SET run_id = '' WHERE tenant = ? AND id = ? AND run_id = ?`, r.Tenant, r.ThreadID, r.ID)
	}
	return err
}

// UpdateRun implements store.Store.
func (s *Store) UpdateRun(ctx context.Context, params *store.UpdateRunParams) (*store.Run, error) {
	var out *store.Run
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		r, err := getRun(ctx, tx, params.Tenant, params.ID)
		if err != nil {
			return err
		}
		read := r.Version
		c, err := store.ApplyRunUpdate(r, params, now)
		if err != nil {
			return err
		}
		if err := writeRun(ctx, tx, r, read, c); err != nil {
			return err
		}
		out = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: update run: %w", classify(err))
	}
	return out, nil
}

// The runs store.RunResumable allows, longest unchanged first, in two
// ways. claimReadySQL reads runs_ready only: running runs (their lease may
// have run out by ?1) and parked runs marked ready — by the transition that
// moved their proposal out of pending (readyRunsSQL, in persistChange), or
// when they parked on a proposal already decided (writeRun) — so a claim
// costs the same whatever the number of parked runs. claimSweepSQL judges
// every open run by its proposal (store.ClaimRunsParams.Sweep); the single
// writer leaves no run unmarked here, so it is only a second look. Their
// limit is written `+?2`, as the proposals' claim's is (see claimWhere).
const (
	claimReadySQL = `SELECT ` + runColumns + ` FROM runs r
	WHERE (r.status = 'running' OR (r.status = 'parked' AND r.ready = 1))
	AND (r.status = 'parked' OR r.lease_expires_at IS NULL OR r.lease_expires_at <= ?1)
	ORDER BY r.updated_at, r.id LIMIT +?2`
	claimSweepSQL = `SELECT ` + runColumns + ` FROM runs r
	WHERE r.status IN ('running', 'parked')
	AND ((r.status = 'parked' AND NOT EXISTS (
			SELECT 1 FROM proposals p WHERE p.id = r.awaiting AND p.tenant = r.tenant AND p.status = 'pending'))
		OR (r.status = 'running' AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= ?1)))
	ORDER BY r.updated_at, r.id LIMIT +?2`
	// readyRunsSQL marks the runs parked on a proposal ready. Parameters:
	// proposal id, tenant.
	readyRunsSQL = `UPDATE runs SET ready = 1 WHERE awaiting = ? AND tenant = ? AND status = 'parked' AND ready = 0`
)

// leftPending reports whether a change moved its proposal out of pending:
// the events that do.
func leftPending(c *store.Change) bool {
	for _, e := range c.Events {
		switch e.Type {
		case store.EventDecided, store.EventExpired, store.EventCancelled, store.EventSuperseded:
			return true
		}
	}
	return false
}

// ClaimRuns implements store.Store.
func (s *Store) ClaimRuns(ctx context.Context, params *store.ClaimRunsParams) ([]*store.Run, error) {
	if params.Limit <= 0 || params.LeaseDuration <= 0 || params.Owner == "" {
		return nil, fmt.Errorf("sqlitestore: claim runs: %w: owner, limit and lease are required", store.ErrInvalidParams)
	}
	var out []*store.Run
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		out = nil
		query := claimReadySQL
		if params.Sweep {
			query = claimSweepSQL
		}
		rows, err := tx.QueryContext(ctx, query, now.UnixNano(), params.Limit)
		if err != nil {
			return err
		}
		var ready []*store.Run
		for rows.Next() {
			r, err := scanRun(rows)
			if err != nil {
				rows.Close()
				return err
			}
			ready = append(ready, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range ready {
			read := r.Version
			store.ApplyRunClaim(r, params, now)
			if err := writeRun(ctx, tx, r, read, &store.RunChange{}); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim runs: %w", classify(err))
	}
	return out, nil
}

// CancelRun implements store.Store.
func (s *Store) CancelRun(ctx context.Context, params *store.CancelRunParams) (*store.Run, error) {
	var out *store.Run
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		r, err := getRun(ctx, tx, params.Tenant, params.ID)
		if err != nil {
			return err
		}
		read := r.Version
		if store.ApplyRunCancel(r, now) {
			if err := writeRun(ctx, tx, r, read, &store.RunChange{Release: true}); err != nil {
				return err
			}
		}
		out = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: cancel run: %w", classify(err))
	}
	return out, nil
}
