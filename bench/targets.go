package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/jackc/pgx/v5"
)

// target is one store the suite measures.
type target struct {
	name  string // "sqlite", "postgres"
	title string
	// spec names a fresh, empty store for workload.OpenStore; cleanup
	// removes it.
	spec    func() (spec string, cleanup func(), err error)
	details string
}

func targets(cfg config) map[string]target {
	pool := fmt.Sprintf("a pool of %d connections (pgstore.DefaultMaxConns, a server's default)", cfg.PGMaxConns)
	if cfg.PGMaxConns != pgstore.DefaultMaxConns {
		pool = fmt.Sprintf("a pool of %d connections (-pg-max-conns; a server's default, pgstore.DefaultMaxConns, is %d)", cfg.PGMaxConns, pgstore.DefaultMaxConns)
	}
	return map[string]target{
		"sqlite": {name: "sqlite", title: "SQLite",
			details: "modernc.org/sqlite in a temporary file, WAL, synchronous=FULL, one writer connection per process",
			spec: func() (string, func(), error) {
				dir, err := os.MkdirTemp("", "countersign-bench-")
				if err != nil {
					return "", nil, err
				}
				return "sqlite:" + filepath.Join(dir, "bench.db"), func() { os.RemoveAll(dir) }, nil
			}},
		"postgres": {name: "postgres", title: "PostgreSQL",
			details: "pgx v5 pool on the local server (" + pgtest.DSN() + "), " + pool + " per store, a fresh schema per run, fsync and synchronous_commit on",
			spec: func() (string, func(), error) {
				schema := newSchemaName()
				return "postgres:" + schema, func() { dropSchema(schema) }, nil
			}},
	}
}

// open makes a fresh, empty store of the scenario's target. spec names it
// for other processes and stores; done closes it and removes it.
func (e *env) open() (st store.Store, spec string, done func(), err error) {
	return e.openWith(nil)
}

// openTraced is open with round trips to PostgreSQL counted (rt is nil on
// SQLite).
func (e *env) openTraced() (st store.Store, spec string, rt *roundTrips, done func(), err error) {
	if e.target.name == "postgres" {
		rt = newRoundTrips()
	}
	st, spec, done, err = e.openWith(rt)
	if err == nil && e.seals != nil {
		st = timedSeals{Store: st, c: e.seals}
	}
	return st, spec, rt, done, err
}

func (e *env) openWith(rt *roundTrips) (st store.Store, spec string, done func(), err error) {
	spec, cleanup, err := e.target.spec()
	if err != nil {
		return nil, "", nil, err
	}
	st, err = openSpec(e.ctx, spec, e.cfg.PGMaxConns, rt)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return st, spec, func() { _ = st.Close(); cleanup() }, nil
}

// openSpec opens the store spec names (see workload.Open) with a
// PostgreSQL pool of maxConns and, if rt is not nil, its round trips
// counted by rt.
func openSpec(ctx context.Context, spec string, maxConns int, rt *roundTrips) (store.Store, error) {
	o := &workload.Options{MaxConns: maxConns}
	if rt != nil {
		o.Tracer = rt
	}
	return workload.Open(ctx, spec, o)
}

func newSchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "cs_bench_" + hex.EncodeToString(b[:])
}

func dropSchema(schema string) {
	conn, err := pgx.Connect(context.Background(), pgtest.DSN())
	if err == nil {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		_ = conn.Close(context.Background())
	}
}
