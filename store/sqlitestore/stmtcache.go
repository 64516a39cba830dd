package sqlitestore

import (
	"context"
	"database/sql"
	"sync"
)

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
