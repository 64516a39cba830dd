package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/countersign/countersign/store"
)

// Runs and the messages they write, one round trip per change (docs/design.md
// §15), as the proposals' transitions are (cas.go):
//
//   - PostMessage is one pipelined batch, run as one implicit transaction:
//     the thread is created if absent, taken by the new run with a
//     compare-and-set on threads.run_id, and the message and the run are
//     inserted only where that holds; each statement has a snapshot of its
//     own, so it sees what a concurrent poster committed while the one
//     before it waited on that poster's lock.
//   - UpdateRun and CancelRun start from the run this Store last read or
//     wrote (internal/rowmemory), apply the shared rule (store.ApplyRunUpdate,
//     store.ApplyRunCancel) and write it in one statement guarded by the
//     version, with its messages and the thread's release in CTEs. A stale
//     guess costs one failed write and a read, never a wrong write, and an
//     answer that writes nothing is judged on a row read from the database.
//   - ClaimRuns is one statement: store.RunResumable and
//     store.ApplyRunClaim in SQL (claimRunsSQL), rows picked FOR UPDATE
//     SKIP LOCKED.

const runColumns = `id, tenant, thread_id, agent, roles, status, proposal_ids, awaiting, steps, error,
	lease_owner, lease_token, lease_generation, lease_expires_at, version, started_at, updated_at, ended_at, client_tools`

func (s *Store) sql(query string) string { return qualify(s.q.schema, query) }

// postMessageSQL inserts a posted message where the thread allows it:
// $13 'run' (the thread is held by the run $14 this batch starts), 'free'
// (the thread is the owner's $15 and no run holds it; FOR SHARE, so that a
// run starting at the same moment is either seen or waits for this) or
// 'decision' (the thread exists). Parameters 1–12: the message's columns.
const postMessageSQL = `INSERT INTO _S_.messages
	(id, tenant, thread_id, role, text, sender, run_id, tool_calls, tool_call_id, result, proposal_id, outcome, created_at, decision)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, NULL, $12, $13 = 'decision'
	WHERE EXISTS (SELECT 1 FROM _S_.threads t WHERE t.tenant = $2 AND t.id = $3 AND (
		($13 = 'run' AND t.run_id = $14) OR
		($13 = 'free' AND t.owner = $15 AND t.run_id = '') OR
		$13 = 'decision')
		FOR SHARE)`

// PostMessage implements store.Store.
func (s *Store) PostMessage(ctx context.Context, params *store.PostMessageParams) (*store.PostMessageResult, error) {
	if err := store.ValidatePostMessageParams(params); err != nil {
		return nil, wrap("post message", err)
	}
	tenant, thread := params.Thread()
	now := s.clock()
	var posted []*store.Message
	calls := map[string]*string{}
	for _, m := range params.Posted() {
		mc := m.Clone()
		mc.CreatedAt, mc.Decision = now, params.Decision
		c, err := toolCallsJSON(mc)
		if err != nil {
			return nil, wrap("post message", err)
		}
		posted, calls[mc.ID] = append(posted, mc), c
	}
	var run *store.Run
	when := "free"
	if params.Decision {
		when = "decision"
	}
	if params.Run != nil {
		run, when = store.NewRun(params, now), "run"
	}
	var (
		inserted int
		found    bool
		t        *store.Thread
	)
	err := s.batch(ctx, func(b *pgx.Batch) {
		inserted, found, t = 0, false, &store.Thread{Tenant: tenant, ID: thread}
		if !params.Decision {
			b.Queue(s.q.ensureThread, tenant, thread, params.Owner, now)
		}
		if run != nil {
			b.Queue(s.sql(`UPDATE _S_.threads SET run_id = $3 WHERE tenant = $1 AND id = $2 AND owner = $4 AND run_id = ''`),
				tenant, thread, run.ID, params.Owner)
		}
		runID := ""
		if run != nil {
			runID = run.ID
		}
		for _, mc := range posted {
			b.Queue(s.sql(postMessageSQL), mc.ID, mc.Tenant, mc.ThreadID, mc.Role, mc.Text, mc.Sender, mc.RunID,
				calls[mc.ID], mc.ToolCallID, nilIfEmpty(mc.Result), mc.ProposalID, now, when, runID, params.Owner).Exec(func(ct pgconn.CommandTag) error {
				inserted += int(ct.RowsAffected())
				return nil
			})
		}
		if run != nil {
			b.Queue(s.sql(`INSERT INTO _S_.runs (`+runColumns+`)
				SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19
				WHERE EXISTS (SELECT 1 FROM _S_.threads WHERE tenant = $2 AND id = $3 AND run_id = $1)`), runArgs(run)...)
		}
		b.Queue(s.q.getThread, tenant, thread).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&t.Owner, &t.RunID, &t.CreatedAt)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			found = err == nil
			return err
		})
	})
	if c, dup := uniqueViolation(err); dup {
		if c == messageKey {
			return nil, wrap("post message", s.messageIDTaken(ctx, tenant, thread, posted))
		}
		return nil, wrap("post message", fmt.Errorf("%w: run id %s is taken", store.ErrInvalidParams, run.ID))
	}
	if err != nil {
		return nil, wrap("post message", err)
	}
	t.CreatedAt = t.CreatedAt.UTC()
	switch {
	case inserted == len(posted):
	case inserted > 0:
		// Every statement of the batch is guarded alike, under the lock
		// the first took: all of them insert, or none.
		return nil, wrap("post message", fmt.Errorf("thread %s: %d of %d messages inserted", thread, inserted, len(posted)))
	case !found:
		return nil, wrap("post message", fmt.Errorf("thread %s: %w", thread, store.ErrNotFound))
	case t.Owner != params.Owner:
		return nil, wrap("post message", fmt.Errorf("thread %s: %w", thread, store.ErrNotThreadOwner))
	case t.RunID != "":
		return nil, &store.ThreadBusyError{ThreadID: thread, RunID: t.RunID}
	default:
		return nil, wrap("post message", fmt.Errorf("thread %s changed while the message was posted", thread))
	}
	res := &store.PostMessageResult{Thread: t}
	for i, mc := range posted {
		if i == len(posted)-1 && params.Message != nil {
			res.Message = mc
		} else {
			res.Results = append(res.Results, mc)
		}
	}
	if run != nil {
		s.runs.Put(run)
		res.Run = run
	}
	return res, nil
}

