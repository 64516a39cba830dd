package storetest

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// claimBatchSize is how many proposals each ClaimBatch of the benchmark
// claims: a worker asks for as many as it has free slots, at most 64.
const claimBatchSize = 32

// seedConcurrency is how many goroutines create the proposals a benchmark
// needs before its timer starts; a server that commits in groups seeds faster.
const seedConcurrency = 8

// Bench runs the store benchmarks against the driver newStore makes, as
// sub-benchmarks: Create, Decide, Claim (one approved proposal),
// ClaimBatch (claimBatchSize approved independent proposals per operation),
// LookupCall (a call's lookup: a new tool call in a thread of 1,000
// proposals' store, with its grant query), LookupCallGrant (the same, where
// a live grant matches the call), LookupCallReplay (a repeated tool call),
// LookupCallAfterWrite (LookupCall with a creation committed before each
// lookup; it reports the lookups alone as ns/lookup),
// LookupCallAfterOtherWrite (its control: the creations go to another
// store) and Lifecycles (lifecycleCallers callers each writing a
// proposal's four steps, see benchLifecycles).
// newStore returns a fresh, empty store on the real clock and registers its
// own cleanup with b.Cleanup. A driver wires it in with
//
//	func BenchmarkStore(b *testing.B) { storetest.Bench(b, newStore) }
//
// and `go test -run '^$' -bench Store -benchtime 2000x -count 10` gives
// benchstat samples to compare commits. Each benchmark creates the rows it
// works on before its timer starts, so only the measured call is timed
// (but for the AfterWrite pair, whose operation is a write and a lookup). The
// durable drivers commit once per call, so their figures include an fsync
// and depend on the disk.
func Bench(b *testing.B, newStore func(b *testing.B) store.Store) {
	b.Run("Create", func(b *testing.B) { benchCreate(b, newStore(b)) })
	b.Run("Decide", func(b *testing.B) { benchDecide(b, newStore(b)) })
	b.Run("Claim", func(b *testing.B) { benchClaim(b, newStore(b)) })
	b.Run("ClaimBatch", func(b *testing.B) { benchClaimBatch(b, newStore(b)) })
	b.Run("LookupCall", func(b *testing.B) { benchLookupCall(b, newStore(b)) })
	b.Run("LookupCallGrant", func(b *testing.B) { benchLookupCallGrant(b, newStore(b)) })
	b.Run("LookupCallReplay", func(b *testing.B) { benchLookupCallReplay(b, newStore(b)) })
	b.Run("LookupCallAfterWrite", func(b *testing.B) {
		st := newStore(b)
		benchLookupCallAfterWrite(b, st, st)
	})
	b.Run("LookupCallAfterOtherWrite", func(b *testing.B) { benchLookupCallAfterWrite(b, newStore(b), newStore(b)) })
	b.Run("Lifecycles", func(b *testing.B) { benchLifecycles(b, newStore(b)) })
}

// lifecycleCallers is how many callers run proposals' lifecycles at once in
// the Lifecycles benchmark: as many as B3 has agents and approvers.
const lifecycleCallers = 64

