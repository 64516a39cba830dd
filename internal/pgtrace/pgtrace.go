// Package pgtrace counts round trips to PostgreSQL: a pgx tracer, for the
// tests and benchmarks that hold the store to its round-trip budget
// (docs/design.md §15), with no server extension.
//
//	rt := &pgtrace.Counter{}
//	cfg.ConnConfig.Tracer = rt // a pgxpool.Config's
//	…
//	rt.Total()
//
// A round trip is each message pgx waits on the server for: each query or
// exec (BEGIN and COMMIT included), each statement it prepares, and each
// batch, which pgx sends pipelined and waits on once (its queries are not
// counted again). The batches a pgstore.Store sends on its own, after a
// commit, to deliver status notifications are counted apart (Notes): they
// are off their callers' path, and one serves every change made meanwhile.
package pgtrace

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Classes bounds the classes a Counter tells apart.
const Classes = 16

// Counter is a pgx query, prepare and batch tracer that counts round trips,
// by class. Its zero value counts everything in class 0.
type Counter struct {
	// Class, when set, gives the class a round trip counts against, from
	// the context of its query (0 ≤ class < Classes).
	Class func(context.Context) int

	n     [Classes]atomic.Int64
	notes atomic.Int64
}

var (
	_ pgx.QueryTracer   = (*Counter)(nil)
	_ pgx.PrepareTracer = (*Counter)(nil)
	_ pgx.BatchTracer   = (*Counter)(nil)
)

// Count returns the round trips counted against class.
func (c *Counter) Count(class int) int64 { return c.n[class].Load() }

// Total returns the round trips of every class, Notes left out.
func (c *Counter) Total() int64 {
	var t int64
	for i := range c.n {
		t += c.n[i].Load()
	}
	return t
}

// Notes returns the notification batches counted.
func (c *Counter) Notes() int64 { return c.notes.Load() }

func (c *Counter) class(ctx context.Context) int {
	if c.Class == nil {
		return 0
	}
	return c.Class(ctx)
}

type batchKey struct{}

// notifying reports whether sql is a statement of the store's notification
// batches (store/pgstore's sendNotifications), which alone turn
// synchronous_commit off.
func notifying(sql string) bool { return strings.Contains(sql, "synchronous_commit") }

func (c *Counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if ctx.Value(batchKey{}) == nil {
		c.n[c.class(ctx)].Add(1)
	}
	return ctx
}

func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *Counter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	if notes, _ := ctx.Value(batchKey{}).(bool); notes {
		c.notes.Add(1)
	} else {
		c.n[c.class(ctx)].Add(1)
	}
	return ctx
}

func (c *Counter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

func (c *Counter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	notes := d.Batch != nil && slices.ContainsFunc(d.Batch.QueuedQueries, func(q *pgx.QueuedQuery) bool { return notifying(q.SQL) })
	if notes {
		c.notes.Add(1)
	} else {
		c.n[c.class(ctx)].Add(1)
	}
	return context.WithValue(ctx, batchKey{}, notes)
}

func (c *Counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
