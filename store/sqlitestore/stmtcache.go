package sqlitestore

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// wtx is a write transaction that runs its statements prepared. SQLite
// spends a quarter of a busy worker's CPU parsing SQL when every statement is
// parsed anew (measured with BenchmarkDrain's profile), and the write path
// runs the same few statements over and over.
//
// A statement is prepared on the writer pool outside any transaction (the
// pool has one connection, which a transaction holds), so the first use of a
// query runs unprepared and asks for it; write prepares what was asked once
// the transaction has ended. Later transactions bind the prepared statement
// to their connection (Tx.StmtContext), which reuses it: it was prepared on
// that same, only connection.
//
// Every statement of a write goes through ExecContext, QueryContext or
// QueryRowContext (the *sql.Tx is not embedded, so no other way reaches
// it), and wtx counts what they may have changed (changed): a group tells
// from it, without asking SQLite, whether a write that failed left a change
// behind (runTogether).
type wtx struct {
	tx    *sql.Tx
	stmts *stmtCache
	// changed counts the rows the statements run so far reported changed
	// (sqlite3_changes()), plus one for every statement whose changes wtx
	// cannot read: a query that is not a SELECT (UPDATE … RETURNING),
	// a text of several statements. It over-counts, never under: a row a
	// trigger or a foreign key's action changes follows a row the statement
	// itself changed, and a statement that fails changed nothing (SQLite
	// undoes it, or the error may have ended the transaction, which the
	// group checks apart).
	changed int64
}

// Commit commits the transaction.
func (t *wtx) Commit() error { return t.tx.Commit() }

// Rollback rolls the transaction back; a no-op after Commit.
func (t *wtx) Rollback() error { return t.tx.Rollback() }

// mayChange reports whether a query's text may change rows: anything but a
// single SELECT.
func mayChange(query string) bool {
	q := strings.TrimSpace(query)
	return several(q) || len(q) < len("SELECT") || !strings.EqualFold(q[:len("SELECT")], "SELECT")
}

// several reports whether a text holds more than one statement (or a
// semicolon inside a literal or a comment, which only over-counts).
func several(query string) bool {
	return strings.Contains(strings.TrimRight(query, "; \t\r\n"), ";")
}

type stmtCache struct {
	mu     sync.Mutex
	ready  map[string]*sql.Stmt
	wanted map[string]bool
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.ready[query]
	if !ok {
		if c.wanted == nil {
			c.wanted = map[string]bool{}
		}
		c.wanted[query] = true
	}
	return st
}

// prepareWanted prepares the queries asked for since the last call. The
// caller holds no transaction on db. A failure only leaves a query unprepared.
func (c *stmtCache) prepareWanted(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	wanted := c.wanted
	c.wanted = nil
	c.mu.Unlock()
	for q := range wanted {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.ready == nil {
			c.ready = map[string]*sql.Stmt{}
		}
		if _, dup := c.ready[q]; dup {
			st.Close()
		} else {
			c.ready[q] = st
		}
		c.mu.Unlock()
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.ready {
		st.Close()
	}
	c.ready = nil
}

// ExecContext runs query prepared when it can, without ctx's
// cancellation (see write).
func (t *wtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	var (
		res sql.Result
		err error
	)
	if st := t.stmts.get(query); st != nil {
		res, err = t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		res, err = t.tx.ExecContext(ctx, query, args...)
	}
	if err == nil {
		t.count(res, query)
	}
	return res, err
}

// count adds what an Exec of query changed to t.changed. SQLite reports
// the rows of the last statement that changed rows (sqlite3_changes()): a
// statement that is not an INSERT, UPDATE or DELETE reports the one before
// it, which over-counts.
func (t *wtx) count(res sql.Result, query string) {
	n, err := res.RowsAffected()
	if err != nil || n < 0 || several(query) {
		n = max(n, 1)
	}
	t.changed += n
}

// QueryContext runs query prepared when it can, without ctx's
// cancellation (see write).
func (t *wtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if mayChange(query) {
		t.changed++
	}
	if st := t.stmts.get(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query prepared when it can, without ctx's
// cancellation (see write).
func (t *wtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	if mayChange(query) {
		t.changed++
	}
	if st := t.stmts.get(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}

// readDB runs the read pool's queries prepared. A *sql.Stmt of a pool
// prepares itself on each connection it runs on, once, so the cache holds
// one per query text. Listing queries vary with their filters; the cache
// stops growing at maxReadStmts and runs further texts unprepared.
type readDB struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

const maxReadStmts = 256

func (r *readDB) stmt(ctx context.Context, query string) *sql.Stmt {
	r.mu.Lock()
	st, ok := r.stmts[query]
	full := len(r.stmts) >= maxReadStmts
	r.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := r.db.PrepareContext(ctx, query)
	if err != nil {
		return nil // the query runs unprepared and reports its own error
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, dup := r.stmts[query]; dup {
		st.Close()
		return old
	}
	if r.stmts == nil {
		r.stmts = map[string]*sql.Stmt{}
	}
	r.stmts[query] = st
	return st
}

func (r *readDB) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.stmts {
		st.Close()
	}
	r.stmts = nil
}

// QueryContext runs query prepared when it can.
func (r *readDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.db.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query prepared when it can.
func (r *readDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.db.QueryRowContext(ctx, query, args...)
}

// ExecContext runs query on the pool; the read pool is query_only.
func (r *readDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.db.ExecContext(ctx, query, args...)
}
