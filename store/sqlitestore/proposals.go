package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/cursor"
	"github.com/countersign/countersign/store"
)

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var insertProposalSQL = `INSERT INTO proposals (` + proposalColumns + `) VALUES (` +
	strings.TrimSuffix(strings.Repeat("?, ", proposalColumnCount), ", ") + `)`

// claimWhere is store.Claimable in SQL, in claim order: the row that has
// waited longest since its last change first. Its first term repeats
// proposals_claim's verbatim, so SQLite can use that partial index.
// Parameters: now, now, limit. The limit is written `+?`: a bare `LIMIT ?`
// hands its bound value to the planner, and SQLite then prepares the
// statement again whenever the value changes, as the worker's free slots do
// from one claim to the next (a claim of an empty store: 130 → 18 µs,
// BenchmarkClaimBatchLimits).
const claimWhere = `WHERE ((status = 'approved' AND mode = 'independent') OR status IN ('executing', 'reconciling'))
		AND (status = 'approved' OR lease_expires_at IS NULL OR lease_expires_at <= ?)
		AND (status = 'approved' OR next_attempt_at IS NULL OR next_attempt_at <= ?)
		ORDER BY updated_at, rowid LIMIT +?`

// The queries whose plans matter; plan_test.go pins the index each uses.
var (
	// claimSQL selects what claimBatchSQL claims (plan_test.go checks it).
	claimSQL = `SELECT ` + proposalColumns + ` FROM proposals ` + claimWhere

	// claimBatchSQL claims the rows claimSQL selects, in one statement: a
	// new lease (random token, generation = the version it writes), and a
	// first attempt for approved rows. Parameters: owner, lease expires_at,
	// now (updated_at), then claimSQL's.
	claimBatchSQL = `UPDATE proposals SET
		claimed_from = status,
		status = CASE WHEN status = 'approved' THEN 'executing' ELSE status END,
		attempt = attempt + (status = 'approved'),
		lease_owner = ?, lease_token = lower(hex(randomblob(16))), lease_generation = version + 1,
		lease_expires_at = ?, version = version + 1, updated_at = ?
		WHERE rowid IN (SELECT rowid FROM proposals ` + claimWhere + `)
		RETURNING ` + proposalColumns + `, claimed_from`

	// claimEventsSQL appends a claimed batch's proposal.claimed events, one
	// a row claimBatchSQL claimed, in id order, as the store's Go rule words
	// them ("from approved, attempt 1"). Parameters: type, owner, at, the
	// ids as a JSON array.
	claimEventsSQL = `INSERT INTO events (tenant, proposal_id, type, actor, via, status, detail, at)
		SELECT p.tenant, p.id, ?, ?, '', p.status, 'from ' || p.claimed_from || ', attempt ' || p.attempt, ?
		FROM proposals p WHERE p.id IN (SELECT value FROM json_each(?))
		ORDER BY p.id`

	// expireDueSQL is store.Due in SQL, most overdue first. Its first WHERE
	// term repeats proposals_expiry's. Parameters: now, limit.
	expireDueSQL = `SELECT ` + proposalColumns + ` FROM proposals
		WHERE (status = 'pending' OR (status = 'approved' AND mode IN ('wait', 'two_phase')))
		AND expires_at <= ?
		ORDER BY expires_at, rowid LIMIT ?`

	// escalateDueSQL and remindDueSQL are store.Escalatable and
	// store.Remindable in SQL, most overdue first, on the partial indexes
	// proposals_escalation and proposals_reminder (the conformance suite
	// pins each query to its rule). A reminder without a positive interval
	// is never due: such a row, selected, would take a place in the batch
	// that the sweep then skips. Parameters: now, limit.
	escalateDueSQL = `SELECT ` + proposalColumns + ` FROM proposals
		WHERE status = 'pending' AND escalate_at IS NOT NULL AND escalate_at <= ?
		ORDER BY escalate_at, rowid LIMIT ?`
	remindDueSQL = `SELECT ` + proposalColumns + ` FROM proposals
		WHERE status = 'pending' AND remind_at IS NOT NULL AND remind_at <= ? AND remind_every > 0
		ORDER BY remind_at, rowid LIMIT ?`

	// replacementSQL finds the pending proposals a new one may supersede
	// (store.Supersedes), oldest first. Parameters: tenant, thread,
	// requester, action, replacement key.
	replacementSQL = `SELECT ` + proposalColumns + ` FROM proposals
		WHERE tenant = ? AND thread_id = ? AND requester = ? AND action = ? AND replacement_key = ?
		AND status = 'pending' AND replacement_key <> ''
		ORDER BY rowid`

	// byConfirmationSQL: "confirmation_id <> ''" lets SQLite use the
	// partial unique index, and makes an empty id find nothing.
	// Parameters: tenant, confirmation id.
	byConfirmationSQL = `SELECT ` + proposalColumns + ` FROM proposals
		WHERE tenant = ? AND confirmation_id = ? AND confirmation_id <> ''`
)

