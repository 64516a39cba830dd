// Package teststores opens an empty store of each kind for a test, on the
// test's clock, and runs a test on all three (memory, SQLite and
// PostgreSQL), so that the packages whose tests need every store share one
// way of opening them. PostgreSQL gets a schema of the test's own
// (internal/pgtest), which skips the test where the server is missing
// outside CI and fails it in CI.
package teststores

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/sqlitestore"
)

// Opener opens an empty store on the clock now, closed when t ends.
type Opener func(t *testing.T, now func() time.Time) store.Store

// Memory opens an in-memory store.
func Memory(t *testing.T, now func() time.Time) store.Store {
	return memstore.New(&memstore.Options{Now: now})
}

// SQLite opens a SQLite store in a file under t.TempDir().
func SQLite(t *testing.T, now func() time.Time) store.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"), &sqlitestore.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Postgres opens a PostgreSQL store on a schema of the test's own.
func Postgres(t *testing.T, now func() time.Time) store.Store {
	t.Helper()
	_, schema := pgtest.NewSchema(t)
	s, err := pgstore.Open(t.Context(), pgtest.PoolDSN(pgtest.DSN()), &pgstore.Options{Schema: schema, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// PairOpener opens two stores on one empty database, as two processes
// would share it, on the clock now; both are closed when t ends.
type PairOpener func(t *testing.T, now func() time.Time) (store.Store, store.Store)

// SQLitePair opens two SQLite stores on one file under t.TempDir().
func SQLitePair(t *testing.T, now func() time.Time) (store.Store, store.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "countersign.db")
	open := func() store.Store {
		s, err := sqlitestore.Open(t.Context(), path, &sqlitestore.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return open(), open()
}

// PostgresPair opens two PostgreSQL stores on one schema of the test's own.
func PostgresPair(t *testing.T, now func() time.Time) (store.Store, store.Store) {
	t.Helper()
	_, schema := pgtest.NewSchema(t)
	open := func() store.Store {
		s, err := pgstore.Open(t.Context(), pgtest.PoolDSN(pgtest.DSN()), &pgstore.Options{Schema: schema, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return open(), open()
}

// EachPair runs test on two SQLite stores sharing a file and on two
// PostgreSQL stores sharing a schema, as parallel subtests named sqlite and
// postgres: the stores that several processes share.
func EachPair(t *testing.T, test func(t *testing.T, open PairOpener)) {
	t.Helper()
	for _, s := range []struct {
		name string
		open PairOpener
	}{{"sqlite", SQLitePair}, {"postgres", PostgresPair}} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			test(t, s.open)
		})
	}
}

// Each runs test on memory, SQLite and PostgreSQL, as parallel subtests
// named memory, sqlite and postgres.
func Each(t *testing.T, test func(t *testing.T, open Opener)) {
	t.Helper()
	for _, s := range []struct {
		name string
		open Opener
	}{{"memory", Memory}, {"sqlite", SQLite}, {"postgres", Postgres}} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			test(t, s.open)
		})
	}
}
