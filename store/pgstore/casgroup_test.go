package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// TestGrouperTake: a group is the oldest items, at most maxGroup, never
// two of one key; what is left stays queued in order.
func TestGrouperTake(t *testing.T) {
	t.Parallel()
	g := newCASGrouper()
	write := func(id string) *groupItem[*casWrite] {
		return &groupItem[*casWrite]{v: &casWrite{rw: &rowWrite{p: &store.Proposal{Tenant: "acme", ID: id}}}}
	}
	for _, id := range []string{"a", "b", "a", "c", "b"} {
		g.pending = append(g.pending, write(id))
	}
	ids := func(items []*groupItem[*casWrite]) (out []string) {
		for _, it := range items {
			out = append(out, it.v.rw.p.ID)
		}
		return out
	}
	if got := fmt.Sprint(ids(g.take())); got != "[a b c]" {
		t.Errorf("first group %s, want [a b c]", got)
	}
	if got := fmt.Sprint(ids(g.pending)); got != "[a b]" {
		t.Errorf("left queued %s, want [a b]", got)
	}
	g.pending = nil
	for i := range maxCASGroup + 3 {
		g.pending = append(g.pending, write(fmt.Sprint(i)))
	}
	if group := g.take(); len(group) != maxCASGroup || len(g.pending) != 3 {
		t.Errorf("group of %d with %d left, want %d and 3", len(group), len(g.pending), maxCASGroup)
	}
}