// queryProposal reads the one proposal a query selects, or ErrNotFound.
func queryProposal(ctx context.Context, q querier, what, query string, args ...any) (*store.Proposal, error) {
	p, err := scanProposal(q.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return p, err
}

func getProposal(ctx context.Context, q querier, tenant, id string) (*store.Proposal, error) {
	return queryProposal(ctx, q, "proposal "+id, getProposalSQL, id, tenant)
}

const byToolCallSQL = `SELECT ` + proposalColumns + ` FROM proposals WHERE tenant = ? AND thread_id = ? AND tool_call_id = ?`

func getProposalByToolCall(ctx context.Context, q querier, tenant, thread, toolCall string) (*store.Proposal, error) {
	return queryProposal(ctx, q, "tool call "+toolCall, byToolCallSQL, tenant, thread, toolCall)
}

// queryProposals reads every proposal a query selects.
func queryProposals(ctx context.Context, q querier, query string, args ...any) ([]*store.Proposal, error) {
	return queryAll(ctx, q, scanProposal, query, args...)
}

// queryAll reads every row a query selects, each with scan.
func queryAll[T any](ctx context.Context, q querier, scan func(scanner) (*T, error), query string, args ...any) ([]*T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func insertProposal(ctx context.Context, tx *wtx, p *store.Proposal) error {
	vals, err := proposalValues(p)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, insertProposalSQL, vals...)
	return err
}

// updateProposalSQL writes the columns a transition may change (the
// rules of store/transition.go change no other: TestApplyRowWritesTheRule
// holds a row read back to the rule's result), guarded by the version the
// row was read at. Naming only these leaves alone every index that holds
// none of them: the full-row write had SQLite rewrite the entries of all
// the proposal's indexes, the listings' and the tool call's among them, on
// every decision (docs/profiles/scale.md, change 15).
const updateProposalSQL = `UPDATE proposals SET status = ?, decisions = ?, attempt = ?,
	lease_owner = ?, lease_token = ?, lease_generation = ?, lease_expires_at = ?, consumed_by = ?,
	next_attempt_at = ?, outcome = ?, approvers = ?, escalate_at = ?, remind_at = ?,
	version = ?, updated_at = ?
	WHERE id = ? AND version = ?`

// updateProposal writes p's changes (updateProposalSQL) over the row read
// at version old. It is the first statement of a transition's write, so a
// mismatch (a remembered row that another process changed since) leaves
// nothing written; a transition never overwrites silently.
func updateProposal(ctx context.Context, tx *wtx, p *store.Proposal, old int64) error {
	v, err := encodeChangeable(p)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, updateProposalSQL, string(p.Status), v.decisions, p.Attempt,
		v.leaseOwner, v.leaseToken, v.leaseGen, v.leaseExp, p.ConsumedBy,
		v.next, v.outcome, v.approvers, v.escalateAt, v.remindAt,
		p.Version, v.updated, p.ID, old)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return rowMoved(p.ID, old)
	}
	return nil
}

// errRowMoved is the error of a write guarded by the version its row was
// read (or remembered) at that found another version: it wrote nothing.
// It is a conflict.
var errRowMoved = fmt.Errorf("%w", store.ErrConflict)

