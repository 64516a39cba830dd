package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/pgtrace"
	"github.com/countersign/countersign/store"
)

// rtClass is what a round trip to PostgreSQL is counted against: the HTTP
// request it serves, by route, the worker's step, or the rest. A context
// carries it (withClass) to the tracer, through the server, the engine and
// the store.
type rtClass int

const (
	// rtOther is every round trip of an untagged context: the store's
	// notifications, sent after commit by a goroutine of its own, and the
	// seeding before a measurement.
	rtOther rtClass = iota
	// rtBench is the bench's own reads while it measures (watching for the
	// end of a drain, counting statuses).
	rtBench
	rtCall     // POST /v1/calls
	rtDecision // POST /v1/proposals/{id}/approve and /reject
	// rtWorker is the worker's round trips outside the steps below: its
	// listener, the expiry sweep, retries.
	rtWorker
	rtClaim  // the worker's ClaimBatch
	rtSettle // the worker's Settle and SettleMany
	rtRenew  // the worker's RenewLease
	rtClasses
)

var rtNames = [rtClasses]string{"other", "bench", "call", "decision", "worker", "claim", "settle", "renew"}

func (c rtClass) String() string { return rtNames[c] }

type classKey struct{}

// withClass tags ctx: the round trips made under it count against c.
func withClass(ctx context.Context, c rtClass) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

func classOf(ctx context.Context) rtClass {
	c, _ := ctx.Value(classKey{}).(rtClass)
	return c
}

// roundTrips counts the round trips to PostgreSQL (internal/pgtrace), by
// the class of their context. The store's notification batches, which
// pgtrace counts apart, are untagged work: they count as rtOther.
type roundTrips struct{ pgtrace.Counter }

// Every class is one pgtrace tells apart.
var _ [pgtrace.Classes - rtClasses]struct{}

func newRoundTrips() *roundTrips {
	return &roundTrips{pgtrace.Counter{Class: func(ctx context.Context) int { return int(classOf(ctx)) }}}
}

// rtCounts is a snapshot of a tracer's counts, by class.
type rtCounts [rtClasses]int64

// counts reads the tracer; nil reads as zeros.
func (r *roundTrips) counts() rtCounts {
	var c rtCounts
	if r != nil {
		for i := range c {
			c[i] = r.Count(i)
		}
		c[rtOther] += r.Notes()
	}
	return c
}

// sub is what was counted since before.
func (c rtCounts) sub(before rtCounts) rtCounts {
	for i := range c {
		c[i] -= before[i]
	}
	return c
}

func (c rtCounts) add(o rtCounts) rtCounts {
	for i := range c {
		c[i] += o[i]
	}
	return c
}

// worker is every round trip of the worker, its steps included.
func (c rtCounts) worker() int64 { return c[rtWorker] + c[rtClaim] + c[rtSettle] + c[rtRenew] }

// The line a drain's worker process prints on its way out: its counts, as
// JSON, and how many connections its pool opened.
const rtLinePrefix = "ROUNDTRIPS "

type rtLine struct {
	Counts map[string]int64 `json:"counts"`
	Conns  int              `json:"conns"`
}

func (c rtCounts) line(conns int) string {
	l := rtLine{Counts: map[string]int64{}, Conns: conns}
	for i, n := range c {
		l.Counts[rtClass(i).String()] = n
	}
	b, _ := json.Marshal(l) // a map of strings to numbers always marshals
	return rtLinePrefix + string(b)
}

// parseRTLine reads a worker process's line.
func parseRTLine(s string) (rtCounts, int, error) {
	var c rtCounts
	var l rtLine
	if err := json.Unmarshal([]byte(strings.TrimPrefix(s, rtLinePrefix)), &l); err != nil {
		return c, 0, fmt.Errorf("round-trip counts %q: %w", s, err)
	}
	for i := range c {
		c[i] = l.Counts[rtClass(i).String()]
	}
	return c, l.Conns, nil
}

// routeClass is the class of an HTTP request of the API.
func routeClass(r *http.Request) rtClass {
	if r.Method != http.MethodPost {
		return rtOther
	}
	switch p := r.URL.Path; {
	case p == "/v1/calls":
		return rtCall
	case strings.HasPrefix(p, "/v1/proposals/") && (strings.HasSuffix(p, "/approve") || strings.HasSuffix(p, "/reject")):
		return rtDecision
	}
	return rtOther
}

// tagRoutes tags each request's context with its route's class.
func tagRoutes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := routeClass(r); c != rtOther {
			r = r.WithContext(withClass(r.Context(), c))
		}
		h.ServeHTTP(w, r)
	})
}

// stepStore tags the worker's batched steps on their way to the store, so
// that the tracer tells claims, settlements and renewals apart whatever
// SQL the store sends. Only the worker's context (class rtWorker) is
// retagged: a wait-mode call that claims and settles stays a call.
type stepStore struct{ store.Store }

// Unwrap implements store.Wrapper.
func (s stepStore) Unwrap() store.Store { return s.Store }

func step(ctx context.Context, c rtClass) context.Context {
	if classOf(ctx) == rtWorker {
		return withClass(ctx, c)
	}
	return ctx
}

func (s stepStore) ClaimBatch(ctx context.Context, p *store.ClaimBatchParams) ([]*store.Claimed, error) {
	return s.Store.ClaimBatch(step(ctx, rtClaim), p)
}

func (s stepStore) Settle(ctx context.Context, p *store.SettleParams) (*store.TransitionResult, error) {
	return s.Store.Settle(step(ctx, rtSettle), p)
}

func (s stepStore) SettleMany(ctx context.Context, p []*store.SettleParams) ([]*store.TransitionResult, []error, error) {
	return s.Store.SettleMany(step(ctx, rtSettle), p)
}

func (s stepStore) RenewLease(ctx context.Context, p *store.RenewLeaseParams) (*store.Lease, error) {
	return s.Store.RenewLease(step(ctx, rtRenew), p)
}

// tagSteps wraps st in a stepStore. The store's optional interfaces
// (Listen, lanes, planner statistics) stay in reach of the engine and the
// worker through Unwrap, as with any store.Wrapper.
func tagSteps(st store.Store) store.Store { return stepStore{st} }

// poolConns is how many connections the store's pool holds open: after a
// run, the most it needed at once (idle connections are kept for half an
// hour). 0 when the store has no pool of its own.
func poolConns(st store.Store) int {
	if p, ok := st.(interface{ Pool() *pgxpool.Pool }); ok {
		return int(p.Pool().Stat().TotalConns())
	}
	return 0
}

// perOp divides a count among ops, 0 when there were none.
func perOp(n int64, ops int) float64 {
	if ops <= 0 {
		return 0
	}
	return float64(n) / float64(ops)
}
