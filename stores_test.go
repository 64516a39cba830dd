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

// drivers names every store driver the engine's tests run on.
var drivers = []string{"memory", "sqlite", "postgres"}

// openStore opens a fresh, empty store of the named driver, closed when t
// ends: a memory store, a SQLite file in t.TempDir, or a PostgreSQL schema of
// its own. now is the store's clock (nil: time.Now).
func openStore(t testing.TB, driver string, now func() time.Time) store.Store {
	t.Helper()
	ctx := context.Background()
	var (
		st  store.Store
		err error
	)
	switch driver {
	case "memory":
		st = memstore.New(&memstore.Options{Now: now})
	case "sqlite":
		st, err = sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "engine.db"), &sqlitestore.Options{Now: now})
	case "postgres":
		_, schema := pgtest.NewSchema(t)
		st, err = pgstore.Open(ctx, pgtest.DSN(), &pgstore.Options{Schema: schema, Now: now})
	default:
		t.Fatalf("openStore: unknown driver %q", driver)
	}
	if err != nil {
		t.Fatalf("open %s store: %v", driver, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// eachStore runs f as a parallel subtest on every driver.
func eachStore(t *testing.T, f func(t *testing.T, driver string)) {
	t.Helper()
	for _, d := range drivers {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			f(t, d)
		})
	}
}
