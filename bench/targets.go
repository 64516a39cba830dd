package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
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

func targets() map[string]target {
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
			details: "pgx v5 pool on the local server (" + pgtest.DSN() + "), a fresh schema per run, fsync and synchronous_commit on",
			spec: func() (string, func(), error) {
				schema := newSchemaName()
				return "postgres:" + schema, func() { dropSchema(schema) }, nil
			}},
	}
}

// open makes a fresh, empty store of the scenario's target. spec names it
// for other processes and stores; done closes it and removes it.
func (e *env) open() (st store.Store, spec string, done func(), err error) {
	spec, cleanup, err := e.target.spec()
	if err != nil {
		return nil, "", nil, err
	}
	st, err = workload.OpenStore(e.ctx, spec)
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return st, spec, func() { _ = st.Close(); cleanup() }, nil
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
