package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
)

// The writer.
//
// Every write of a Store runs on one connection, the writer: a pool of one
// (database/sql) whose connection the writer holds for the Store's life as
// a *sql.Conn. A group's transaction is BEGIN IMMEDIATE … COMMIT run on it
// as statements (wtx), and the write path's statements are prepared on it
// once, the first time each runs, and kept.
//
// Until change 21 of docs/profiles/scale.md each group was a *sql.Tx of the
// pool: database/sql started a goroutine to watch its context, and bound
// every prepared statement to it anew (Tx.StmtContext: an allocation and
// the pool's dependency bookkeeping a statement); and a statement could be
// prepared only outside a transaction, on the next turn. Held, the
// connection runs its statements directly.
//
// The writer is used by one group at a time (the group's leader, group.go);
// its mutex only orders that use against Close.

// maxWriteStmts bounds the statements the writer keeps prepared: the write
// path's texts are a few dozen; a text beyond the bound runs unprepared.
const maxWriteStmts = 256

// writer is a Store's write connection and its prepared statements.
type writer struct {
	// db is the pool of one connection that conn holds.
	db *sql.DB

	mu     sync.Mutex
	conn   *sql.Conn // nil until the first transaction, or after a discard
	stmts  map[string]*sql.Stmt
	closed bool
}

// errWriterClosed is a write after Close.
var errWriterClosed = errors.New("sqlitestore: the store is closed")

// begin starts a write transaction: BEGIN IMMEDIATE, which takes SQLite's
// write lock at once, waiting for another process's up to the busy
// timeout. A connection that database/sql has given up on is replaced.
func (w *writer) begin(ctx context.Context) (*wtx, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, errWriterClosed
	}
	for attempt := 0; ; attempt++ {
		if w.conn == nil {
			c, err := w.db.Conn(ctx)
			if err != nil {
				return nil, err
			}
			w.conn = c
		}
		_, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE")
		if err == nil {
			return &wtx{w: w, conn: w.conn, open: true}, nil
		}
		if attempt > 0 || !errors.Is(err, sql.ErrConnDone) && !errors.Is(err, driver.ErrBadConn) {
			return nil, err
		}
		w.dropLocked()
	}
}

// stmt returns query prepared on the writer's connection, preparing it the
// first time; nil where it cannot (the query then runs unprepared and
// reports its own error).
func (w *writer) stmt(ctx context.Context, conn *sql.Conn, query string) *sql.Stmt {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st, ok := w.stmts[query]; ok || conn != w.conn || len(w.stmts) >= maxWriteStmts {
		return st
	}
	st, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if w.stmts == nil {
		w.stmts = map[string]*sql.Stmt{}
	}
	w.stmts[query] = st
	return st
}

// discard gives the connection up: database/sql closes it, which rolls
// back whatever transaction SQLite still holds open on it, and the next
// transaction opens a new one.
func (w *writer) discard(conn *sql.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if conn == w.conn {
		w.dropLocked()
	}
}

func (w *writer) dropLocked() { w.releaseLocked(true) }

// releaseLocked closes the prepared statements and lets the connection go:
// back to the pool, or, bad, closed by database/sql (driver.ErrBadConn).
func (w *writer) releaseLocked(bad bool) {
	for _, st := range w.stmts {
		_ = st.Close()
	}
	w.stmts = nil
	if w.conn != nil {
		if bad {
			_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = w.conn.Close()
		w.conn = nil
	}
}

// close releases the statements and the connection, and then the pool.
func (w *writer) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.releaseLocked(false)
	return w.db.Close()
}

// wtx is a write transaction on the writer's connection, its statements run
// prepared. SQLite spends a quarter of a busy worker's CPU parsing SQL when
// every statement is parsed anew (measured with BenchmarkDrain's profile),
// and the write path runs the same few statements over and over.
//
// Every statement of a write goes through ExecContext, QueryContext or
// QueryRowContext (nothing else reaches the connection), and wtx counts
// what they may have changed (changed): a group tells from it, without
// asking SQLite, whether a write that failed left a change behind
// (runTogether).
type wtx struct {
	w    *writer
	conn *sql.Conn
	// open is true from BEGIN until a COMMIT that succeeded or a ROLLBACK.
	open bool
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

// Commit commits the transaction. The transaction stays open for end when
// COMMIT fails.
func (t *wtx) Commit() error {
	if _, err := t.conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		return err
	}
	t.open = false
	return nil
}

// end rolls the transaction back if it is still open (its writes failed,
// or its COMMIT did). A ROLLBACK that fails may leave it open, which would
// refuse every later BEGIN: the connection is then discarded, which ends
// the transaction with it.
func (t *wtx) end() {
	if !t.open {
		return
	}
	t.open = false
	if _, err := t.conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.w.discard(t.conn)
	}
}

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

// ExecContext runs query prepared when it can, without ctx's cancellation
// (see write).
func (t *wtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	var (
		res sql.Result
		err error
	)
	if st := t.w.stmt(ctx, t.conn, query); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = t.conn.ExecContext(ctx, query, args...)
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
	if st := t.w.stmt(ctx, t.conn, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.conn.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query prepared when it can, without ctx's
// cancellation (see write).
func (t *wtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	if mayChange(query) {
		t.changed++
	}
	if st := t.w.stmt(ctx, t.conn, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.conn.QueryRowContext(ctx, query, args...)
}
