package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

var (
	pgxQuery   = pgx.TraceQueryStartData{SQL: "SELECT 1"}
	pgxPrepare = pgx.TracePrepareStartData{SQL: "SELECT 1"}
	pgxBatch   = pgx.TraceBatchStartData{}
)

// TestRoundTripsByClass checks the tracer's arithmetic: a query, a prepare
// and a batch count once each, against their context's class, and the
// queries of a batch do not count again.
func TestRoundTripsByClass(t *testing.T) {
	rt := newRoundTrips()
	call := withClass(context.Background(), rtCall)
	rt.TraceQueryStart(call, nil, pgxQuery)
	rt.TracePrepareStart(call, nil, pgxPrepare)
	inBatch := rt.TraceBatchStart(withClass(context.Background(), rtSettle), nil, pgxBatch)
	rt.TraceQueryStart(inBatch, nil, pgxQuery) // pipelined: the batch's
	rt.TraceQueryStart(context.Background(), nil, pgxQuery)
	rt.TraceQueryStart(withClass(context.Background(), rtDecision), nil, pgxQuery)
	got := rt.counts()
	want := rtCounts{rtOther: 1, rtCall: 2, rtDecision: 1, rtSettle: 1}
	if got != want {
		t.Errorf("counts %v, want %v", got, want)
	}
	before := got
	rt.TraceQueryStart(call, nil, pgxQuery)
	if d := rt.counts().sub(before); d != (rtCounts{rtCall: 1}) {
		t.Errorf("since before: %v, want one call", d)
	}
	if (*roundTrips)(nil).counts() != (rtCounts{}) {
		t.Error("a nil tracer reads as zeros")
	}
	if got.worker() != 1 || perOp(3, 2) != 1.5 || perOp(3, 0) != 0 {
		t.Errorf("worker() = %d, perOp(3, 2) = %v, perOp(3, 0) = %v", got.worker(), perOp(3, 2), perOp(3, 0))
	}
}

// TestRouteClass checks which requests count as calls and decisions.
func TestRouteClass(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         rtClass
	}{
		{"POST", "/v1/calls", rtCall},
		{"POST", "/v1/proposals/prp_1/approve", rtDecision},
		{"POST", "/v1/proposals/prp_1/reject", rtDecision},
		{"POST", "/v1/proposals/prp_1/cancel", rtOther},
		{"GET", "/v1/proposals/prp_1", rtOther},
		{"GET", "/v1/calls", rtOther},
		{"POST", "/v1/calls/x", rtOther},
		{"POST", "/v1/threads/approve", rtOther},
	} {
		if got := routeClass(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.method, c.path, got, c.want)
		}
	}
	// tagRoutes hands the handler a context of the route's class.
	var seen rtClass = -1
	h := tagRoutes(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = classOf(r.Context()) }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/proposals/prp_1/approve", nil))
	if seen != rtDecision {
		t.Errorf("the handler saw %v, want decision", seen)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	if seen != rtOther {
		t.Errorf("the handler saw %v, want other", seen)
	}
}

// classSpy records the class of the context of each step it is given.
type classSpy struct {
	store.Store
	seen []rtClass
}

func (s *classSpy) ClaimBatch(ctx context.Context, _ *store.ClaimBatchParams) ([]*store.Claimed, error) {
	s.seen = append(s.seen, classOf(ctx))
	return nil, nil
}
func (s *classSpy) Settle(ctx context.Context, _ *store.SettleParams) (*store.TransitionResult, error) {
	s.seen = append(s.seen, classOf(ctx))
	return nil, nil
}
func (s *classSpy) SettleMany(ctx context.Context, _ []*store.SettleParams) ([]*store.TransitionResult, []error, error) {
	s.seen = append(s.seen, classOf(ctx))
	return nil, nil, nil
}
func (s *classSpy) RenewLease(ctx context.Context, _ *store.RenewLeaseParams) (*store.Lease, error) {
	s.seen = append(s.seen, classOf(ctx))
	return nil, nil
}

