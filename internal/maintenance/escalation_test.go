package maintenance_test

import (
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

// escalationRules ask finance, add the managers after 30 minutes, and
// remind every 10.
var escalationRules = []countersign.Rule{{
	Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, TTL: 2 * time.Hour,
	Mode: countersign.ModeIndependent, EscalateAfter: 30 * time.Minute, EscalateTo: []string{"role:manager"}, RemindEvery: 10 * time.Minute,
}}

// events counts a proposal's events of a type.
func events(t *testing.T, st store.Store, id string, typ store.EventType) int {
	t.Helper()
	evs, err := st.ListEvents(t.Context(), &store.ListEventsParams{Tenant: "acme", ProposalID: id})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestEscalation: before escalate_after a triggered run changes nothing;
// after it, one run adds escalate_to to the approvers of every due proposal,
// once (one escalated event), and reports each; a later run does not
// escalate again. On every store.
func TestEscalation(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock, escalationRules...)
		a, b := propose(t, e, "e1").ID, propose(t, e, "e2").ID
		var ch changes
		s := maintenance.NewEscalation(st, ch.changed, maintenance.SweepConfig{Interval: time.Hour, Batch: 1, Logger: discard()})
		start(t, s)

		clock.Advance(29 * time.Minute)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		if got := ch.take(); len(got) != 0 {
			t.Fatalf("escalated before escalate_after: %+v", got)
		}
		clock.Advance(time.Minute)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		want := []string{"role:finance", "role:manager"}
		got := ch.take()
		if len(got) != 2 {
			t.Fatalf("Changed was told of %+v, want both proposals", got)
		}
		for _, c := range got {
			if c.status != store.StatusPending || c.from != store.StatusPending || !slices.Equal(c.approvers, want) {
				t.Errorf("Changed(%s): %s from %s, approvers %v; want pending, %v", c.id, c.status, c.from, c.approvers, want)
			}
		}
		for _, id := range []string{a, b} {
			if p := get(t, st, id); !slices.Equal(p.Approvers, want) {
				t.Errorf("%s: approvers %v, want %v", id, p.Approvers, want)
			}
		}
		clock.Advance(time.Hour)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		if got := ch.take(); len(got) != 0 {
			t.Errorf("escalated again: %+v", got)
		}
		for _, id := range []string{a, b} {
			if n := events(t, st, id, store.EventEscalated); n != 1 {
				t.Errorf("%s: %d escalated events, want 1", id, n)
			}
		}
	})
}

// TestReminders: a triggered run records the due reminder of every pending
// proposal (one reminder event each, whatever the backlog of rounds) and
// reports each; a decided proposal is reminded no more. On every store.
func TestReminders(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock, escalationRules...)
		a, b := propose(t, e, "r1").ID, propose(t, e, "r2").ID
		var ch changes
		s := maintenance.NewReminders(st, ch.changed, maintenance.SweepConfig{Interval: time.Hour, Logger: discard()})
		start(t, s)

		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		if got := ch.take(); len(got) != 0 {
			t.Fatalf("reminded before remind_every: %+v", got)
		}
		clock.Advance(10 * time.Minute)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		if got := ch.take(); len(got) != 2 {
			t.Fatalf("Changed was told of %+v, want both proposals", got)
		}
		if r, err := e.Decide(t.Context(), &countersign.Decision{Identity: bob, ProposalID: b, Verdict: countersign.Reject, Via: "api"}); err != nil || r.Status != countersign.DecideApplied {
			t.Fatalf("reject: %+v, %v", r, err)
		}
		clock.Advance(10 * time.Minute)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		if got := ch.take(); len(got) != 1 || got[0].id != a {
			t.Errorf("at +20m Changed was told of %+v, want %s alone", got, a)
		}
		if n := events(t, st, a, store.EventReminder); n != 2 {
			t.Errorf("%d reminders of the pending proposal, want 2", n)
		}
		if n := events(t, st, b, store.EventReminder); n != 1 {
			t.Errorf("%d reminders of the rejected proposal, want 1", n)
		}
	})
}
