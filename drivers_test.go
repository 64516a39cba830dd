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

// storeDrivers opens a fresh store of each driver, closed when the test
// ends. now is the application's clock (nil: time.Now); PostgreSQL judges
// leases by the database's clock whatever now says.
var storeDrivers = []struct {
	name string
	open func(t *testing.T, now func() time.Time) store.Store
}{
	{"memory", func(t *testing.T, now func() time.Time) store.Store {
		return memstore.New(&memstore.Options{Now: now})
	}},
	{"sqlite", func(t *testing.T, now func() time.Time) store.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "cs.db"), &sqlitestore.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"postgres", func(t *testing.T, now func() time.Time) store.Store {
		dsn, schema := pgtest.NewSchema(t)
		s, err := pgstore.Open(context.Background(), dsn, &pgstore.Options{Schema: schema, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
}