// TestGrouperUnderLoad: many callers at once, few statements in flight:
// every item runs exactly once, in a group of at most maxGroup, never two
// of one key together, and no more groups run at once than allowed.
func TestGrouperUnderLoad(t *testing.T) {
	t.Parallel()
	g := &grouper[*casWrite]{maxInFlight: 2, maxGroup: 5,
		key: func(w *casWrite) rowKey { return rowKey{w.rw.p.Tenant, w.rw.p.ID} }}
	var (
		mu       sync.Mutex
		running  int
		maxRun   int
		runs     = map[*casWrite]int{}
		problems []string
	)
	const n = 400
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &casWrite{rw: &rowWrite{p: &store.Proposal{Tenant: "acme", ID: fmt.Sprint(i % 37)}}}
			g.do(w, func(group []*casWrite) {
				mu.Lock()
				running++
				maxRun = max(maxRun, running)
				seen := map[string]bool{}
				if len(group) > 5 {
					problems = append(problems, fmt.Sprintf("group of %d", len(group)))
				}
				for _, m := range group {
					runs[m]++
					if seen[m.rw.p.ID] {
						problems = append(problems, "two items of "+m.rw.p.ID+" in one group")
					}
					seen[m.rw.p.ID] = true
				}
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
				mu.Lock()
				running--
				mu.Unlock()
			})
			mu.Lock()
			if runs[w] != 1 {
				problems = append(problems, fmt.Sprintf("item ran %d times when do returned", runs[w]))
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(runs) != n || maxRun > 2 || len(problems) > 0 {
		t.Errorf("%d items ran (want %d), at most %d groups at once (want ≤ 2), problems %v", len(runs), n, maxRun, problems)
	}
}

// TestCASGroupWritesEachRowOnItsOwn: one grouped statement writes each
// row guarded by its own version and time, with its own events, and leaves
// a row that moved since it was read (and its events) unwritten.
func TestCASGroupWritesEachRowOnItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := openAt(t, now)
	var group []*casWrite
	for i := range 3 {
		p := createTestProposal(fmt.Sprintf("prp_%d", i), fmt.Sprintf("t%d", i), now)
		p.ReplacementKey = ""
		if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
			t.Fatal(err)
		}
		cur, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		at := now.Add(time.Duration(i) * time.Second) // each caller's own time
		w := cur.Clone()
		_, c, err := store.ApplyDecision(w, &store.DecideParams{Actor: "bob", Verdict: store.VerdictApproved, Via: "api"}, at)
		if err != nil {
			t.Fatal(err)
		}
		store.Finish(w, at)
		normalize(w)
		rw, err := newRowWrite(cur, w, c, 0)
		if err != nil {
			t.Fatal(err)
		}
		group = append(group, &casWrite{rw: rw})
	}
	// prp_1 moves before the group is sent: its write must not stand.
	if _, err := s.Decide(ctx, &store.DecideParams{Tenant: "acme", ID: "prp_1", Actor: "carol", Verdict: store.VerdictRejected, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	s.runCASGroup(ctx, group)
	for i, g := range group {
		id := g.rw.p.ID
		if g.err != nil {
			t.Fatalf("%s: %v", id, g.err)
		}
		p, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: id})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.ListEvents(ctx, &store.ListEventsParams{Tenant: "acme", ProposalID: id, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		if i == 1 {
			if g.written || p.Status != store.StatusRejected || last.Actor != "carol" {
				t.Errorf("%s: written %v, %s, last event by %s; want the rejection alone", id, g.written, p.Status, last.Actor)
			}
			continue
		}
		at := now.Add(time.Duration(i) * time.Second)
		if !g.written || p.Status != store.StatusApproved || !p.UpdatedAt.Equal(at) || last.Actor != "bob" || !last.At.Equal(at) {
			t.Errorf("%s: written %v, %s updated %v, last event %s at %v; want approved by bob at %v", id, g.written, p.Status, p.UpdatedAt, last.Actor, last.At, at)
		}
	}
}

// TestConcurrentTransitionsOfOneStore: many goroutines deciding, each its
// own proposal, on one Store (so through grouped statements) and some on
// one shared proposal: every decision is applied once and answered right.
func TestConcurrentTransitionsOfOneStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openAt(t, time.Now().UTC())
	now := time.Now()
	const n = 48
	for i := range n + 1 {
		p := createTestProposal(fmt.Sprintf("prp_%d", i), fmt.Sprintf("t%d", i), now)
		p.ReplacementKey, p.Quorum = "", 1
		if i == n {
			p.Quorum = n // the shared one: every approval counts
		}
		if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			res, err := s.Decide(ctx, &store.DecideParams{Tenant: "acme", ID: fmt.Sprintf("prp_%d", i), Actor: "bob", Verdict: store.VerdictApproved, Via: "api"})
			if err == nil && res.Outcome != store.DecideApplied {
				err = fmt.Errorf("prp_%d: %s", i, res.Outcome)
			}
			errs <- err
		}()
		go func() {
			defer wg.Done()
			res, err := s.Decide(ctx, &store.DecideParams{Tenant: "acme", ID: fmt.Sprintf("prp_%d", n), Actor: fmt.Sprintf("approver%d", i), Verdict: store.VerdictApproved, Via: "api"})
			if err == nil && res.Outcome != store.DecideApplied {
				err = fmt.Errorf("shared, approver%d: %s", i, res.Outcome)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i := range n + 1 {
		p, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: fmt.Sprintf("prp_%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if i == n {
			want = n
		}
		if p.Status != store.StatusApproved || len(p.Decisions) != want {
			t.Errorf("%s: %s with %d decisions, want approved with %d", p.ID, p.Status, len(p.Decisions), want)
		}
	}
}

// TestGroupedReads: concurrent GetProposal calls on one Store, through
// grouped statements, each get their own answer: the proposal (a copy of
// its own, when two ask for one), or not found for another tenant's or a
// missing id.
func TestGroupedReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().UTC()
	s := openAt(t, now)
	const n = 20
	for i := range n {
		p := createTestProposal(fmt.Sprintf("prp_%d", i), fmt.Sprintf("t%d", i), now)
		p.ReplacementKey = ""
		if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, tenant := fmt.Sprintf("prp_%d", i%(n+5)), "acme"
			if i%7 == 0 {
				tenant = "other"
			}
			p, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: tenant, ID: id})
			exists := tenant == "acme" && i%(n+5) < n
			switch {
			case exists && (err != nil || p.ID != id || p.Tenant != "acme"):
				errs <- fmt.Errorf("%s: %+v, %v", id, p, err)
			case !exists && !errors.Is(err, store.ErrNotFound):
				errs <- fmt.Errorf("%s of %s: %v, want not found", id, tenant, err)
			case exists:
				p.Preview = "changed by its reader" // must not reach another reader
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: "prp_0"})
	if err != nil || p.Preview != "Refund 1" {
		t.Errorf("after the readers: %+v, %v", p, err)
	}
}