// messageKey is the constraint that keys a message by tenant, thread and
// id (migration 0013).
const messageKey = "messages_thread_message_key"

// messageIDTaken is the error of a write refused by messageKey: it names
// the first of msgs whose id the thread holds. The write waited for the
// one that took the id to commit, so that one is there to be read; should
// the read fail, the error names the thread alone.
func (s *Store) messageIDTaken(ctx context.Context, tenant, thread string, msgs []*store.Message) error {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	taken := &store.MessageIDTakenError{ThreadID: thread}
	var held []string
	rows, err := s.pool.Query(ctx, s.sql(`SELECT id FROM _S_.messages WHERE tenant = $1 AND thread_id = $2 AND id = ANY($3)`), tenant, thread, ids)
	if err == nil {
		held, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err == nil {
		for _, id := range ids {
			if slices.Contains(held, id) {
				taken.ID = id
				break
			}
		}
	}
	return taken
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// toolCallsJSON is a message's tool calls as messages.tool_calls holds
// them, nil when it has none.
func toolCallsJSON(m *store.Message) (*string, error) {
	if m.ToolCalls == nil {
		return nil, nil
	}
	out := make([]toolCall, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		out[i] = toolCall{ID: c.ID, Action: c.Action, Input: c.Input, Client: c.Client}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%w: message %s: tool calls: %v", store.ErrInvalidParams, m.ID, err)
	}
	text := string(b)
	return &text, nil
}

// toolCall is a tool call as messages.tool_calls holds it.
type toolCall struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input"`
	Client bool            `json:"client,omitempty"`
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
		out[i] = store.ToolCall{ID: c.ID, Action: c.Action, Input: c.Input, Client: c.Client}
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
	// Valid JSON, or nil: EncodeClientTools marshals strings and
	// RawMessages that came from a JSON document.
	tools, _ := store.EncodeClientTools(r.ClientTools)
	var clientTools *string
	if tools != nil {
		text := string(tools)
		clientTools = &text
	}
	return []any{r.ID, r.Tenant, r.ThreadID, r.Agent, roles, string(r.Status), ids, r.Awaiting, r.Steps, r.Error,
		owner, token, gen, exp, r.Version, r.StartedAt, r.UpdatedAt, r.EndedAt, clientTools}
}

func scanRun(row pgx.Row) (*store.Run, error) {
	r := &store.Run{}
	var (
		status       string
		owner, token *string
		gen          *int64
		exp, ended   *time.Time
		tools        []byte
	)
	if err := row.Scan(&r.ID, &r.Tenant, &r.ThreadID, &r.Agent, &r.Roles, &status, &r.ProposalIDs, &r.Awaiting, &r.Steps, &r.Error,
		&owner, &token, &gen, &exp, &r.Version, &r.StartedAt, &r.UpdatedAt, &ended, &tools); err != nil {
		return nil, err
	}
	var err error
	if r.ClientTools, err = store.DecodeClientTools(tools); err != nil {
		return nil, fmt.Errorf("run %s: %w", r.ID, err)
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
}, tenant, id string) (*store.Run, error) {
	r, err := scanRun(q.QueryRow(ctx, s.sql(`SELECT `+runColumns+` FROM _S_.runs WHERE tenant = $1 AND id = $2`), tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	return r, err
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, params *store.GetRunParams) (*store.Run, error) {
	r, err := s.getRun(ctx, s.pool, params.Tenant, params.ID)
	if err != nil {
		return nil, wrap("get run", err)
	}
	s.runs.Put(r)
	return r, nil
}

// ListRuns implements store.Store.
func (s *Store) ListRuns(ctx context.Context, params *store.ListRunsParams) ([]*store.Run, error) {
	var limit *int
	if params.Limit > 0 {
		limit = &params.Limit
	}
	out, err := queryAll(ctx, s.pool, scanRun, s.sql(`SELECT `+runColumns+` FROM _S_.runs WHERE tenant = $1 AND thread_id = $2
		ORDER BY seq DESC LIMIT $3`), params.Tenant, params.ThreadID, limit)
	if err != nil {
		return nil, wrap("list runs", err)
	}
	return out, nil
}

// casRunSQL writes a run over the version it was read at ($15), then, only
// if it did, its messages (parallel arrays $16–$22, in order) and, with $23,
// the thread's release. Parameters 1–14: tenant, id, then the mutable
// columns and the time.
//
// A run that parks is ready at once when its proposal already left pending
// (pl: the proposal, if still pending, locked FOR SHARE, so that a decision
// being written is waited for and then seen); otherwise the transition that
// moves the proposal out of pending marks it (cas.go, create.go).
const casRunSQL = `WITH pl AS (
	SELECT 1 FROM _S_.proposals WHERE tenant = $1 AND id = $5 AND status = 'pending' AND $3 = 'parked' FOR SHARE
), u AS (
	UPDATE _S_.runs SET status = $3, proposal_ids = $4, awaiting = $5, steps = $6, error = $7,
		lease_owner = $8, lease_token = $9, lease_generation = $10, lease_expires_at = $11, version = $12,
		updated_at = $13, ended_at = $14, ready = ($3 = 'parked' AND NOT EXISTS (SELECT 1 FROM pl))
	WHERE tenant = $1 AND id = $2 AND version = $15
	RETURNING tenant, thread_id, id
), m AS (
	INSERT INTO _S_.messages (id, tenant, thread_id, role, text, sender, run_id, tool_calls, tool_call_id, result, proposal_id, outcome, created_at)
	SELECT x.id, u.tenant, u.thread_id, x.role, x.text, '', u.id, x.tool_calls::jsonb, x.tool_call_id, x.result, x.proposal_id, NULL, $13
	FROM u, unnest($16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::bytea[], $22::text[])
		WITH ORDINALITY AS x(id, role, text, tool_calls, tool_call_id, result, proposal_id, n)
	ORDER BY x.n
), r AS (
	UPDATE _S_.threads t SET run_id = '' FROM u
	WHERE $23 AND t.tenant = u.tenant AND t.id = u.thread_id AND t.run_id = u.id
)
SELECT count(*) FROM u`

// casRun writes r (changed from the version read) and c in one statement,
// and reports whether the guard held.
func (s *Store) casRun(ctx context.Context, r *store.Run, read int64, c *store.RunChange) (bool, error) {
	a := runArgs(r)
	args := []any{r.Tenant, r.ID}
	args = append(args, a[5:15]...)         // status … version
	args = append(args, a[16], a[17], read) // updated_at, ended_at, the guard
	n := len(c.Messages)
	ids, roles, texts, callIDs, props := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	calls, results := make([]*string, n), make([][]byte, n)
	for i, m := range c.Messages {
		var err error
		if calls[i], err = toolCallsJSON(m); err != nil {
			return false, err
		}
		ids[i], roles[i], texts[i], callIDs[i], props[i], results[i] = m.ID, m.Role, m.Text, m.ToolCallID, m.ProposalID, nilIfEmpty(m.Result)
	}
	args = append(args, ids, roles, texts, calls, callIDs, results, props, c.Release)
	var wrote int
	err := s.pool.QueryRow(ctx, s.sql(casRunSQL), args...).Scan(&wrote)
	if key, dup := uniqueViolation(err); dup && key == messageKey {
		return false, s.messageIDTaken(ctx, r.Tenant, r.ThreadID, c.Messages)
	}
	if err != nil {
		return false, err
	}
	return wrote == 1, nil
}

// changeRun applies apply to the run (the remembered one first) and writes
// it with casRun, reading the run again when the guess was stale. apply
// returns nil when nothing is to be written; that answer, and a refusal,
// stand only when judged on a row read from the database.
func (s *Store) changeRun(ctx context.Context, op, tenant, id string, apply func(r *store.Run, now time.Time) (*store.RunChange, error)) (*store.Run, error) {
	cur := s.runs.Get(tenant, id)
	fresh := false
	for range maxCASAttempts {
		if cur == nil {
			r, err := s.getRun(ctx, s.pool, tenant, id)
			if err != nil {
				return nil, wrap(op, err)
			}
			cur, fresh = r, true
		}
		next := cur.Clone()
		c, err := apply(next, s.clock())
		switch {
		case err != nil && !fresh:
			cur = nil
			continue
		case err != nil:
			return nil, wrap(op, err)
		case c == nil && !fresh:
			cur = nil
			continue
		case c == nil:
			return cur, nil
		}
		ok, err := s.casRun(ctx, next, cur.Version, c)
		if err != nil {
			return nil, wrap(op, err)
		}
		if ok {
			s.runs.Put(next)
			return next, nil
		}
		cur, fresh = nil, false
	}
	return nil, wrap(op, fmt.Errorf("run %s: gave up after %d attempts", id, maxCASAttempts))
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

// claimRunsSQL is store.RunResumable and store.ApplyRunClaim in SQL, one
// statement: pick the resumable runs, longest unchanged first, skipping runs
// another transaction holds — parked runs whose awaited proposal is not
// pending (or is gone), running runs whose lease ran out by $1 (its first
// WHERE term repeats runs_open's predicate) — then lease each to $2 for $3
// microseconds: running, nothing awaited, one more version, a random token,
// the generation the version written. Parameters: now, owner, lease
// microseconds, limit.
//
// PICK is one of two pickers: claimReady (the runs runs_ready holds: running
// ones, and parked ones marked ready) or claimSweep (every open run, the
// parked ones judged by their proposal's status).
const claimRunsSQL = `WITH pick AS (
	PICK
	ORDER BY r.updated_at, r.id LIMIT $4
	FOR UPDATE OF r SKIP LOCKED
), c AS (
	UPDATE _S_.runs r SET status = 'running', awaiting = '', ready = false, version = r.version + 1,
		lease_owner = $2, lease_token = replace(gen_random_uuid()::text, '-', ''), lease_generation = r.version + 1,
		lease_expires_at = $1 + $3::bigint * interval '1 microsecond', updated_at = $1
	FROM pick WHERE r.tenant = pick.tenant AND r.id = pick.id AND r.id = ANY (ARRAY(SELECT id FROM pick))
	RETURNING RCOLS, pick.updated_at AS picked_at
)
SELECT ` + runColumns + ` FROM c ORDER BY picked_at, id`

const (
	claimReady = `SELECT r.tenant, r.id, r.updated_at FROM _S_.runs r
	WHERE (r.status = 'running' OR (r.status = 'parked' AND r.ready))
	AND (r.status = 'parked' OR r.lease_expires_at IS NULL OR r.lease_expires_at <= $1)`
	claimSweep = `SELECT r.tenant, r.id, r.updated_at FROM _S_.runs r
	WHERE r.status IN ('running', 'parked')
	AND ((r.status = 'parked' AND NOT EXISTS (
			SELECT 1 FROM _S_.proposals p WHERE p.id = r.awaiting AND p.tenant = r.tenant AND p.status = 'pending'))
		OR (r.status = 'running' AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= $1)))`
)

// ClaimRuns implements store.Store.
func (s *Store) ClaimRuns(ctx context.Context, params *store.ClaimRunsParams) ([]*store.Run, error) {
	if params.Limit <= 0 || params.LeaseDuration <= 0 || params.Owner == "" {
		return nil, wrap("claim runs", fmt.Errorf("%w: owner, limit and lease are required", store.ErrInvalidParams))
	}
	pick := claimReady
	if params.Sweep {
		pick = claimSweep
	}
	query := s.sql(strings.NewReplacer("RCOLS", prefixedRun("r"), "PICK", pick).Replace(claimRunsSQL))
	rows, err := s.pool.Query(ctx, query, s.clock(), params.Owner, params.LeaseDuration.Microseconds(), params.Limit)
	if err != nil {
		return nil, wrap("claim runs", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, wrap("claim runs", err)
	}
	for _, r := range out {
		s.runs.Put(r)
	}
	return out, nil
}

// prefixedRun is runColumns, each qualified by alias.
func prefixedRun(alias string) string {
	cols := strings.Split(runColumns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