func rowMoved(id string, old int64) error {
	return fmt.Errorf("proposal %s: row changed since version %d was read: %w", id, old, errRowMoved)
}

// persistChange writes a transition's side effects, in the transaction that
// writes the row.
func persistChange(ctx context.Context, tx *wtx, p *store.Proposal, c *store.Change, now time.Time) error {
	at := now.UnixNano()
	for _, e := range c.Events {
		_, err := tx.ExecContext(ctx, `INSERT INTO events (tenant, proposal_id, type, actor, actor_kind, via, status, detail, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.Tenant, p.ID, string(e.Type), e.Actor, e.ActorKind, e.Via, string(p.Status), e.Detail, at)
		if err != nil {
			return fmt.Errorf("append event: %w", err)
		}
	}
	if m := c.Admit; m != nil {
		outcome, err := encodeOutcome(m.Outcome)
		if err != nil {
			return fmt.Errorf("admit message: %w", err)
		}
		created, err := nanos("message.created_at", m.CreatedAt)
		if err != nil {
			return fmt.Errorf("admit message: %w", err)
		}
		// Only into a thread that still exists (an outcome settled after
		// its thread was deleted is dropped), and once per proposal and
		// outcome status: the key is messages_outcome, never the message
		// id, which is the server's own and unguessable (store.settle), so
		// no message a client posted can stand in for the outcome.
		_, err = tx.ExecContext(ctx, `INSERT INTO messages
				(id, tenant, thread_id, role, text, proposal_id, outcome, created_at, outcome_status)
			SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?
			WHERE EXISTS (SELECT 1 FROM threads WHERE tenant = ? AND id = ?)
			ON CONFLICT (tenant, proposal_id, outcome_status) WHERE outcome_status <> '' DO NOTHING`,
			m.ID, m.Tenant, m.ThreadID, m.Role, m.Text, m.ProposalID, outcome, created, string(m.Outcome.Status),
			m.Tenant, m.ThreadID)
		if err != nil {
			return fmt.Errorf("admit message: %w", err)
		}
	}
	if c.Grant != nil {
		if err := insertGrant(ctx, tx, p, c.Grant, now); err != nil {
			return fmt.Errorf("store grant: %w", err)
		}
	}
	if c.ActivateGrants {
		_, err := tx.ExecContext(ctx, `UPDATE grants SET activated_at = ?
			WHERE origin_proposal_id = ? AND activated_at IS NULL`, at, p.ID)
		if err != nil {
			return fmt.Errorf("activate grants: %w", err)
		}
	}
	if p.Status != store.StatusPending && leftPending(c) {
		// The runs parked on it may go on (runs.go, claimReadySQL).
		if _, err := tx.ExecContext(ctx, readyRunsSQL, p.ID, p.Tenant); err != nil {
			return fmt.Errorf("ready runs: %w", err)
		}
	}
	return nil
}

// applyRow finishes a transition applied to p (read at version old) and
// writes the row and its change.
func applyRow(ctx context.Context, tx *wtx, p *store.Proposal, old int64, c *store.Change, now time.Time) error {
	store.Finish(p, now)
	if err := updateProposal(ctx, tx, p, old); err != nil {
		return err
	}
	return persistChange(ctx, tx, p, c, now)
}

// step is what one transition did to its row inside the writer: p is the
// row as it now stands (as written, or as stored when the rule refused),
// from the status it started from, changed whether it was written, and
// ferr the rule's error (a refusal, or an error that goes with a change).
type step struct {
	p       *store.Proposal
	from    store.Status
	changed bool
	ferr    error
}

// transit runs one guarded transition inside the writer. It applies rule to
// guess, the row as this Store remembers it (internal/rowmemory), taken
// before the writer's turn so that the single writer neither reads nor
// decodes the row; or, with no guess, to the row read under the lock. A
// change is written by applyRow, guarded by the version the transition
// started from, as its first statement. A guess is only a guess: a row that
// moved since (another process wrote it) fails that guard having written
// nothing, and is read and the rule applied anew; and an answer that writes
// nothing (rule returns no change) is given only on a row read under the
// lock. rule may therefore be called twice, so it keeps
// nothing of a call but its answer. The error is the transaction's (the
// row's read, or its write), ErrNotFound included.
func transit(ctx context.Context, tx *wtx, tenant, id string, guess *store.Proposal, now time.Time,
	rule func(p *store.Proposal, now time.Time) (*store.Change, error),
) (step, error) {
	cur, fresh := guess, false
	for {
		if cur == nil {
			r, err := getProposal(ctx, tx, tenant, id)
			if err != nil {
				return step{}, err
			}
			cur, fresh = r, true
		}
		from, old := cur.Status, cur.Version
		// The rule works on a copy of a row read here, so a refused
		// transition returns the row as stored, not half-applied; a guess
		// is a copy already, and a refusal on it is judged again.
		w := cur
		if fresh {
			w = cur.Clone()
		}
		c, ferr := rule(w, now)
		if c == nil {
			if !fresh {
				cur = nil
				continue
			}
			return step{p: cur, from: from, ferr: ferr}, nil
		}
		if err := applyRow(ctx, tx, w, old, c, now); err != nil {
			if !fresh && errors.Is(err, errRowMoved) {
				cur = nil // nothing was written: read the row and start again
				continue
			}
			return step{}, err
		}
		return step{p: w, from: from, changed: true, ferr: ferr}, nil
	}
}

// mutate runs one guarded transition (transit) in its own write. fn may
// return both a change and an error: the change is committed and the error
// returned. It returns the proposal as it now stands, the status it was in
// and whether anything was written; a written row is remembered once it
// has committed (a version a rolled-back write made must never be).
func (s *Store) mutate(ctx context.Context, tenant, id string, fn func(p *store.Proposal, now time.Time) (*store.Change, error)) (*store.Proposal, store.Status, bool, error) {
	var st step
	guess := s.rows.Get(tenant, id)
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		g := guess
		guess = nil // a second run of this write starts from the row as stored
		var err error
		if st, err = transit(ctx, tx, tenant, id, g, now, fn); err != nil {
			return err
		}
		if st.changed && st.ferr != nil {
			return &commitErr{st.ferr}
		}
		return st.ferr
	})
	if err == nil && st.changed {
		s.rows.Put(st.p)
	}
	return st.p, st.from, st.changed, err
}

// transition wraps mutate for the methods that answer a TransitionResult,
// which is returned even alongside a refusal.
func (s *Store) transition(ctx context.Context, op, tenant, id string, fn func(p *store.Proposal, now time.Time) (*store.Change, error)) (*store.TransitionResult, error) {
	p, from, changed, err := s.mutate(ctx, tenant, id, fn)
	if err != nil {
		err = fmt.Errorf("sqlitestore: %s: %w", op, classify(err))
	}
	if p == nil {
		return nil, err
	}
	return &store.TransitionResult{Proposal: p, From: from, Changed: changed}, err
}

// CreateProposal implements store.Store.
func (s *Store) CreateProposal(ctx context.Context, params *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	if err := store.ValidateCreateParams(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: create proposal: %w", classify(err))
	}
	n := params.Proposal.Clone()
	var res *store.CreateProposalResult
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		// The write lock makes these lookups and the inserts below atomic,
		// across processes too: of concurrent first calls in a thread, the
		// first to take the lock owns it.
		owner, err := threadOwner(ctx, tx, n.Tenant, n.ThreadID)
		if err != nil {
			return fmt.Errorf("thread owner: %w", err)
		}
		if owner != nil && *owner != n.Requester {
			return fmt.Errorf("thread %s: %w", n.ThreadID, store.ErrNotThreadOwner)
		}
		// A tool call that has its proposal already (a replay) is not
		// looked up here: the insert below finds it (proposals_tool_call),
		// and so an id taken by another row, and the write rolls back
		// (errTaken). The engine looked the call up before it came here,
		// so the writer does not pay for that read on every creation.
		if params.GrantID != "" {
			// Re-read under the write lock, which a revocation takes too: a
			// revocation that returned is seen here.
			g, err := getGrant(ctx, tx, n.Tenant, params.GrantID)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("grant %s: %w", params.GrantID, err)
			}
			if g == nil || !store.GrantApproves(g, n, now) {
				// A replay answers with its proposal, live grant or not.
				existing, err := getProposalByToolCall(ctx, tx, n.Tenant, n.ThreadID, n.ToolCallID)
				if err == nil {
					res = &store.CreateProposalResult{Proposal: existing}
					return nil
				}
				if !errors.Is(err, store.ErrNotFound) {
					return err
				}
				return fmt.Errorf("approved by grant %s: %w", params.GrantID, store.ErrGrantNotLive)
			}
		}
		c := store.PrepareCreate(n, params, now)
		r := &store.CreateProposalResult{Created: true}
		if n.ReplacementKey != "" {
			olds, err := queryProposals(ctx, tx, replacementSQL, n.Tenant, n.ThreadID, n.Requester, n.Action, n.ReplacementKey)
			if err != nil {
				return fmt.Errorf("find superseded: %w", err)
			}
			for _, old := range olds {
				if !store.Supersedes(n, old) {
					continue
				}
				v := old.Version
				if err := applyRow(ctx, tx, old, v, store.ApplySupersede(old, n.ID, now), now); err != nil {
					return fmt.Errorf("supersede %s: %w", old.ID, err)
				}
				r.Superseded = append(r.Superseded, old)
			}
		}
		// The thread is created by its first call; owner says whether it
		// exists, read under the write lock.
		if owner == nil {
			if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO threads (tenant, id, owner, created_at) VALUES (?, ?, ?, ?)`,
				n.Tenant, n.ThreadID, n.Requester, now.UnixNano()); err != nil {
				return fmt.Errorf("ensure thread: %w", err)
			}
		}
		if err := insertProposal(ctx, tx, n); err != nil {
			if cols, ok := uniqueViolation(err); ok {
				return &errTaken{cols: cols}
			}
			return err
		}
		if err := persistChange(ctx, tx, n, c, now); err != nil {
			return err
		}
		r.Proposal = n
		res = r
		return nil
	})
	var taken *errTaken
	if errors.As(err, &taken) {
		// The write rolled back. A replay of the call answers with the
		// proposal its tool call has (a creation committed before this
		// one, which the read pool sees); else a key of another row was
		// taken.
		p, gerr := getProposalByToolCall(ctx, &s.rq, n.Tenant, n.ThreadID, n.ToolCallID)
		switch {
		case gerr == nil:
			return &store.CreateProposalResult{Proposal: p}, nil
		case !errors.Is(gerr, store.ErrNotFound):
			return nil, fmt.Errorf("sqlitestore: create proposal: %w", classify(gerr))
		case strings.Contains(taken.cols, "proposals.id"):
			return nil, fmt.Errorf("sqlitestore: create proposal: %w: id %s exists", store.ErrInvalidParams, n.ID)
		default:
			return nil, fmt.Errorf("sqlitestore: create proposal: %w: %s", store.ErrInvalidParams, taken.cols)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: create proposal: %w", classify(err))
	}
	if res.Created {
		// Committed: its decision may start from this copy (see mutate,
		// and the engine's decision on a remembered row).
		s.rows.Put(res.Proposal)
		s.rows.PutAll(res.Superseded)
	}
	return res, nil
}

