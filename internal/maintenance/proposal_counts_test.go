package maintenance_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

// countsSink keeps the counts ProposalCounts hands over.
type countsSink struct {
	mu     sync.Mutex
	counts map[store.Status]int
	at     time.Time
	sets   int
}

func (c *countsSink) set(counts map[store.Status]int, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts, c.at = maps.Clone(counts), at
	c.sets++
}

func (c *countsSink) last() (map[store.Status]int, time.Time, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts, c.at, c.sets
}

// TestProposalCounts: a triggered run hands the callback every status's
// count as the store has it, stamped with the clock, and a later run the
// new count. On every store.
func TestProposalCounts(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		propose(t, e, "n1")
		propose(t, e, "n2")
		decide := func(id string, v countersign.Verdict) {
			t.Helper()
			if r, err := e.Decide(t.Context(), &countersign.Decision{Identity: bob, ProposalID: id, Verdict: v}); err != nil || r.Status != countersign.DecideApplied {
				t.Fatalf("%s %s: %+v, %v", v, id, r, err)
			}
		}
		decide(propose(t, e, "n3").ID, countersign.Reject)
		decide(propose(t, e, "n4").ID, countersign.Approve) // independent, no worker: it stays approved

		var sink countsSink
		s := maintenance.NewProposalCounts(st, sink.set, maintenance.ProposalCountsConfig{Interval: time.Hour, Now: clock.Now, Logger: discard()})
		start(t, s)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		want := map[store.Status]int{store.StatusPending: 2, store.StatusApproved: 1, store.StatusRejected: 1}
		got, at, _ := sink.last()
		for _, status := range store.Statuses {
			if got[status] != want[status] {
				t.Errorf("count of %s: %d, want %d (all: %v)", status, got[status], want[status], got)
			}
		}
		if !at.Equal(clock.Now()) {
			t.Errorf("counted at %v, want the clock's %v", at, clock.Now())
		}

		clock.Advance(time.Minute)
		decide(propose(t, e, "n5").ID, countersign.Reject)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		got, at, _ = sink.last()
		if got[store.StatusRejected] != 2 || got[store.StatusPending] != 2 || !at.Equal(clock.Now()) {
			t.Errorf("the later count: %v at %v; want 2 rejected, 2 pending, at %v", got, at, clock.Now())
		}
	})
}

// failingCounts fails every count.
type failingCounts struct{}

func (failingCounts) CountByStatus(context.Context) (map[store.Status]int, error) {
	return nil, errors.New("canceling statement due to statement timeout")
}

// TestProposalCountsKeepTheLastOnFailure: a failed count is the run's
// error and hands the callback nothing, so the gauge keeps its last count.
func TestProposalCountsKeepTheLastOnFailure(t *testing.T) {
	t.Parallel()
	var sink countsSink
	s := maintenance.NewProposalCounts(failingCounts{}, sink.set, maintenance.ProposalCountsConfig{Interval: time.Hour, Logger: discard()})
	start(t, s)
	if err := trigger(t, s); err == nil {
		t.Fatal("a failed count: no error")
	}
	if _, _, sets := sink.last(); sets != 0 {
		t.Errorf("a failed count was handed over %d times", sets)
	}
}
