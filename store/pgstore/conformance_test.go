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
	t.Cleanup(func() { checkClaimQueue(t, dsn, schema) })
	return s, dsn
}

// checkClaimQueue fails t unless the schema's claim queue holds exactly the
// proposals of store.Claimable's statuses, each as the proposal stands
// (claimqueue.go): every test that opens a store checks it at its end,
// the conformance suite's workloads and races included.
func checkClaimQueue(t testing.TB, dsn, schema string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("claim queue check: %v", err)
		return
	}
	defer func() { _ = conn.Close(ctx) }()
	S := pgx.Identifier{schema}.Sanitize()
	rows, err := conn.Query(ctx, `WITH want AS (
		SELECT id, tenant, status, lease_expires_at, next_attempt_at, updated_at FROM `+S+`.proposals
		WHERE (status = 'approved' AND mode = 'independent') OR status IN ('executing', 'reconciling')
	), got AS (SELECT id, tenant, status, lease_expires_at, next_attempt_at, updated_at FROM `+S+`.claim_queue)
	(SELECT 'missing', id, tenant FROM (SELECT * FROM want EXCEPT SELECT * FROM got) m)
	UNION ALL
	(SELECT 'stray', id, tenant FROM (SELECT * FROM got EXCEPT SELECT * FROM want) s)
	LIMIT 10`)
	if err != nil {
		t.Errorf("claim queue check: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var kind, id, tenant string
		if err := rows.Scan(&kind, &id, &tenant); err != nil {
			t.Errorf("claim queue check: %v", err)
			return
		}
		t.Errorf("claim queue: %s or differing row %s/%s", kind, tenant, id)
	}
	if err := rows.Err(); err != nil {
		t.Errorf("claim queue check: %v", err)
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