// errTaken reports an insert of a proposal that a unique key refused: its
// tool call has a proposal (a replay), or its id or confirmation id is
// another row's. cols is SQLite's message, which names the key.
type errTaken struct{ cols string }

func (e *errTaken) Error() string { return "proposal key taken: " + e.cols }

// GetProposal implements store.Store.
func (s *Store) GetProposal(ctx context.Context, params *store.GetProposalParams) (*store.Proposal, error) {
	p, err := getProposal(ctx, &s.rq, params.Tenant, params.ID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get proposal: %w", classify(err))
	}
	// The engine reads a proposal before it decides it: the transition
	// that may follow starts from this copy (see mutate).
	s.rows.Put(p)
	return p, nil
}

// GetProposalByToolCall implements store.Store.
func (s *Store) GetProposalByToolCall(ctx context.Context, params *store.GetProposalByToolCallParams) (*store.Proposal, error) {
	p, err := getProposalByToolCall(ctx, &s.rq, params.Tenant, params.ThreadID, params.ToolCallID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get proposal by tool call: %w", classify(err))
	}
	return p, nil
}

// GetProposalByConfirmation implements store.Store.
func (s *Store) GetProposalByConfirmation(ctx context.Context, params *store.GetProposalByConfirmationParams) (*store.Proposal, error) {
	p, err := queryProposal(ctx, &s.rq, "confirmation", byConfirmationSQL,
		params.Tenant, params.ConfirmationID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get proposal by confirmation: %w", classify(err))
	}
	return p, nil
}

