package maintenance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

// TestExpiry: a triggered run expires every due proposal, draining the
// backlog past one batch, reports each through Changed, and leaves the
// proposals not yet due; a run with nothing due changes nothing. On every
// store.
func TestExpiry(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		var ch changes
		// A batch of 2: the three due take two store calls in one run.
		s := maintenance.NewExpiry(st, ch.changed, maintenance.SweepConfig{Interval: time.Hour, Batch: 2, Logger: discard()})
		start(t, s)
		var due []string
		for _, tc := range []string{"x1", "x2", "x3"} {
			due = append(due, propose(t, e, tc).ID)
		}
		clock.Advance(30 * time.Minute)
		later := propose(t, e, "x4").ID // due at +90m
		clock.Advance(31 * time.Minute)

		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		for _, id := range due {
			if p := get(t, st, id); p.Status != store.StatusExpired {
				t.Errorf("%s is %s after the run, want expired", id, p.Status)
			}
		}
		if p := get(t, st, later); p.Status != store.StatusPending {
			t.Errorf("the proposal not yet due is %s, want pending", p.Status)
		}
		got := ch.take()
		if len(got) != len(due) {
			t.Fatalf("Changed was told of %d proposals, want %d: %+v", len(got), len(due), got)
		}
		for _, c := range got {
			if c.status != store.StatusExpired || c.from != store.StatusPending {
				t.Errorf("Changed(%s): %s from %s, want expired from pending", c.id, c.status, c.from)
			}
		}
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		if got := ch.take(); len(got) != 0 {
			t.Errorf("a run with nothing due reported %+v", got)
		}
	})
}

// unreachable answers every call as a store that cannot be reached does.
type unreachable struct{}

var errDown = store.Unavailable(errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"))

func (unreachable) ExpireDue(context.Context, *store.ExpireDueParams) ([]*store.Proposal, error) {
	return nil, errDown
}

// TestTriggerAnswersTheRunsError: a triggered run's error comes back to the
// trigger, wrapped with what failed, and Run goes on after it.
func TestTriggerAnswersTheRunsError(t *testing.T) {
	t.Parallel()
	s := maintenance.NewExpiry(unreachable{}, func(context.Context, *store.Proposal, store.Status) {}, maintenance.SweepConfig{Interval: time.Hour, Logger: discard()})
	start(t, s)
	for range 2 {
		if err := trigger(t, s); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("triggered run: %v, want store.ErrUnavailable", err)
		}
	}
}
