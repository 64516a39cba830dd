package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite"
)

// pgCommitters is the number of concurrent committers in the grouped
// PostgreSQL measurement: enough for the server's group commit to show.
const pgCommitters = 16

func init() {
	register(scenario{ID: "limit", order: 0, perStore: true,
		Title: "The limit: single-row durable commits",
		Method: fmt.Sprintf("Each measurement inserts one small row per transaction into a fresh table for a few seconds (-limit-window), with the store's own durability settings "+
			"(SQLite: WAL, synchronous=FULL, BEGIN IMMEDIATE; PostgreSQL: fsync and synchronous_commit on). PostgreSQL is measured with one "+
			"connection committing in turn, and with %d connections at once (the server's group commit may fold their flushes). "+
			"The higher figure is the limit B1 and B3 are compared with: commits needed per action × actions/s ÷ this rate.", pgCommitters),
		run: func(e *env) ([]Figure, error) {
			switch e.target.name {
			case "sqlite":
				rate, err := sqliteCommitRate(e.ctx, e.cfg.LimitWindow)
				if err != nil {
					return nil, err
				}
				return []Figure{{Key: "limit.sqlite.serial", Label: "single-row commits, one writer", Value: rate, Unit: "commits/s"}}, nil
			case "postgres":
				serial, err := pgCommitRate(e.ctx, e.cfg.LimitWindow, 1)
				if err != nil {
					return nil, err
				}
				grouped, err := pgCommitRate(e.ctx, e.cfg.LimitWindow, pgCommitters)
				if err != nil {
					return nil, err
				}
				return []Figure{
					{Key: "limit.postgres.serial", Label: "single-row commits, one connection", Value: serial, Unit: "commits/s"},
					{Key: "limit.postgres.grouped", Label: fmt.Sprintf("single-row commits, %d connections", pgCommitters), Value: grouped, Unit: "commits/s"},
				}, nil
			}
			return nil, fmt.Errorf("no commit-rate measurement for %s", e.target.name)
		}})
}

// commitLimit is the highest commit rate among a store's limit figures.
func commitLimit(figs []Figure) float64 {
	var best float64
	for _, f := range figs {
		best = max(best, f.Value)
	}
	return best
}

func sqliteCommitRate(ctx context.Context, window time.Duration) (float64, error) {
	dir, err := os.MkdirTemp("", "countersign-limit-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "FULL")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "limit.db")+"?"+q.Encode())
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		return 0, err
	}
	stmt, err := db.PrepareContext(ctx, "INSERT INTO t (v) VALUES (?)")
	if err != nil {
		return 0, err
	}
	defer stmt.Close()
	b := newBar(-1, "limit: SQLite commits")
	defer b.done()
	n := 0
	start := time.Now()
	for time.Since(start) < window {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, "row"); err != nil {
			_ = tx.Rollback()
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
		n++
		b.add(1)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func pgCommitRate(ctx context.Context, window time.Duration, committers int) (float64, error) {
	schema := newSchemaName()
	defer dropSchema(schema)
	cfg, err := pgxpool.ParseConfig(pgtest.DSN())
	if err != nil {
		return 0, err
	}
	cfg.MaxConns = int32(committers)
	cfg.MinConns = int32(committers)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	table := pgx.Identifier{schema, "t"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return 0, err
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (id bigserial PRIMARY KEY, v text NOT NULL)"); err != nil {
		return 0, err
	}
	b := newBar(-1, "limit: PostgreSQL commits, %d connection(s)", committers)
	defer b.done()
	var n atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < window {
				// Outside a transaction block each statement commits on its own.
				if _, err := pool.Exec(ctx, "INSERT INTO "+table+" (v) VALUES ($1)", "row"); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				n.Add(1)
				b.add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
