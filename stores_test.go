package countersign_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/sqlitestore"
)

// storeOpener opens an empty store on the given clock, closed when t ends.
type storeOpener func(t *testing.T, now func() time.Time) store.Store

func openMemory(t *testing.T, now func() time.Time) store.Store {
	return memstore.New(&memstore.Options{Now: now})
}

func openSQLite(t *testing.T, now func() time.Time) store.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "engine.db"), &sqlitestore.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openPostgres(t *testing.T, now func() time.Time) store.Store {
	t.Helper()
	_, schema := pgtest.NewSchema(t)
	s, err := pgstore.Open(context.Background(), pgtest.PoolDSN(pgtest.DSN()), &pgstore.Options{Schema: schema, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// eachStore runs test on memory, SQLite and PostgreSQL, in parallel.
func eachStore(t *testing.T, test func(t *testing.T, open storeOpener)) {
	t.Helper()
	for _, s := range []struct {
		name string
		open storeOpener
	}{{"memory", openMemory}, {"sqlite", openSQLite}, {"postgres", openPostgres}} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			test(t, s.open)
		})
	}
}