// TestStepStore checks that the worker's steps are told apart, that a
// request's steps stay the request's, and that Listen is kept only where
// the store has it.
func TestStepStore(t *testing.T) {
	spy := &classSpy{}
	st := tagSteps(spy)
	steps := func(ctx context.Context) {
		_, _ = st.ClaimBatch(ctx, nil)
		_, _ = st.Settle(ctx, nil)
		_, _, _ = st.SettleMany(ctx, nil)
		_, _ = st.RenewLease(ctx, nil)
	}
	steps(withClass(context.Background(), rtWorker))
	steps(withClass(context.Background(), rtCall))
	steps(context.Background())
	want := []rtClass{rtClaim, rtSettle, rtSettle, rtRenew, rtCall, rtCall, rtCall, rtCall, rtOther, rtOther, rtOther, rtOther}
	if len(spy.seen) != len(want) {
		t.Fatalf("seen %v, want %v", spy.seen, want)
	}
	for i := range want {
		if spy.seen[i] != want[i] {
			t.Errorf("step %d: %v, want %v (all: %v)", i, spy.seen[i], want[i], spy.seen)
		}
	}
	if _, ok := store.As[store.Notifier](st); ok {
		t.Error("a store without Listen gained one")
	}
	if _, ok := store.As[store.Notifier](tagSteps(memstore.New(nil))); ok {
		t.Error("memstore gained Listen")
	}
}

// TestRTLine checks the line a drain's worker process prints for its
// parent.
func TestRTLine(t *testing.T) {
	c := rtCounts{rtClaim: 3, rtSettle: 4, rtRenew: 1, rtWorker: 2, rtOther: 7}
	l := c.line(5)
	if !strings.HasPrefix(l, rtLinePrefix) || strings.Contains(l, "\n") {
		t.Fatalf("line %q", l)
	}
	got, conns, err := parseRTLine(l)
	if err != nil || got != c || conns != 5 {
		t.Errorf("parseRTLine(%q) = %v, %d, %v; want %v, 5", l, got, conns, err, c)
	}
	for _, bad := range []string{"", rtLinePrefix, rtLinePrefix + "{", "READY"} {
		if _, _, err := parseRTLine(bad); err == nil {
			t.Errorf("parseRTLine(%q) accepted", bad)
		}
	}
}

// TestRoundTripsOnPostgreSQL counts a real store's round trips: a
// creation under a call's context counts as the call's, and the seeding
// and migrations before it do not.
func TestRoundTripsOnPostgreSQL(t *testing.T) {
	_, schema := pgtest.NewSchema(t)
	ctx := context.Background()
	rt := newRoundTrips()
	st, err := openSpec(ctx, "postgres:"+schema, 3, rt)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rt.counts()[rtOther] == 0 {
		t.Error("migrating counted no round trip")
	}
	before := rt.counts()
	if _, err := workload.SeedApproved(withClass(ctx, rtCall), st, "noop", "rt", 1); err != nil {
		t.Fatal(err)
	}
	d := rt.counts().sub(before)
	if d[rtCall] < 1 || d[rtDecision] != 0 || d.worker() != 0 {
		t.Errorf("one creation under a call: %v", d)
	}
	if n := poolConns(st); n < 1 || n > 3 {
		t.Errorf("the pool holds %d connections, want 1 to 3", n)
	}
	if poolConns(memstore.New(nil)) != 0 {
		t.Error("memstore has no pool")
	}
}