// ListProposals implements store.Store.
func (s *Store) ListProposals(ctx context.Context, params *store.ListProposalsParams) (*store.ProposalPage, error) {
	limit := params.Limit
	if limit < 0 || limit > store.MaxPageSize {
		return nil, fmt.Errorf("sqlitestore: list proposals: %w: limit %d", store.ErrInvalidParams, limit)
	}
	if limit == 0 {
		limit = store.MaxPageSize
	}
	codec, err := s.cursorCodec(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list proposals: %w", classify(err))
	}
	var after *cursor.Position
	if params.After != "" {
		pos, err := codec.Decode(params.After)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: list proposals: %w: %w", store.ErrInvalidCursor, classify(err))
		}
		after = &pos
	}
	query, args, err := listQuery(params, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list proposals: %w", classify(err))
	}
	rows, err := queryProposals(ctx, &s.rq, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list proposals: %w", classify(err))
	}
	page := &store.ProposalPage{}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		if len(last.ID) > cursor.MaxIDLen {
			// cursor.Encode would panic; ids this long are not made by the engine.
			return nil, fmt.Errorf("sqlitestore: list proposals: proposal id %.32s… is longer than %d bytes", last.ID, cursor.MaxIDLen)
		}
		page.Next = codec.Encode(cursor.Position{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	page.Proposals = rows
	return page, nil
}

// RememberedProposal implements store.Rememberer.
func (s *Store) RememberedProposal(tenant, id string) (*store.Proposal, bool) {
	p := s.rows.Get(tenant, id)
	return p, p != nil
}

// Decide implements store.Store.
func (s *Store) Decide(ctx context.Context, params *store.DecideParams) (*store.DecideResult, error) {
	var out store.DecideOutcome
	p, from, _, err := s.mutate(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		var c *store.Change
		var err error
		out, c, err = store.ApplyDecision(p, params, now)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: decide: %w", classify(err))
	}
	return &store.DecideResult{Outcome: out, Proposal: p, From: from, To: p.Status}, nil
}

// Cancel implements store.Store.
func (s *Store) Cancel(ctx context.Context, params *store.CancelParams) (*store.TransitionResult, error) {
	return s.transition(ctx, "cancel", params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyCancel(p, params, now)
	})
}

