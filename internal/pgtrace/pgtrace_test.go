package pgtrace_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/pgtrace"
)

type classKey struct{}

// TestCounter: a query, a prepared statement's first run, a batch and a
// notification batch, each counted where it belongs.
func TestCounter(t *testing.T) {
	pgtest.Connect(t) // skips, or fails in CI, when the server is unreachable
	ctx := context.Background()
	rt := &pgtrace.Counter{Class: func(ctx context.Context) int { c, _ := ctx.Value(classKey{}).(int); return c }}
	cfg, err := pgxpool.ParseConfig(pgtest.PoolDSN(pgtest.DSN()))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = rt
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil { // connects, then one query
		t.Fatal(err)
	}
	base := rt.Total()
	tagged := context.WithValue(ctx, classKey{}, 3)
	var one int
	if err := pool.QueryRow(tagged, "SELECT $1::int", 1).Scan(&one); err != nil { // prepared: two round trips
		t.Fatal(err)
	}
	if err := pool.QueryRow(tagged, "SELECT $1::int", 2).Scan(&one); err != nil { // prepared before: one
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	b.Queue("SELECT 1")
	b.Queue("SELECT 2")
	if err := pool.SendBatch(tagged, b).Close(); err != nil {
		t.Fatal(err)
	}
	// The batch's statements are prepared inside it, in the same round
	// trip: query and prepare, query, batch.
	if got := rt.Count(3); got != 4 {
		t.Errorf("class 3 counted %d round trips, want 4", got)
	}
	notes := &pgx.Batch{}
	notes.Queue("BEGIN")
	notes.Queue("SET LOCAL synchronous_commit TO off")
	notes.Queue("COMMIT")
	before := rt.Total()
	if err := pool.SendBatch(ctx, notes).Close(); err != nil {
		t.Fatal(err)
	}
	if rt.Notes() != 1 || rt.Total() != before {
		t.Errorf("a notification batch: notes %d, total moved by %d; want 1 and 0", rt.Notes(), rt.Total()-before)
	}
	if rt.Total()-base != rt.Count(3) {
		t.Errorf("total %d beyond the start, class 3 %d: untagged work was counted", rt.Total()-base, rt.Count(3))
	}
}