// benchLifecycles times the four writes of a proposal's life (create,
// approve, claim, settle), lifecycleCallers proposals at a time, each
// caller writing its proposal's next step as soon as the last one
// returned: what a server's writes cost when many arrive together and a
// driver may commit them in groups, with no HTTP, engine or worker around
// them. An operation is one whole lifecycle; it reports lifecycles/s.
func benchLifecycles(b *testing.B, st store.Store) {
	ps := benchProposals(b.N, func(p *store.Proposal) { p.Mode = store.ModeIndependent })
	ctx := context.Background()
	var (
		next = make(chan *store.Proposal)
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	b.ResetTimer()
	for range lifecycleCallers {
		wg.Go(func() {
			for p := range next {
				if err := lifecycle(ctx, st, p, nil); err != nil {
					fail(err)
				}
			}
		})
	}
	for _, p := range ps {
		next <- p
	}
	close(next)
	wg.Wait()
	b.StopTimer()
	if len(errs) > 0 {
		b.Fatal(errs[0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lifecycles/s")
}

// lifecycle creates p, approves it (remembering g, when not nil), claims it
// and settles it succeeded (which makes g live).
func lifecycle(ctx context.Context, st store.Store, p *store.Proposal, g *store.Grant) error {
	if _, err := st.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
		return fmt.Errorf("create %s: %w", p.ID, err)
	}
	dp := &store.DecideParams{Tenant: p.Tenant, ID: p.ID, Actor: requester, Verdict: store.VerdictApproved, Via: "api"}
	if g != nil {
		dp.Remember, dp.Grant = g.Scope, g
	}
	res, err := st.Decide(ctx, dp)
	if err != nil {
		return fmt.Errorf("approve %s: %w", p.ID, err)
	}
	if res.Outcome != store.DecideApplied || res.Proposal.Status != store.StatusApproved {
		return fmt.Errorf("approve %s: outcome %s, status %s; want applied, approved", p.ID, res.Outcome, res.Proposal.Status)
	}
	c, err := st.Claim(ctx, &store.ClaimParams{Tenant: p.Tenant, ID: p.ID, Owner: worker, LeaseDuration: time.Minute})
	if err != nil {
		return fmt.Errorf("claim %s: %w", p.ID, err)
	}
	if c.Lease == nil {
		return fmt.Errorf("claim %s: no lease", p.ID)
	}
	sp := settleParams(c, store.StatusSucceeded)
	sp.Executed = new(true)
	if _, err := st.Settle(ctx, sp); err != nil {
		return fmt.Errorf("settle %s: %w", p.ID, err)
	}
	return nil
}

// benchLookupCall times the lookup the engine makes before it creates a
// proposal: the thread exists, the tool call is new (the common case: no
// proposal, no grant).
func benchLookupCall(b *testing.B, st store.Store) {
	ps := benchProposals(1000, func(*store.Proposal) {})
	benchSeed(b, st, ps, nil)
	params := make([]*store.LookupCallParams, b.N)
	for i := range params {
		p := ps[i%len(ps)]
		params[i] = &store.LookupCallParams{Tenant: p.Tenant, ThreadID: p.ThreadID, ToolCallID: uniqueID("call"), Grant: findParams(p)}
	}
	timeLookups(b, st, params, func(int) string { return "" }, "", nil)
}

// benchLookupCallGrant times the lookup of a new tool call that a live
// grant matches (an approval remembered for the thread): the lookup finds
// the thread and the grant.
func benchLookupCallGrant(b *testing.B, st store.Store) {
	ps := benchProposals(1000, func(*store.Proposal) {})
	benchSeed(b, st, ps, nil)
	origin := NewProposal(tenant, ps[0].ThreadID, uniqueID("call"), func(*store.Proposal) {})
	g := &store.Grant{ID: uniqueID("grt"), Tenant: origin.Tenant, Requester: origin.Requester, Scope: store.ScopeThread,
		ThreadID: origin.ThreadID, Action: origin.Action, ActionVersion: origin.ActionVersion, InputDigest: origin.InputDigest,
		OriginProposalID: origin.ID, GrantedBy: requester, CreatedAt: time.Now()}
	if err := lifecycle(context.Background(), st, origin, g); err != nil {
		b.Fatal(err)
	}
	params := make([]*store.LookupCallParams, b.N)
	for i := range params {
		params[i] = &store.LookupCallParams{Tenant: origin.Tenant, ThreadID: origin.ThreadID, ToolCallID: uniqueID("call"), Grant: findParams(origin)}
	}
	timeLookups(b, st, params, func(int) string { return "" }, g.ID, nil)
}

// benchLookupCallReplay times the lookup of a repeated tool call, as an
// agent that resumes after a decision makes it: the lookup finds the
// thread and the call's proposal.
func benchLookupCallReplay(b *testing.B, st store.Store) {
	ps := benchProposals(1000, func(*store.Proposal) {})
	benchSeed(b, st, ps, nil)
	params := make([]*store.LookupCallParams, b.N)
	for i := range params {
		params[i] = lookupOf(ps[i%len(ps)], findParams(ps[i%len(ps)]))
	}
	timeLookups(b, st, params, func(i int) string { return ps[i%len(ps)].ID }, "", nil)
}

// benchLookupCallAfterWrite times benchLookupCall's lookups on st with a
// creation (in a thread of its own) committed to writeTo before each
// (ns/lookup: the lookups alone), as in a server, where other callers'
// writes commit between one call's lookups. With writeTo st, a driver whose
// readers keep a cache of the database's pages pays for what the writes made
// stale (SQLite in WAL mode discards a read connection's whole page cache
// when another connection has committed since its last read;
// docs/profiles/scale.md, change 23). With writeTo another store of the
// driver, the control: the same pause and work between the lookups, none of
// it in st's database.
func benchLookupCallAfterWrite(b *testing.B, st, writeTo store.Store) {
	ps := benchProposals(1000, func(*store.Proposal) {})
	benchSeed(b, st, ps, nil)
	writes := make([]*store.Proposal, b.N)
	params := make([]*store.LookupCallParams, b.N)
	for i := range params {
		p := ps[i%len(ps)]
		params[i] = &store.LookupCallParams{Tenant: p.Tenant, ThreadID: p.ThreadID, ToolCallID: uniqueID("call"), Grant: findParams(p)}
		writes[i] = NewProposal(tenant, "bench_writes", uniqueID("call"), func(*store.Proposal) {})
	}
	ctx := context.Background()
	write := func(i int) {
		if _, err := writeTo.CreateProposal(ctx, &store.CreateProposalParams{Proposal: writes[i]}); err != nil {
			b.Fatal(err)
		}
	}
	timeLookups(b, st, params, func(int) string { return "" }, "", write)
}

// timeLookups times LookupCall of each of params, and fails on a lookup
// that does not find the thread with exactly the proposal (proposal(i))
// and the grant wanted, "" for none. before, when set, runs before each
// lookup: an operation is then both, and the lookups alone are reported as
// ns/lookup (each timed by itself: stopping the benchmark's timer around
// before would stop the world to read the memory statistics, which costs
// the next lookup more than the commit does).
func timeLookups(b *testing.B, st store.Store, params []*store.LookupCallParams, proposal func(i int) string, grant string, before func(i int)) {
	ctx := context.Background()
	b.ResetTimer()
	var looking time.Duration
	for i, lp := range params {
		if before != nil {
			before(i)
		}
		start := time.Now()
		l, err := st.LookupCall(ctx, lp)
		looking += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		gotP, gotG := "", ""
		if l.Proposal != nil {
			gotP = l.Proposal.ID
		}
		if l.Grant != nil {
			gotG = l.Grant.ID
		}
		if l.Thread == nil || gotP != proposal(i) || gotG != grant {
			b.Fatalf("LookupCall(%s): thread %v, proposal %q, grant %q; want the thread, proposal %q, grant %q", lp.ToolCallID, l.Thread, gotP, gotG, proposal(i), grant)
		}
	}
	if before != nil {
		b.ReportMetric(float64(looking.Nanoseconds())/float64(len(params)), "ns/lookup")
	}
}

// benchProposals returns n new proposals spread over 16 threads, each made
// by edit.
func benchProposals(n int, edit func(*store.Proposal)) []*store.Proposal {
	ps := make([]*store.Proposal, n)
	for i := range ps {
		ps[i] = NewProposal(tenant, fmt.Sprintf("bench_t%d", i%16), uniqueID("call"), edit)
	}
	return ps
}

// benchSeed creates ps, already approved when approvedBy is set.
func benchSeed(b *testing.B, st store.Store, ps []*store.Proposal, approvedBy *store.Decision) {
	b.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan *store.Proposal)
	)
	for range seedConcurrency {
		wg.Go(func() {
			for p := range next {
				if _, err := st.CreateProposal(b.Context(), &store.CreateProposalParams{Proposal: p, ApprovedBy: approvedBy}); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("seed %s: %w", p.ID, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range ps {
		next <- p
	}
	close(next)
	wg.Wait()
	if len(errs) > 0 {
		b.Fatal(errs[0])
	}
}

// benchGrant stands in for the approvers of seeded approved proposals.
var benchGrant = &store.Decision{Actor: "grant:bench", Via: "grant"}

func benchCreate(b *testing.B, st store.Store) {
	ps := benchProposals(b.N, func(*store.Proposal) {})
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		res, err := st.CreateProposal(ctx, &store.CreateProposalParams{Proposal: ps[i]})
		if err != nil {
			b.Fatal(err)
		}
		if !res.Created {
			b.Fatalf("CreateProposal(%s): replayed, want created", ps[i].ID)
		}
	}
}

func benchDecide(b *testing.B, st store.Store) {
	ps := benchProposals(b.N, func(*store.Proposal) {})
	benchSeed(b, st, ps, nil)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		res, err := st.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: ps[i].ID, Actor: requester, Verdict: store.VerdictApproved, Via: "api"})
		if err != nil {
			b.Fatal(err)
		}
		if res.Outcome != store.DecideApplied {
			b.Fatalf("Decide(%s): outcome %s, want applied", ps[i].ID, res.Outcome)
		}
	}
}

func benchClaim(b *testing.B, st store.Store) {
	ps := benchProposals(b.N, func(*store.Proposal) {})
	benchSeed(b, st, ps, benchGrant)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		got, err := st.Claim(ctx, &store.ClaimParams{Tenant: tenant, ID: ps[i].ID, Owner: worker, LeaseDuration: time.Minute, ConsumedBy: ps[i].ToolCallID})
		if err != nil {
			b.Fatal(err)
		}
		if got.Lease == nil {
			b.Fatalf("Claim(%s): no lease", ps[i].ID)
		}
	}
}

// benchClaimBatch also reports proposals claimed per second. The memory
// driver scans every row to find claimable ones, so its figure grows with
// b.N; compare it only at a fixed -benchtime Nx.
func benchClaimBatch(b *testing.B, st store.Store) {
	ps := benchProposals(b.N*claimBatchSize, func(p *store.Proposal) { p.Mode = store.ModeIndependent })
	benchSeed(b, st, ps, benchGrant)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		got, err := st.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: worker, LeaseDuration: time.Minute, Limit: claimBatchSize})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != claimBatchSize {
			b.Fatalf("ClaimBatch: claimed %d, want %d", len(got), claimBatchSize)
		}
	}
	b.ReportMetric(float64(b.N*claimBatchSize)/b.Elapsed().Seconds(), "proposals/s")
}

