package countersign_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/pgtrace"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// creationTrips counts the round trips CreateProposal takes.
type creationTrips struct {
	store.Store
	rt    *pgtrace.Counter
	trips atomic.Int64
}

func (s *creationTrips) CreateProposal(ctx context.Context, p *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	before := s.rt.Total()
	defer func() { s.trips.Add(s.rt.Total() - before) }()
	return s.Store.CreateProposal(ctx, p)
}

// On PostgreSQL a call's reads before its record are one round trip: the
// LookupCall. The pool holds one connection, so that the first calls
// prepare every statement on it.
func TestCallLookupIsOneRoundTripOnPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(t)
	cfg, err := pgxpool.ParseConfig(pgtest.WithParam(dsn, "pool_max_conns", "1"))
	if err != nil {
		t.Fatal(err)
	}
	rt := &pgtrace.Counter{} // the store's notifications, sent after a commit whenever its sender gets to them, are left out
	cfg.ConnConfig.Tracer = rt
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := &creationTrips{rt: rt}
	h := newHarness(t, harnessOpts{rules: []countersign.Rule{grantRule()}, open: func(t *testing.T, now func() time.Time) store.Store {
		s, err := pgstore.New(ctx, pool, &pgstore.Options{Schema: schema, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		st.Store = s
		return st
	}})
	trips := func(f func()) int64 {
		t.Helper()
		before := rt.Total()
		f()
		return rt.Total() - before
	}
	// The first calls prepare the statements.
	h.call(refundCall("warm_1", countersign.ModeTwoPhase, grantInput))
	h.call(refundCall("warm_1", countersign.ModeTwoPhase, grantInput))

	// Another customer: the call supersedes nothing.
	const input = `{"amount":40,"customer":"c_1"}`
	st.trips.Store(0)
	total := trips(func() { h.call(refundCall("call_1", countersign.ModeTwoPhase, input)) })
	create := st.trips.Load()
	if create == 0 {
		t.Fatal("the new call made no CreateProposal")
	}
	if lookup := total - create; lookup != 1 {
		t.Errorf("a new asked call took %d round trips, its CreateProposal %d: the rest took %d, want 1", total, create, lookup)
	}
	t.Logf("a new asked call: %d round trips, of which CreateProposal %d", total, create)
	if n := trips(func() { h.call(refundCall("call_1", countersign.ModeTwoPhase, input)) }); n != 1 {
		t.Errorf("a replay took %d round trips, want 1", n)
	}
	for _, grant := range []bool{false, true} {
		params := &store.LookupCallParams{Tenant: "acme", ThreadID: "t1", ToolCallID: "call_1"}
		if grant {
			params.Grant = &store.FindGrantParams{Tenant: "acme", Requester: "alice", ThreadID: "t1", RunID: "r1",
				Action: "payments.refund", ActionVersion: "1", InputDigest: "sha256:00"}
		}
		n := trips(func() {
			if _, err := h.store.LookupCall(ctx, params); err != nil {
				t.Fatalf("LookupCall: %v", err)
			}
		})
		if n != 1 {
			t.Errorf("LookupCall (grant query: %t) took %d round trips, want 1", grant, n)
		}
	}
}
