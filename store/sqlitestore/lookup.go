package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/countersign/countersign/store"
)

// LookupCall implements store.Store. Its reads run in one read transaction
// on the read pool: in WAL mode a transaction reads the snapshot its first
// statement began, so the thread, the tool call's record and the grant are
// of one committed state, and a creation that committed in between is seen
// whole or not at all.
func (s *Store) LookupCall(ctx context.Context, params *store.LookupCallParams) (*store.CallLookup, error) {
	if err := store.ValidateLookupCallParams(params); err != nil {
		return nil, fmt.Errorf("sqlitestore: lookup call: %w", classify(err))
	}
	l, err := s.lookupCall(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: lookup call: %w", classify(err))
	}
	return l, nil
}

// lookupSQL reads, in one statement, the thread (its columns NULL when it
// does not exist) and the id of the proposal the tool call has, if any.
// A new call, the common case, finds no proposal: reading its id alone
// spares the statement the proposal's 47 columns, whose names and
// declared types the driver builds for every query. A replay reads the
// proposal by that id, in the same snapshot.
const lookupSQL = `SELECT t.owner, t.run_id, t.created_at,
		(SELECT id FROM proposals WHERE tenant = ? AND thread_id = ? AND tool_call_id = ?)
	FROM (SELECT 1) LEFT JOIN threads t ON t.tenant = ? AND t.id = ?`

func (s *Store) lookupCall(ctx context.Context, params *store.LookupCallParams) (*store.CallLookup, error) {
	// The statements are prepared on the pool before the transaction takes
	// a connection of it: preparing needs one, and a pool of one
	// connection would wait for itself.
	q := &snapshot{stmts: map[string]*sql.Stmt{}}
	for _, query := range []string{lookupSQL, findGrantSQL} {
		if st := s.rq.stmt(ctx, query); st != nil {
			q.stmts[query] = st
		}
	}
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }() // it wrote nothing
	q.tx = tx
	l := &store.CallLookup{}
	var owner, runID, proposalID sql.NullString
	var created sql.NullInt64
	if err := q.QueryRowContext(ctx, lookupSQL, params.Tenant, params.ThreadID, params.ToolCallID, params.Tenant, params.ThreadID).
		Scan(&owner, &runID, &created, &proposalID); err != nil {
		return nil, fmt.Errorf("thread and tool call: %w", err)
	}
	if owner.Valid {
		l.Thread = &store.Thread{Tenant: params.Tenant, ID: params.ThreadID, Owner: owner.String, RunID: runID.String, CreatedAt: fromNanos(created.Int64)}
	}
	if proposalID.Valid {
		if l.Proposal, err = getProposal(ctx, q, params.Tenant, proposalID.String); err != nil {
			return nil, fmt.Errorf("tool call: %w", err)
		}
	}
	if params.Grant != nil {
		l.Grant, err = findGrant(ctx, q, params.Grant, s.clock())
		switch {
		case errors.Is(err, sql.ErrNoRows):
			l.Grant = nil
		case err != nil:
			return nil, fmt.Errorf("grant: %w", err)
		}
	}
	return l, nil
}

// snapshot is a read transaction that runs the statements prepared for it
// on the pool, bound to its connection (Tx.StmtContext reuses a statement
// already prepared there).
type snapshot struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

func (q *snapshot) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.stmts[query]; st != nil {
		return q.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}

func (q *snapshot) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.stmts[query]; st != nil {
		return q.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, query, args...)
}

func (q *snapshot) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return q.tx.ExecContext(ctx, query, args...)
}
