package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// withEscalation sets a proposal to add to to its approvers after.
func withEscalation(fx *fixture, after time.Duration, to ...string) func(*store.Proposal) {
	at := fx.clock.Now().Add(after)
	return func(p *store.Proposal) { p.EscalateAt, p.EscalateTo = &at, to }
}

// withReminders sets a proposal's first reminder after every, and one
// every after that.
func withReminders(fx *fixture, every time.Duration) func(*store.Proposal) {
	at := fx.clock.Now().Add(every)
	return func(p *store.Proposal) { p.RemindAt, p.RemindEvery = &at, every }
}

// testEscalation pins EscalateDue and RemindDue: due times on pending
// proposals, swept in bounded batches like expiry, each applied once.
func testEscalation(t *testing.T, newStore Factory) {
	escalate := func(fx *fixture, limit int) []*store.Proposal {
		fx.t.Helper()
		ps, err := fx.store.EscalateDue(fx.ctx, &store.ExpireDueParams{Limit: limit})
		if err != nil {
			fx.t.Fatalf("EscalateDue: %v", err)
		}
		return ps
	}
	remind := func(fx *fixture, limit int) []*store.Proposal {
		fx.t.Helper()
		ps, err := fx.store.RemindDue(fx.ctx, &store.ExpireDueParams{Limit: limit})
		if err != nil {
			fx.t.Fatalf("RemindDue: %v", err)
		}
		return ps
	}
	count := func(evs []*store.Event, typ store.EventType) int {
		n := 0
		for _, e := range evs {
			if e.Type == typ {
				n++
			}
		}
		return n
	}

	t.Run("StoredAndRead", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withEscalation(fx, time.Hour, "role:manager", "actor:cfo"), withReminders(fx, 10*time.Minute))
		got := fx.get(p)
		if got.EscalateAt == nil || !slices.Equal(got.EscalateTo, []string{"role:manager", "actor:cfo"}) ||
			got.RemindAt == nil || got.RemindEvery != 10*time.Minute {
			t.Fatalf("read back %+v", got)
		}
		requireTime(t, "escalate_at", *got.EscalateAt, fx.clock.Now().Add(time.Hour))
		requireTime(t, "remind_at", *got.RemindAt, fx.clock.Now().Add(10*time.Minute))
		// Without either, none.
		plain := fx.get(fx.createNew())
		if plain.EscalateAt != nil || plain.RemindAt != nil || plain.RemindEvery != 0 || len(plain.EscalateTo) != 0 {
			t.Fatalf("a proposal without escalation or reminders read back %+v", plain)
		}
	})

	t.Run("EscalatesOnceWhenDue", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withApprovers("role:finance"), withEscalation(fx, time.Hour, "role:manager", "role:finance"))
		if ps := escalate(fx, 10); len(ps) != 0 {
			t.Fatalf("escalated %d before it was due", len(ps))
		}
		fx.clock.Advance(time.Hour)
		ps := escalate(fx, 10)
		if len(ps) != 1 || ps[0].ID != p.ID {
			t.Fatalf("escalated %v, want %s", ps, p.ID)
		}
		got := fx.get(p)
		requireStatus(t, got, store.StatusPending)
		if !slices.Equal(got.Approvers, []string{"role:finance", "role:manager"}) || got.EscalateAt != nil || got.Version != p.Version+1 {
			t.Fatalf("escalated proposal: approvers %q, escalate_at %v, version %d", got.Approvers, got.EscalateAt, got.Version)
		}
		evs := fx.events(p.ID)
		if last := evs[len(evs)-1]; last.Type != store.EventEscalated || last.Detail != "approvers added: role:manager" {
			t.Fatalf("events %v, last %+v: want proposal.escalated naming role:manager", eventTypes(evs), last)
		}
		// Once.
		fx.clock.Advance(time.Hour)
		if ps := escalate(fx, 10); len(ps) != 0 {
			t.Fatalf("escalated again: %v", ps)
		}
		if n := count(fx.events(p.ID), store.EventEscalated); n != 1 {
			t.Fatalf("%d escalations, want 1", n)
		}
	})

	t.Run("OnlyPending", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		decided := fx.createNew(withEscalation(fx, time.Minute, "role:manager"), withReminders(fx, time.Minute))
		fx.decide(decided, approver, store.VerdictRejected)
		fx.clock.Advance(time.Hour)
		if ps := escalate(fx, 10); len(ps) != 0 {
			t.Fatalf("a decided proposal escalated: %v", ps)
		}
		if ps := remind(fx, 10); len(ps) != 0 {
			t.Fatalf("a decided proposal was reminded: %v", ps)
		}
	})

	t.Run("BoundedBatchesMostOverdueFirst", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		var ids []string
		for i := range 5 {
			ids = append(ids, fx.createNew(withEscalation(fx, time.Duration(5-i)*time.Minute, "role:manager")).ID)
		}
		fx.clock.Advance(10 * time.Minute)
		first := escalate(fx, 2)
		if len(first) != 2 || first[0].ID != ids[4] || first[1].ID != ids[3] {
			t.Fatalf("first batch %v, want the two due longest (%s, %s)", proposalIDs(first), ids[4], ids[3])
		}
		rest := escalate(fx, 10)
		if len(rest) != 3 {
			t.Fatalf("second batch %d, want the other 3", len(rest))
		}
		if _, err := fx.store.EscalateDue(fx.ctx, &store.ExpireDueParams{Limit: 0}); !errorsIsInvalid(err) {
			t.Fatalf("limit 0: %v, want ErrInvalidParams", err)
		}
	})

	t.Run("RemindersWhilePending", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		created := fx.clock.Now()
		p := fx.createNew(withReminders(fx, 10*time.Minute))
		if ps := remind(fx, 10); len(ps) != 0 {
			t.Fatalf("reminded before the first was due")
		}
		fx.clock.Advance(10 * time.Minute)
		if ps := remind(fx, 10); len(ps) != 1 {
			t.Fatalf("%d reminders at +10m, want 1", len(ps))
		}
		requireTime(t, "next reminder", *fx.get(p).RemindAt, created.Add(20*time.Minute))
		if ps := remind(fx, 10); len(ps) != 0 {
			t.Fatal("reminded twice for one due time")
		}
		// A sweeper that stopped for 35 minutes sends one reminder for
		// the backlog, and the next on the schedule.
		fx.clock.Advance(35 * time.Minute)
		if ps := remind(fx, 10); len(ps) != 1 {
			t.Fatalf("%d reminders after the pause, want 1", len(ps))
		}
		requireTime(t, "next reminder", *fx.get(p).RemindAt, created.Add(50*time.Minute))
		evs := fx.events(p.ID)
		if n := count(evs, store.EventReminder); n != 2 {
			t.Fatalf("%d reminder events, want 2: %v", n, eventTypes(evs))
		}
		// Decided: no more.
		fx.decide(p, approver, store.VerdictApproved)
		fx.clock.Advance(time.Hour)
		if ps := remind(fx, 10); len(ps) != 0 {
			t.Fatal("a decided proposal was reminded")
		}
	})

	t.Run("RaceSweepers", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		var ps []*store.Proposal
		for range 6 {
			ps = append(ps, fx.createNew(withEscalation(fx, time.Minute, "role:manager"), withReminders(fx, time.Minute)))
		}
		fx.clock.Advance(time.Minute)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, _ = fx.store.EscalateDue(fx.ctx, &store.ExpireDueParams{Limit: 3})
				_, _ = fx.store.RemindDue(fx.ctx, &store.ExpireDueParams{Limit: 3})
			})
		}
		wg.Wait()
		_ = escalate(fx, 10)
		_ = remind(fx, 10)
		for _, p := range ps {
			evs := fx.events(p.ID)
			if count(evs, store.EventEscalated) != 1 || count(evs, store.EventReminder) != 1 {
				t.Fatalf("%s: events %v, want one escalation and one reminder", p.ID, eventTypes(evs))
			}
		}
	})
}

func proposalIDs(ps []*store.Proposal) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func errorsIsInvalid(err error) bool { return errors.Is(err, store.ErrInvalidParams) }