// BenchSealEvents measures one seal of a batch of 1,000 committed events of
// 10 tenants: the sealer's whole cost per event (its statements, the
// hashing, the commit), which the audit scenario of the bench sets against
// B3's and B6's throughput. insert writes n new events, unsealed, the way
// the driver's rows are written (outside the timing).
//
// Besides the time, it reports the process's CPU time per event during the
// seals (cpu-ns/event): what the seal takes from a CPU-bound server, which
// the time leaves out where the seal waits for its commit's fsync and
// counts once where the collector works beside it on another core. The
// database server's own CPU, where there is one, is not in it.
func BenchSealEvents(b *testing.B, s store.Store, insert func(b *testing.B, n int)) {
	ctx := b.Context()
	l, err := s.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: "bench", LeaseDuration: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	b.ReportAllocs()
	b.ResetTimer()
	var cpu time.Duration
	for range b.N {
		b.StopTimer()
		insert(b, batch)
		before := processCPU(b)
		b.StartTimer()
		res, err := s.SealEvents(ctx, &store.SealEventsParams{Token: l.Token, LeaseDuration: time.Hour, Limit: batch})
		b.StopTimer()
		cpu += processCPU(b) - before
		b.StartTimer()
		if err != nil || res.Sealed != batch {
			b.Fatalf("SealEvents = %+v, %v; want %d sealed", res, err, batch)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*batch), "cpu-ns/event")
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
