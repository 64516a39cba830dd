package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/storetest"
)

const tenant = "acme"

// newProposal returns a valid proposal whose deadline is an hour after now.
func newProposal(now time.Time, opts ...func(*store.Proposal)) *store.Proposal {
	return storetest.NewProposal(tenant, "t1", fmt.Sprintf("call_%d", callSeq.Add()), append([]func(*store.Proposal){
		func(p *store.Proposal) { p.ExpiresAt = now.Add(time.Hour) },
	}, opts...)...)
}

// callSeq numbers tool calls.
var callSeq counter

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) Add() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

func independent(p *store.Proposal) { p.Mode = store.ModeIndependent }

// create stores p and fails the test on error.
func create(t testing.TB, s store.Store, p *store.Proposal, approvedBy *store.Decision) *store.Proposal {
	t.Helper()
	res, err := s.CreateProposal(context.Background(), &store.CreateProposalParams{Proposal: p, ApprovedBy: approvedBy})
	if err != nil {
		t.Fatalf("CreateProposal: %v", err)
	}
	return res.Proposal
}

// grant is a remembered approval, standing in for a human.
var grant = &store.Decision{Actor: "grant:1", Via: "grant"}

// exec runs SQL on the test server and fails the test on error.
func exec(t testing.TB, dsn, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, schema := range []string{"1abc", "a-b", "a b", `a"b`, "ä", strings.Repeat("s", pgstore.MaxSchemaLen+1)} {
		_, err := pgstore.Open(ctx, pgtest.DSN(), &pgstore.Options{Schema: schema})
		if !errors.Is(err, store.ErrInvalidParams) || !strings.Contains(err.Error(), "Options.Schema") {
			t.Errorf("Open with schema %q: %v, want ErrInvalidParams naming Options.Schema", schema, err)
		}
	}
	_, err := pgstore.Open(ctx, pgtest.DSN(), &pgstore.Options{NotifyInterval: -time.Second})
	if !errors.Is(err, store.ErrInvalidParams) || !strings.Contains(err.Error(), "Options.NotifyInterval") {
		t.Errorf("Open with a negative NotifyInterval: %v, want ErrInvalidParams naming Options.NotifyInterval", err)
	}
	if _, err := pgstore.New(ctx, nil, nil); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("New(nil pool): %v, want ErrInvalidParams", err)
	}
}