// Expire implements store.Store.
func (s *Store) Expire(ctx context.Context, params *store.ExpireParams) (*store.TransitionResult, error) {
	return s.transition(ctx, "expire", params.Tenant, params.ID, store.ApplyExpire)
}

// ExpireDue implements store.Store.
func (s *Store) ExpireDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "expire due", params, expireDueSQL, store.Due,
		func(p *store.Proposal, now time.Time) (*store.Change, error) { return store.ApplyExpire(p, now) })
}

// EscalateDue implements store.Store.
func (s *Store) EscalateDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "escalate due", params, escalateDueSQL, store.Escalatable, store.ApplyEscalate)
}

// RemindDue implements store.Store.
func (s *Store) RemindDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "remind due", params, remindDueSQL, store.Remindable, store.ApplyRemind)
}

// sweepDue applies apply, in one write transaction, to up to params.Limit
// proposals that query (parameters: now, limit) reads and due confirms.
func (s *Store) sweepDue(ctx context.Context, op string, params *store.ExpireDueParams, query string,
	due func(*store.Proposal, time.Time) bool, apply func(*store.Proposal, time.Time) (*store.Change, error)) ([]*store.Proposal, error) {
	if params.Limit <= 0 {
		return nil, fmt.Errorf("sqlitestore: %s: %w: limit %d", op, store.ErrInvalidParams, params.Limit)
	}
	var out []*store.Proposal
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		out = nil
		rows, err := queryProposals(ctx, tx, query, now.UnixNano(), params.Limit)
		if err != nil {
			return err
		}
		for _, p := range rows {
			if !due(p, now) {
				continue
			}
			old := p.Version
			c, err := apply(p, now)
			if err != nil || c == nil {
				continue
			}
			if err := applyRow(ctx, tx, p, old, c, now); err != nil {
				return fmt.Errorf("%s %s: %w", op, p.ID, err)
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, classify(err))
	}
	return out, nil
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, params *store.ClaimParams) (*store.Proposal, error) {
	p, _, changed, err := s.mutate(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyClaim(p, params, now)
	})
	if err != nil {
		err = fmt.Errorf("sqlitestore: claim: %w", classify(err))
		// A lapsed approval was expired by this claim: the caller gets the
		// expired proposal with the conflict, to settle the expiry once. A
		// proposal that someone else expired first is theirs to settle.
		var ce *store.ConflictError
		if changed && p != nil && errors.As(err, &ce) && ce.Got == store.StatusExpired && p.Status == store.StatusExpired {
			return p, err
		}
		return nil, err
	}
	return p, nil
}

