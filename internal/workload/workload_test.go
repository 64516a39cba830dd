package workload

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
)

// counter counts the queries its pool's connections start.
type counter struct{ n atomic.Int64 }

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestOpenPostgresPool checks the pool Open gives a PostgreSQL store: a
// test's size by default, the size asked for, and the tracer asked for.
func TestOpenPostgresPool(t *testing.T) {
	_, schema := pgtest.NewSchema(t)
	ctx := context.Background()
	for _, c := range []struct {
		opts *Options
		want int
	}{{nil, pgtest.MaxConns}, {&Options{MaxConns: 9}, 9}, {&Options{MaxConns: 2, Tracer: &counter{}}, 2}} {
		st, err := Open(ctx, "postgres:"+schema, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(st.(interface{ Pool() *pgxpool.Pool }).Pool().Config().MaxConns); got != c.want {
			t.Errorf("Open with %+v: a pool of %d, want %d", c.opts, got, c.want)
		}
		if c.opts != nil && c.opts.Tracer != nil {
			tr := c.opts.Tracer.(*counter)
			before := tr.n.Load()
			if _, err := st.CountByStatus(ctx); err != nil {
				t.Fatal(err)
			}
			if tr.n.Load() == before {
				t.Error("the tracer saw no query of CountByStatus")
			}
		}
		if _, ok := st.(store.Notifier); !ok {
			t.Error("the store lost Listen")
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(ctx, "postgres:"+schema, &Options{MaxConns: -1}); err == nil {
		t.Error("Open accepted MaxConns -1")
	}
	if _, err := Open(ctx, "mysql:x", nil); err == nil {
		t.Error("Open accepted an unknown store")
	}
}