func TestDefaultsAndCallerPool(t *testing.T) {
	t.Parallel()
	dsn, schema := pgtest.NewSchema(t)
	pool, err := pgxpool.New(context.Background(), withPoolSize(dsn))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(context.Background(), pool, &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if s.Schema() != schema || s.Channel() != "countersign_"+schema {
		t.Errorf("Schema, Channel = %q, %q", s.Schema(), s.Channel())
	}
	p := create(t, s, newProposal(time.Now()), nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The caller's pool outlives the store.
	var status string
	if err := pool.QueryRow(context.Background(), `SELECT status FROM proposals WHERE id = $1`, p.ID).Scan(&status); err != nil || status != "pending" {
		t.Errorf("caller's pool after Close: status %q, %v", status, err)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(t)
	// Start from nothing: Migrate creates the schema.
	exec(t, dsn, `DROP SCHEMA `+schema)

	// Two processes open a new schema at once.
	stores := make([]*pgstore.Store, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			stores[i], errs[i] = pgstore.Open(ctx, withPoolSize(dsn), &pgstore.Options{Schema: schema})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer func() { _ = stores[i].Close() }()
	}
	for _, s := range stores {
		v, err := s.SchemaVersion(ctx)
		if err != nil || v != pgstore.LatestSchemaVersion() {
			t.Errorf("SchemaVersion = %d, %v; want %d", v, err, pgstore.LatestSchemaVersion())
		}
		// Idempotent.
		if err := s.Migrate(ctx); err != nil {
			t.Errorf("Migrate again: %v", err)
		}
	}
	var applied, keys int
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM schema_migrations), (SELECT count(*) FROM meta)`).Scan(&applied, &keys); err != nil {
		t.Fatal(err)
	}
	if applied != pgstore.LatestSchemaVersion() || keys != 1 {
		t.Errorf("%d migrations recorded, %d cursor keys; want %d and 1", applied, keys, pgstore.LatestSchemaVersion())
	}

	// A schema from a newer build is refused.
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	if err := stores[0].Migrate(ctx); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Migrate of a newer schema: %v, want a refusal", err)
	}
}

func TestSkipMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(t)
	exec(t, dsn, `DROP SCHEMA `+schema)
	s, err := pgstore.Open(ctx, withPoolSize(dsn), &pgstore.Options{Schema: schema, SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if v, err := s.SchemaVersion(ctx); err != nil || v != 0 {
		t.Fatalf("SchemaVersion of a missing schema = %d, %v; want 0", v, err)
	}
	if _, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: tenant}); err == nil || !strings.Contains(err.Error(), "migrated") {
		t.Errorf("ListProposals before migrating: %v, want an error that asks about migrations", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != pgstore.LatestSchemaVersion() {
		t.Errorf("SchemaVersion after Migrate = %d, %v", v, err)
	}
	create(t, s, newProposal(time.Now()), nil)
}

func TestCursorKeyPersists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(t)
	open := func() *pgstore.Store {
		s, err := pgstore.Open(ctx, withPoolSize(dsn), &pgstore.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	var want []string
	for range 3 {
		want = append(want, create(t, s, newProposal(time.Now()), nil).ID)
	}
	page, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: tenant, Limit: 1})
	if err != nil || page.Next == "" {
		t.Fatalf("ListProposals = %v, %v", page, err)
	}
	_ = s.Close()

	// Another process, or this one after a restart, follows the cursor.
	s = open()
	defer func() { _ = s.Close() }()
	rest, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: tenant, After: page.Next})
	if err != nil {
		t.Fatalf("ListProposals after reopening: %v", err)
	}
	got := []string{page.Proposals[0].ID}
	for _, p := range rest.Proposals {
		got = append(got, p.ID)
	}
	if len(got) != 3 || got[0] != want[2] || got[1] != want[1] || got[2] != want[0] {
		t.Errorf("listing across a reopen = %v, want %v newest first", got, want)
	}
}

func TestTwoStoresShareASchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, dsn := openTestStore(t, nil)
	b, err := pgstore.Open(ctx, withPoolSize(dsn), &pgstore.Options{Schema: a.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()

	p := create(t, a, newProposal(time.Now(), independent), nil)
	if got, err := b.GetProposal(ctx, &store.GetProposalParams{Tenant: tenant, ID: p.ID}); err != nil || got.Status != store.StatusPending {
		t.Fatalf("b reads a's proposal: %v, %v", got, err)
	}
	if _, err := b.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: p.ID, Actor: "bob", Verdict: store.VerdictApproved, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	claimed, err := a.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "worker-a", LeaseDuration: time.Minute, Limit: 10})
	if err != nil || len(claimed) != 1 || claimed[0].Proposal.ID != p.ID {
		t.Fatalf("a claims b's approval: %v, %v", claimed, err)
	}
	if again, err := b.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "worker-b", LeaseDuration: time.Minute, Limit: 10}); err != nil || len(again) != 0 {
		t.Fatalf("b claims a held lease: %v, %v", again, err)
	}
	l := claimed[0].Proposal.Lease
	if _, err := b.Settle(ctx, &store.SettleParams{Tenant: tenant, ID: p.ID, Fence: store.Fence{Token: l.Token, Generation: l.Generation},
		Status: store.StatusSucceeded, Executed: new(true)}); err != nil {
		t.Fatalf("b settles under a's lease: %v", err)
	}
	if got, err := a.GetProposal(ctx, &store.GetProposalParams{Tenant: tenant, ID: p.ID}); err != nil || got.Status != store.StatusSucceeded {
		t.Fatalf("a reads the settlement: %v, %v", got, err)
	}
}

// TestClaimBatchAcrossStores runs four stores (four "processes") claiming
// the same 500 proposals at once: each is claimed exactly once.
func TestClaimBatchAcrossStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first, dsn := openTestStore(t, nil)
	stores := []*pgstore.Store{first}
	for range 3 {
		s, err := pgstore.Open(ctx, withPoolSize(dsn), &pgstore.Options{Schema: first.Schema()})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		stores = append(stores, s)
	}
	const total = 500
	start := time.Now()
	want := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < total; i += 8 {
				p := create(t, stores[w%4], newProposal(time.Now(), independent), grant)
				mu.Lock()
				want[p.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("created %d approved proposals in %v", total, time.Since(start))

	start = time.Now()
	claims := map[string]int{}
	for w := range 8 { // two workers per store
		wg.Go(func() {
			s := stores[w%4]
			for range total {
				got, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: fmt.Sprintf("w%d", w), LeaseDuration: time.Minute, Limit: 16})
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					claims[c.Proposal.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("claimed %d proposals with 8 workers on 4 stores in %v (%.0f/s)", len(claims), elapsed, float64(len(claims))/elapsed.Seconds())
	if len(claims) != total {
		t.Errorf("%d proposals claimed, want %d", len(claims), total)
	}
	for id := range want {
		if claims[id] != 1 {
			t.Errorf("proposal %s claimed %d times, want once", id, claims[id])
		}
	}
}

// TestLeaseExpiryByDatabaseClock: the application's clock sets deadlines,
// the database's judges leases. A process whose clock runs a day ahead must
// not take over a lease that is still running, and one whose clock runs a
// day behind must still recover a lease that ran out.
func TestLeaseExpiryByDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ahead := func() time.Time { return time.Now().Add(24 * time.Hour) }
	behind := func() time.Time { return time.Now().Add(-24 * time.Hour) }
	fast, dsn := openTestStore(t, &pgstore.Options{Now: ahead})
	slow, err := pgstore.Open(ctx, withPoolSize(dsn), &pgstore.Options{Schema: fast.Schema(), Now: behind})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slow.Close() }()

	// Claimed by the slow process under a one-minute lease.
	p := create(t, slow, newProposal(behind(), independent), grant)
	claimed, err := slow.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "slow", LeaseDuration: time.Minute, Limit: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimBatch = %v, %v", claimed, err)
	}
	exp := claimed[0].Proposal.Lease.ExpiresAt
	if d := exp.Sub(time.Now().Add(time.Minute)); d < -10*time.Second || d > 10*time.Second {
		t.Errorf("lease runs out at %v, want about a minute from the database's (real) now, not the application's", exp)
	}
	if got, err := fast.GetProposal(ctx, &store.GetProposalParams{Tenant: tenant, ID: p.ID}); err != nil || !got.Lease.ExpiresAt.Equal(exp) {
		t.Errorf("stored lease expiry %v, %v; want the one returned, %v", got.Lease, err, exp)
	}
	// A day later by the fast clock, the lease is still running.
	if got, err := fast.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "fast", LeaseDuration: time.Minute, Limit: 10}); err != nil || len(got) != 0 {
		t.Fatalf("a clock a day ahead took over a running lease: %v, %v", got, err)
	}

	// A short lease runs out on the database's clock, whatever the slow
	// clock says.
	q := create(t, fast, newProposal(ahead(), independent), grant)
	claimed, err = fast.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "fast", LeaseDuration: 300 * time.Millisecond, Limit: 1})
	if err != nil || len(claimed) != 1 || claimed[0].Proposal.ID != q.ID {
		t.Fatalf("ClaimBatch = %v, %v", claimed, err)
	}
	time.Sleep(500 * time.Millisecond)
	got, err := slow.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "slow", LeaseDuration: time.Minute, Limit: 10})
	if err != nil || len(got) != 1 || got[0].Proposal.ID != q.ID || got[0].From != store.StatusExecuting {
		t.Fatalf("a clock a day behind did not recover the expired lease: %v, %v", got, err)
	}

	// Renewals and retries also run out on the database's clock.
	l := got[0].Proposal.Lease
	renewed, err := fast.RenewLease(ctx, &store.RenewLeaseParams{Tenant: tenant, ID: q.ID, Fence: store.Fence{Token: l.Token, Generation: l.Generation}, LeaseDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if d := renewed.ExpiresAt.Sub(time.Now().Add(time.Hour)); d < -10*time.Second || d > 10*time.Second {
		t.Errorf("renewed lease runs out at %v, want an hour from the database's now", renewed.ExpiresAt)
	}

	// So does the lease an allowed execution is created under.
	res, err := slow.CreateProposal(ctx, &store.CreateProposalParams{
		Proposal: newProposal(behind()),
		Allowed:  &store.AllowedExecution{Owner: "slow", LeaseDuration: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	exp = res.Proposal.Lease.ExpiresAt
	if d := exp.Sub(time.Now().Add(time.Minute)); d < -10*time.Second || d > 10*time.Second {
		t.Errorf("allowed execution's lease runs out at %v, want about a minute from the database's now", exp)
	}
	if got, err := fast.GetProposal(ctx, &store.GetProposalParams{Tenant: tenant, ID: res.Proposal.ID}); err != nil || !got.Lease.ExpiresAt.Equal(exp) {
		t.Errorf("stored lease %v, %v; want the one returned, expiring %v", got.Lease, err, exp)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openTestStore(t, nil)
	p := create(t, s, newProposal(time.Now()), nil)

	// Another proposal with the same id (and a new tool call).
	dup := newProposal(time.Now(), func(q *store.Proposal) { q.ID = p.ID })
	_, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: dup})
	if !errors.Is(err, store.ErrInvalidParams) || !strings.HasPrefix(err.Error(), "pgstore: create proposal: ") {
		t.Errorf("duplicate id: %v, want ErrInvalidParams with context", err)
	}
	// Text PostgreSQL cannot hold.
	nul := newProposal(time.Now(), func(q *store.Proposal) { q.Preview = "a\x00b" })
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: nul}); !errors.Is(err, store.ErrInvalidParams) {
		t.Errorf("NUL in a string: %v, want ErrInvalidParams", err)
	}
	_, err = s.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: "prp_missing", Actor: "bob", Verdict: store.VerdictApproved})
	if !errors.Is(err, store.ErrNotFound) || !strings.HasPrefix(err.Error(), "pgstore: decide: ") {
		t.Errorf("Decide of a missing proposal: %v", err)
	}
}
