package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/storetest"
)

// testPoolSize caps each test store's pool: the suite runs its subtests in
// parallel, each with a store (and so a pool) of its own, and the server's
// connections are finite.
const testPoolSize = "4"

// openTestStore opens a store on a fresh schema, closed when t ends.
func openTestStore(t testing.TB, opts *pgstore.Options) (*pgstore.Store, string) {
	t.Helper()
	dsn, schema := pgtest.NewSchema(t)
	o := pgstore.Options{}
	if opts != nil {
		o = *opts
	}
	o.Schema = schema
	s, err := pgstore.Open(context.Background(), withPoolSize(dsn), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dsn
}

// withPoolSize caps a DSN's pool at testPoolSize connections.
func withPoolSize(dsn string) string {
	return pgtest.WithParam(dsn, "pool_max_conns", testPoolSize)
}

// TestConformance runs the shared store suite against a fresh schema per test.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		s, _ := openTestStore(t, &pgstore.Options{Now: now})
		return s
	}, storetest.WithRuleQuery(pgstore.QueryRule))
}