// TestRoundTripGoals checks the issue 12 goals from known figures.
func TestRoundTripGoals(t *testing.T) {
	riverRun = nil
	r := &Report{}
	r.add(
		Figure{Key: "b3.postgres.rt_call", Scenario: "B3", Store: "postgres", Value: 2},
		Figure{Key: "b3.postgres.rt_decision", Scenario: "B3", Store: "postgres", Value: 2},
		Figure{Key: "b6.postgres.rt_decision", Scenario: "B6", Store: "postgres", Value: 3},
		Figure{Key: "b1.postgres.procs1.rt_claim", Scenario: "B1", Store: "postgres", Value: 0.03},
		Figure{Key: "b1.postgres.procs1.rt_settle", Scenario: "B1", Store: "postgres", Value: 0.05},
		Figure{Key: "b1.postgres.procs4.rt_claim", Scenario: "B1", Store: "postgres", Value: 0.04},
	)
	got := map[string]GoalResult{}
	for _, g := range goals(r, config{Stores: []string{"sqlite", "postgres"}}) {
		got[g.ID] = g
	}
	for id, want := range map[string]string{
		"RT calls PostgreSQL":     "met",    // 2 ≤ 2
		"RT decisions PostgreSQL": "missed", // B6 3
		"RT drain PostgreSQL":     "met",    // what was measured is ≤ 0.05
	} {
		if got[id].Status != want {
			t.Errorf("goal %s: %+v, want %s", id, got[id], want)
		}
	}
	if d := got["RT decisions PostgreSQL"].Detail; d != "B3 decision 2.00; B6 decision 3.00" {
		t.Errorf("detail %q", d)
	}
	if d := got["RT drain PostgreSQL"].Detail; !strings.Contains(d, "B1 procs1 claim 0.030") || !strings.Contains(d, "B1 procs4 claim 0.040") {
		t.Errorf("detail %q", d)
	}
	for _, id := range []string{"RT calls SQLite", "RT decisions SQLite", "RT drain SQLite", "B3 vs SQLite SQLite"} {
		if g, ok := got[id]; ok {
			t.Errorf("goal %s judged on a store it is not for: %+v", id, g)
		}
	}
	// Issue 12's PostgreSQL goals against SQLite and River, in the same run.
	rs := &Report{}
	rs.add(
		Figure{Key: "b3.postgres.actions", Scenario: "B3", Store: "postgres", Value: 800},
		Figure{Key: "b3.sqlite.actions", Scenario: "B3", Store: "sqlite", Value: 1000},
		Figure{Key: "b6.postgres.rate", Scenario: "B6", Store: "postgres", Value: 3000},
		Figure{Key: "b6.postgres.p99", Scenario: "B6", Store: "postgres", Value: 15},
		Figure{Key: "b6.sqlite.rate", Scenario: "B6", Store: "sqlite", Value: 2900},
		Figure{Key: "b1.postgres.procs1", Scenario: "B1", Store: "postgres", Value: 25000},
		Figure{Key: "b1.postgres.procs4", Scenario: "B1", Store: "postgres", Value: 15000},
		Figure{Key: "river.postgres.tuned.drain", Scenario: "river", Store: "postgres", Value: 20000},
	)
	vs := map[string]GoalResult{}
	for _, g := range goals(rs, config{Stores: []string{"sqlite", "postgres"}}) {
		vs[g.ID] = g
	}
	for id, want := range map[string]string{
		"B3 vs SQLite PostgreSQL": "missed", // 800 < 1000
		"B6 PostgreSQL":           "met",    // 3000 ≥ 2900, p99 15
		"B1 PostgreSQL":           "missed", // 4 processes: 15,000 < 20,000
	} {
		if vs[id].Status != want {
			t.Errorf("goal %s: %+v, want %s", id, vs[id], want)
		}
	}
	r.Figures[4].Value = 0.06
	for _, g := range goals(r, config{Stores: []string{"postgres"}}) {
		if g.ID == "RT drain PostgreSQL" && g.Status != "missed" {
			t.Errorf("settlements at 0.06 per proposal: %+v", g)
		}
	}
	// The figures go into the JSON report as the others do.
	b, err := json.Marshal(r)
	if err != nil || !strings.Contains(string(b), `"key":"b3.postgres.rt_call"`) {
		t.Errorf("JSON %s, %v", b, err)
	}
}