// ClaimBatch implements store.Store.
func (s *Store) ClaimBatch(ctx context.Context, params *store.ClaimBatchParams) ([]*store.Claimed, error) {
	if params.Limit <= 0 || params.LeaseDuration <= 0 || params.Owner == "" {
		return nil, fmt.Errorf("sqlitestore: claim batch: %w: owner, limit and lease are required", store.ErrInvalidParams)
	}
	var out []*store.Claimed
	err := s.writeFirst(ctx, func(tx *wtx, now time.Time) error {
		out = nil
		at := now.UnixNano()
		expires, err := nanos("lease expires_at", now.Add(params.LeaseDuration))
		if err != nil {
			return err
		}
		// One statement claims the batch: store.ApplyClaimBatch in SQL (the
		// conformance suite holds the two to the same behaviour). SET sees
		// the old row, so claimed_from keeps the status it was claimed from.
		rows, err := tx.QueryContext(ctx, claimBatchSQL, params.Owner, expires, at, at, at, params.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var from string
			p, err := scanProposal(withExtra(rows, &from))
			if err != nil {
				return err
			}
			out = append(out, &store.Claimed{Proposal: p, From: store.Status(from)})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if len(out) == 0 {
			return nil
		}
		slices.SortFunc(out, func(a, b *store.Claimed) int { return strings.Compare(a.Proposal.ID, b.Proposal.ID) })
		ids := make([]string, len(out))
		for i, cl := range out {
			ids[i] = cl.Proposal.ID
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		// One statement appends the batch's events, in id order.
		if _, err := tx.ExecContext(ctx, claimEventsSQL, string(store.EventClaimed), params.Owner, at, string(list)); err != nil {
			return fmt.Errorf("append events: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: claim batch: %w", classify(err))
	}
	// The worker renews and settles what it claimed: from these copies
	// (see mutate and SettleMany).
	for _, cl := range out {
		s.rows.Put(cl.Proposal)
	}
	return out, nil
}

// RenewLease implements store.Store.
func (s *Store) RenewLease(ctx context.Context, params *store.RenewLeaseParams) (*store.Lease, error) {
	p, _, _, err := s.mutate(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyRenew(p, params, now)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: renew lease: %w", classify(err))
	}
	l := *p.Lease
	return &l, nil
}

// BeginRetry implements store.Store.
func (s *Store) BeginRetry(ctx context.Context, params *store.BeginRetryParams) (*store.Proposal, error) {
	p, _, _, err := s.mutate(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyBeginRetry(p, params, now)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: begin retry: %w", classify(err))
	}
	return p, nil
}

// Settle implements store.Store.
func (s *Store) Settle(ctx context.Context, params *store.SettleParams) (*store.TransitionResult, error) {
	return s.transition(ctx, "settle", params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplySettle(p, params, now)
	})
}

// Resolve implements store.Store.
func (s *Store) Resolve(ctx context.Context, params *store.ResolveParams) (*store.TransitionResult, error) {
	return s.transition(ctx, "resolve", params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyResolve(p, params, now)
	})
}

// listQuery builds ListProposals' query: the filters, then keyset order
// newest first, one row more than the page.
func listQuery(params *store.ListProposalsParams, after *cursor.Position, limit int) (string, []any, error) {
	var b strings.Builder
	args := []any{params.Tenant}
	b.WriteString(`SELECT ` + pcols + ` FROM proposals p WHERE p.tenant = ?`)
	if params.ThreadID != "" {
		b.WriteString(` AND p.thread_id = ?`)
		args = append(args, params.ThreadID)
	}
	if params.Action != "" {
		b.WriteString(` AND p.action = ?`)
		args = append(args, params.Action)
	}
	switch st := params.Statuses; {
	case len(st) == 1 && st[0].Valid():
		// One known status (a fixed identifier, never the caller's text) is
		// written as a literal: SQLite uses a partial index, such as the
		// inbox's proposals_pending, only for a query whose WHERE clause
		// contains the index's term, not a bound parameter.
		b.WriteString(` AND p.status = '` + string(st[0]) + `'`)
	case len(st) > 0:
		b.WriteString(` AND p.status IN (?` + strings.Repeat(", ?", len(st)-1) + `)`)
		for _, s := range st {
			args = append(args, string(s))
		}
	}
	if pos := after; pos != nil {
		// A row value comparison: SQLite turns it into a range on the
		// (…, created_at DESC, id DESC) index.
		b.WriteString(` AND (p.created_at, p.id) < (?, ?)`)
		args = append(args, pos.CreatedAt.UnixNano(), pos.ID)
	}
	if v := params.Visible; v != nil {
		// store.CanSee, in SQL: the requester, an approver naming one of
		// the principals, and operators for what is reconciling or
		// unknown. json_each compares whole array elements, never
		// substrings.
		principals, err := jsonList(append([]string{}, v.Principals...))
		if err != nil {
			return "", nil, err
		}
		b.WriteString(` AND (p.requester = ?
			OR EXISTS (SELECT 1 FROM json_each(p.approvers) a
				WHERE a.value <> 'requester' AND a.value IN (SELECT value FROM json_each(?)))`)
		args = append(args, v.Actor, principals)
		if v.Operator {
			b.WriteString(` OR p.status IN ('reconciling', 'unknown')`)
		}
		b.WriteString(`)`)
	}
	// One row more than the page tells whether another page follows.
	b.WriteString(` ORDER BY p.created_at DESC, p.id DESC LIMIT ?`)
	args = append(args, limit+1)
	return b.String(), args, nil
}

// ProposalTenant implements store.Store.
func (s *Store) ProposalTenant(ctx context.Context, id string) (string, error) {
	var tenant string
	err := s.rq.QueryRowContext(ctx, `SELECT tenant FROM proposals WHERE id = ?`, id).Scan(&tenant)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("sqlitestore: proposal tenant: proposal %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("sqlitestore: proposal tenant: %w", classify(err))
	}
	return tenant, nil
}

// CountByStatus implements store.Store.
func (s *Store) CountByStatus(ctx context.Context) (map[store.Status]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT status, count(*) FROM proposals GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: count by status: %w", classify(err))
	}
	defer rows.Close()
	out := map[store.Status]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("sqlitestore: count by status: %w", classify(err))
		}
		out[store.Status(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: count by status: %w", classify(err))
	}
	return out, nil
}
