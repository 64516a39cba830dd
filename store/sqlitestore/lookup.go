package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/store"
)

// LookupCall implements store.Store. In WAL mode a statement, or a read
// transaction, reads the snapshot its first step began, so the thread, the
// tool call's record and the grant are of one committed state, and a
// creation that committed in between is seen whole or not at all.
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
		(SELECT id FROM proposals WHERE tenant = ? AND thread_id = ? AND tool_call_id = ?)` + lookupFrom

// lookupGrantSQL is lookupSQL with, after its columns, the seq of the
// grant findGrantSQL would read and the grant's columns (grantColumns),
// NULL when none is live: the 17 columns cost every such lookup less than
// a statement more costs the one that finds a grant.
var lookupGrantSQL = `SELECT t.owner, t.run_id, t.created_at,
		(SELECT id FROM proposals WHERE tenant = ? AND thread_id = ? AND tool_call_id = ?),
		g.seq, ` + qualified("g", grantColumns) + lookupFrom + `
	LEFT JOIN grants g ON g.seq = (SELECT seq FROM grants WHERE ` + findGrantWhere + `)`

// lookupColumns counts the columns of lookupSQL, lookupGrantColumns those
// of lookupGrantSQL.
const lookupColumns = 4

var lookupGrantColumns = lookupColumns + 1 + len(strings.Split(grantColumns, ","))

// qualified names each of columns (a comma-separated list) by alias.
func qualified(alias, columns string) string {
	names := strings.Split(columns, ",")
	for i, c := range names {
		names[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(names, ", ")
}

const lookupFrom = `
	FROM (SELECT 1) LEFT JOIN threads t ON t.tenant = ? AND t.id = ?`

// getProposalSQL reads a proposal by its id.
const getProposalSQL = `SELECT ` + proposalColumns + ` FROM proposals WHERE id = ? AND tenant = ?`

// lookupCall reads a new tool call, the common case, in one statement on
// the read pool, which reads one snapshot without a transaction: the
// thread, whether the tool call has a record, and the grant. A repeated
// tool call's record is read by its id, and the statement again before
// it, in one read transaction, so that what it returns is of one snapshot.
func (s *Store) lookupCall(ctx context.Context, params *store.LookupCallParams) (*store.CallLookup, error) {
	now := s.clock()
	l, proposalID, err := lookupRow(ctx, &s.rq, params, now)
	if err != nil || proposalID == "" {
		return l, err
	}
	return s.lookupSnapshot(ctx, params, now)
}

// lookupRow runs lookupSQL, or lookupGrantSQL when params ask for a grant,
// on q, and returns the thread and the grant it read, and the id of the
// tool call's proposal ("" when the tool call is new).
func lookupRow(ctx context.Context, q querier, params *store.LookupCallParams, now time.Time) (*store.CallLookup, string, error) {
	query, n := lookupSQL, lookupColumns
	args := []any{params.Tenant, params.ThreadID, params.ToolCallID, params.Tenant, params.ThreadID}
	if params.Grant != nil {
		query, n = lookupGrantSQL, lookupGrantColumns
		args = append(args, findGrantArgs(params.Grant, now)...)
	}
	vals := make(valueScanner, n)
	dest := make([]any, n)
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := q.QueryRowContext(ctx, query, args...).Scan(dest...); err != nil {
		return nil, "", fmt.Errorf("thread and tool call: %w", err)
	}
	var owner, runID, proposalID sql.NullString
	var created, grantSeq sql.NullInt64
	if err := vals.Scan(&owner, &runID, &created, &proposalID); err != nil {
		return nil, "", fmt.Errorf("thread and tool call: %w", err)
	}
	l := &store.CallLookup{}
	if owner.Valid {
		l.Thread = &store.Thread{Tenant: params.Tenant, ID: params.ThreadID, Owner: owner.String, RunID: runID.String, CreatedAt: fromNanos(created.Int64)}
	}
	if params.Grant != nil {
		if err := vals[lookupColumns:].Scan(&grantSeq); err != nil {
			return nil, "", fmt.Errorf("grant: %w", err)
		}
		if grantSeq.Valid {
			g, err := scanGrant(vals[lookupColumns+1:])
			if err != nil {
				return nil, "", fmt.Errorf("grant: %w", err)
			}
			l.Grant = g
		}
	}
	return l, proposalID.String, nil
}

// lookupSnapshot reads the thread, the tool call's record and the grant
// in one read transaction.
func (s *Store) lookupSnapshot(ctx context.Context, params *store.LookupCallParams, now time.Time) (*store.CallLookup, error) {
	// The statements are prepared on the pool before the transaction takes
	// a connection of it: preparing needs one, and a pool of one
	// connection would wait for itself.
	q := &snapshot{stmts: map[string]*sql.Stmt{}}
	for _, query := range []string{lookupSQL, lookupGrantSQL, getProposalSQL} {
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
	l, proposalID, err := lookupRow(ctx, q, params, now)
	if err != nil || proposalID == "" {
		return l, err
	}
	if l.Proposal, err = getProposal(ctx, q, params.Tenant, proposalID); err != nil {
		return nil, fmt.Errorf("tool call: %w", err)
	}
	return l, nil
}

// valueScanner holds the values of a row read into *any, and scans them
// into typed destinations as database/sql would for the kinds the store
// reads (text into a string, an integer into an int64, anything into an
// sql.Scanner), so that one statement's columns can be read in parts, some
// of them only when they are not NULL.
type valueScanner []any

// Scan implements scanner: the i-th value into dest[i].
func (v valueScanner) Scan(dest ...any) error {
	if len(dest) > len(v) {
		return fmt.Errorf("%d columns to scan into %d destinations", len(v), len(dest))
	}
	for i, d := range dest {
		switch d := d.(type) {
		case sql.Scanner:
			if err := d.Scan(v[i]); err != nil {
				return fmt.Errorf("column %d: %w", i, err)
			}
		case *string:
			switch x := v[i].(type) {
			case string:
				*d = x
			case []byte:
				*d = string(x)
			default:
				return fmt.Errorf("column %d: %T is not text", i, v[i])
			}
		case *int64:
			x, ok := v[i].(int64)
			if !ok {
				return fmt.Errorf("column %d: %T is not an integer", i, v[i])
			}
			*d = x
		default:
			return fmt.Errorf("column %d: cannot scan into %T", i, d)
		}
	}
	return nil
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
