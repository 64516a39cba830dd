package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

func eventIDs(evs []*store.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// requireIncreasing fails the test unless the events' ids strictly grow.
func requireIncreasing(t *testing.T, evs []*store.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].ID <= evs[i-1].ID {
			t.Errorf("event ids not increasing: %v", eventIDs(evs))
			return
		}
	}
}

func testEvents(t *testing.T, newStore Factory) {
	t.Run("LastEventID", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		last := func(tn string) int64 {
			t.Helper()
			id, err := fx.store.LastEventID(fx.ctx, &store.LastEventIDParams{Tenant: tn})
			if err != nil {
				t.Fatalf("LastEventID(%s): %v", tn, err)
			}
			return id
		}
		if id := last(tenant); id != 0 {
			t.Errorf("LastEventID of an empty store = %d, want 0", id)
		}
		p := fx.approved()
		evs := fx.events(p.ID)
		if id := last(tenant); id != evs[len(evs)-1].ID {
			t.Errorf("LastEventID = %d, want %d", id, evs[len(evs)-1].ID)
		}
		// Another tenant's later events are not this tenant's.
		fx.create(NewProposal(otherTenant, thread, uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour))))
		if id := last(tenant); id != evs[len(evs)-1].ID {
			t.Errorf("LastEventID after another tenant's event = %d, want %d", id, evs[len(evs)-1].ID)
		}
		if id := last(otherTenant); id <= evs[len(evs)-1].ID {
			t.Errorf("other tenant's LastEventID = %d, want above %d", id, evs[len(evs)-1].ID)
		}
		if id := last("nobody"); id != 0 {
			t.Errorf("LastEventID of a tenant without events = %d, want 0", id)
		}
		// A stream that starts at LastEventID sees only what comes next.
		from := last(tenant)
		fx.decide(fx.createNew(), approver, store.VerdictRejected)
		after, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant, AfterID: from})
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		if typ := eventTypes(after); len(typ) != 2 || typ[0] != store.EventCreated || typ[1] != store.EventDecided {
			t.Errorf("events after LastEventID = %v, want created, decided", typ)
		}
	})

	t.Run("Lifecycle", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		var at []time.Time
		step := func() { fx.clock.Advance(time.Second); at = append(at, fx.clock.Now()) }

		step()
		p := fx.createNew(independent)
		step()
		fx.decide(p, approver, store.VerdictApproved)
		step()
		claimed := fx.claimBatch(worker, longLease, 1)
		if len(claimed) != 1 {
			t.Fatalf("ClaimBatch = %d, want 1", len(claimed))
		}
		step()
		fx.succeed(claimed[0].Proposal)

		want := []struct {
			typ    store.EventType
			status store.Status
			actor  string
		}{
			{store.EventCreated, store.StatusPending, requester},
			{store.EventDecided, store.StatusApproved, approver},
			{store.EventClaimed, store.StatusExecuting, worker},
			{store.EventSettled, store.StatusSucceeded, worker},
		}
		evs := fx.events(p.ID)
		if len(evs) != len(want) {
			t.Fatalf("events = %v, want %d", eventTypes(evs), len(want))
		}
		requireIncreasing(t, evs)
		for i, w := range want {
			e := evs[i]
			if e.Type != w.typ || e.Status != w.status || e.Actor != w.actor || e.ProposalID != p.ID || e.Tenant != tenant {
				t.Errorf("event %d = %+v, want %s by %s, status %s, of %s in %s", i, e, w.typ, w.actor, w.status, p.ID, tenant)
			}
			if w.typ == store.EventClaimed {
				// A driver may stamp a claim with the database's clock.
				requireNear(t, "claimed event At", e.At, at[i], clockSkew)
			} else {
				requireTime(t, "event At", e.At, at[i])
			}
		}
		if evs[1].Via != "api" {
			t.Errorf("decided event via %q, want api", evs[1].Via)
		}
	})

	t.Run("FilterAndResume", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		q := fx.createNew()
		fx.decide(p, approver, store.VerdictApproved)
		fx.decide(q, approver, store.VerdictRejected)
		op := NewProposal(otherTenant, thread, uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour)))
		fx.create(op)
		fx.claim(p, longLease)

		all, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant})
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		requireIncreasing(t, all)
		var gotOrder []string
		for _, e := range all {
			if e.Tenant != tenant {
				t.Errorf("event %+v of another tenant", e)
			}
			gotOrder = append(gotOrder, e.ProposalID+":"+string(e.Type))
		}
		wantOrder := []string{
			p.ID + ":" + string(store.EventCreated), q.ID + ":" + string(store.EventCreated),
			p.ID + ":" + string(store.EventDecided), q.ID + ":" + string(store.EventDecided),
			p.ID + ":" + string(store.EventClaimed),
		}
		if !slices.Equal(gotOrder, wantOrder) {
			t.Fatalf("ListEvents = %v\nwant %v", gotOrder, wantOrder)
		}

		ofP := fx.events(p.ID)
		if got, want := eventIDs(ofP), []int64{all[0].ID, all[2].ID, all[4].ID}; !slices.Equal(got, want) {
			t.Errorf("events of p = %v, want %v", got, want)
		}

		after, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant, AfterID: all[1].ID})
		if err != nil {
			t.Fatalf("ListEvents after: %v", err)
		}
		if got, want := eventIDs(after), eventIDs(all[2:]); !slices.Equal(got, want) {
			t.Errorf("ListEvents after %d = %v, want %v", all[1].ID, got, want)
		}
		afterP, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant, ProposalID: p.ID, AfterID: all[2].ID})
		if err != nil {
			t.Fatalf("ListEvents of p after: %v", err)
		}
		if got, want := eventIDs(afterP), []int64{all[4].ID}; !slices.Equal(got, want) {
			t.Errorf("ListEvents of p after %d = %v, want %v", all[2].ID, got, want)
		}
		limited, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant, Limit: 2})
		if err != nil {
			t.Fatalf("ListEvents limit: %v", err)
		}
		if got, want := eventIDs(limited), eventIDs(all[:2]); !slices.Equal(got, want) {
			t.Errorf("ListEvents limit 2 = %v, want %v", got, want)
		}
		end, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant, AfterID: all[len(all)-1].ID})
		if err != nil || len(end) != 0 {
			t.Errorf("ListEvents after the last = %v, %v; want none", eventIDs(end), err)
		}

		others, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: otherTenant})
		if err != nil {
			t.Fatalf("ListEvents other tenant: %v", err)
		}
		if len(others) != 1 || others[0].ProposalID != op.ID || others[0].Type != store.EventCreated {
			t.Errorf("other tenant's events = %+v, want its one creation", others)
		}
	})

	t.Run("SupersedeAndExpire", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		old := fx.createNew(withKey("k"), withExpiresAt(fx.clock.Now().Add(time.Minute)))
		lapsing := fx.createNew(withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.createNew(withKey("k"))
		fx.clock.Advance(time.Minute)
		if _, err := fx.store.ExpireDue(fx.ctx, &store.ExpireDueParams{Limit: 10}); err != nil {
			t.Fatalf("ExpireDue: %v", err)
		}
		for _, c := range []struct {
			p      *store.Proposal
			want   []store.EventType
			status store.Status
		}{
			{old, []store.EventType{store.EventCreated, store.EventSuperseded}, store.StatusSuperseded},
			{lapsing, []store.EventType{store.EventCreated, store.EventExpired}, store.StatusExpired},
		} {
			evs := fx.events(c.p.ID)
			if got := eventTypes(evs); !slices.Equal(got, c.want) {
				t.Errorf("events of %s = %v, want %v", c.p.ID, got, c.want)
				continue
			}
			if evs[1].Status != c.status {
				t.Errorf("%s event status %s, want %s", evs[1].Type, evs[1].Status, c.status)
			}
		}
	})
}
