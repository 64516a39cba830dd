package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// TestCASQueueTake: a group is the oldest writes, at most maxCASGroup, never
// two of one row; what is left stays queued in order.
func TestCASQueueTake(t *testing.T) {
	t.Parallel()
	write := func(id string) *casWrite {
		return &casWrite{rw: &rowWrite{p: &store.Proposal{Tenant: "acme", ID: id}}}
	}
	q := &casQueue{}
	for _, id := range []string{"a", "b", "a", "c", "b"} {
		q.pending = append(q.pending, write(id))
	}
	ids := func(ws []*casWrite) (out []string) {
		for _, w := range ws {
			out = append(out, w.rw.p.ID)
		}
		return out
	}
	if got := fmt.Sprint(ids(q.take())); got != "[a b c]" {
		t.Errorf("first group %s, want [a b c]", got)
	}
	if got := fmt.Sprint(ids(q.pending)); got != "[a b]" {
		t.Errorf("left queued %s, want [a b]", got)
	}
	q.pending = nil
	for i := range maxCASGroup + 3 {
		q.pending = append(q.pending, write(fmt.Sprint(i)))
	}
	if g := q.take(); len(g) != maxCASGroup || len(q.pending) != 3 {
		t.Errorf("group of %d with %d left, want %d and 3", len(g), len(q.pending), maxCASGroup)
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
