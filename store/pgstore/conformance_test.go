package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	// Runs before the store closes (cleanups run last first).
	t.Cleanup(func() { checkSideTables(t, dsn, schema) })
	return s, dsn
}

// checkSideTables fails t unless each of the schema's side tables
// (pgstore.SideTables) holds exactly the rows its proposals call for, each
// as the proposal stands: every test that opens a store checks them at its
// end, the conformance suite's workloads and races included.
func checkSideTables(t testing.TB, dsn, schema string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("side table check: %v", err)
		return
	}
	defer func() { _ = conn.Close(ctx) }()
	for _, st := range pgstore.SideTables {
		wrong, err := pgstore.SideTableDiff(ctx, conn, pgx.Identifier{schema}.Sanitize(), st)
		if err != nil {
			t.Errorf("%s check: %v", st.Name, err)
		}
		for _, w := range wrong {
			t.Errorf("%s: %s", st.Name, w)
		}
	}
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
