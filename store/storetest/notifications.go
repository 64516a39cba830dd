package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// The outbox's targets in the suite: hookA hears of creations and
// decisions, hookB of settlements.
const (
	hookA = "hook-a"
	hookB = "hook-b"
)

func (fx *fixture) setTargets(targets ...store.NotificationTarget) {
	fx.t.Helper()
	if err := fx.store.SetNotificationTargets(fx.ctx, &store.SetNotificationTargetsParams{Targets: targets}); err != nil {
		fx.t.Fatalf("SetNotificationTargets: %v", err)
	}
}

func (fx *fixture) setDefaultTargets() {
	fx.t.Helper()
	fx.setTargets(
		store.NotificationTarget{Name: hookA, Events: []store.EventType{store.EventCreated, store.EventDecided}},
		store.NotificationTarget{Name: hookB, Events: []store.EventType{store.EventSettled}},
	)
}

func (fx *fixture) notifications(tn string, status store.NotificationStatus) []*store.OutboxEntry {
	fx.t.Helper()
	got, err := fx.store.ListNotifications(fx.ctx, &store.ListNotificationsParams{Tenant: tn, Status: status})
	if err != nil {
		fx.t.Fatalf("ListNotifications(%s, %q): %v", tn, status, err)
	}
	return got
}

func (fx *fixture) claimNotifications(owner string, lease time.Duration, limit int, targets ...string) []*store.OutboxEntry {
	fx.t.Helper()
	if len(targets) == 0 {
		targets = []string{hookA, hookB}
	}
	got, err := fx.store.ClaimNotifications(fx.ctx, &store.ClaimNotificationsParams{
		Owner: owner, LeaseDuration: lease, Limit: limit, Targets: targets,
	})
	if err != nil {
		fx.t.Fatalf("ClaimNotifications(%s): %v", owner, err)
	}
	for _, e := range got {
		if e.LeaseToken == "" || e.Status != store.NotificationPending {
			fx.t.Fatalf("claimed %s: token %q, status %s; want a token, pending", e.ID, e.LeaseToken, e.Status)
		}
	}
	return got
}

func (fx *fixture) record(e *store.OutboxEntry, result store.DeliveryResult, after time.Duration, payload string) (*store.OutboxEntry, error) {
	var body []byte
	if payload != "" {
		body = []byte(payload)
	}
	return fx.store.RecordDelivery(fx.ctx, &store.RecordDeliveryParams{
		Tenant: e.Tenant, ID: e.ID, LeaseToken: e.LeaseToken, Result: result, RetryAfter: after, Error: "boom", Payload: body,
	})
}

func entryIDs(es []*store.OutboxEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	slices.Sort(out)
	return out
}

// wantAnnounced requires that the tenant's notifications are exactly those
// of the events of proposals whose type each target subscribes to.
func (fx *fixture) wantAnnounced(tn string, subscribed map[string][]store.EventType, proposals ...*store.Proposal) {
	fx.t.Helper()
	var want []string
	byID := map[string]*store.Event{}
	for _, p := range proposals {
		for _, ev := range fx.events(p.ID) {
			for target, types := range subscribed {
				if slices.Contains(types, ev.Type) {
					id := store.NotificationID(ev.ID, target)
					want = append(want, id)
					byID[id] = ev
				}
			}
		}
	}
	slices.Sort(want)
	got := fx.notifications(tn, "")
	if !slices.Equal(entryIDs(got), want) {
		fx.t.Fatalf("notifications %v; want %v", entryIDs(got), want)
	}
	for _, e := range got {
		ev := byID[e.ID]
		if e.Tenant != tn || e.EventID != ev.ID || e.EventType != ev.Type || e.ProposalID != ev.ProposalID ||
			e.Status != store.NotificationPending || e.Attempts != 0 || e.LeaseToken != "" || e.Payload != nil {
			fx.t.Errorf("notification %+v does not announce event %+v as a fresh one", e, ev)
		}
		requireTime(fx.t, "notification at", e.At, ev.At)
		requireTime(fx.t, "notification next attempt", e.NextAttemptAt, ev.At)
	}
}

func testNotifications(t *testing.T, newStore Factory) {
	subscribed := map[string][]store.EventType{
		hookA: {store.EventCreated, store.EventDecided},
		hookB: {store.EventSettled},
	}

	t.Run("WrittenWithTheirEvents", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.setDefaultTargets()
		// Every write path: creation, decision, claim, settlement, and a
		// creation that supersedes another.
		p := fx.claimed()
		fx.succeed(p)
		old := fx.createNew(withKey("k"))
		repl := fx.createNew(withKey("k"))
		if fx.get(old).Status != store.StatusSuperseded {
			t.Fatalf("replacement did not supersede")
		}
		fx.wantAnnounced(tenant, subscribed, p, old, repl)
		if got := fx.notifications(otherTenant, ""); len(got) != 0 {
			t.Errorf("another tenant lists %v", entryIDs(got))
		}
	})

	t.Run("NoTargetsNoNotifications", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		before := fx.claimed()
		fx.succeed(before)
		if got := fx.notifications(tenant, ""); len(got) != 0 {
			t.Fatalf("without targets: %v", entryIDs(got))
		}
		// Targets apply to events appended after them, not to history.
		fx.setDefaultTargets()
		after := fx.createNew()
		fx.wantAnnounced(tenant, subscribed, after)
		// Emptying the targets stops new notifications and keeps old ones.
		fx.setTargets()
		fx.decide(after, approver, store.VerdictApproved)
		if got := fx.notifications(tenant, ""); len(got) != 1 {
			t.Fatalf("after clearing the targets: %v; want the creation's only", entryIDs(got))
		}
	})

	t.Run("RefusedWritesLeaveNone", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.setDefaultTargets()
		p := fx.createNew()
		fx.wantAnnounced(tenant, subscribed, p)
		// A cancellation then a decision that finds it cancelled: the
		// refused decision writes no event and no notification.
		if _, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: p.ID, Actor: requester, Via: "api"}); err != nil {
			t.Fatal(err)
		}
		res, err := fx.store.Decide(fx.ctx, &store.DecideParams{Tenant: tenant, ID: p.ID, Actor: approver, Verdict: store.VerdictApproved, Via: "api"})
		if err != nil || res.Outcome != store.DecideConflict {
			t.Fatalf("decide a cancelled proposal: %v, %v; want conflict", res, err)
		}
		// A creation by someone who does not own the thread stores nothing.
		_, err = fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: fx.proposal(thread, withRequester("mallory"))})
		requireErrorIs(t, err, store.ErrNotThreadOwner)
		// A settlement with a lost lease writes nothing either.
		c := fx.claim(fx.approved(), shortLease)
		fx.elapse(shortLease + leaseSlack)
		if got := fx.claimBatch(worker2, longLease, 10); len(got) != 1 {
			t.Fatalf("recovery claimed %d", len(got))
		}
		_, err = fx.store.Settle(fx.ctx, settleParams(c, store.StatusSucceeded))
		requireLeaseLost(t, err)
		fx.wantAnnounced(tenant, subscribed, p, c)
	})

	t.Run("ClaimLeasesAndCounts", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.setDefaultTargets()
		fx.createNew()
		got := fx.claimNotifications(worker, shortLease, 10)
		if len(got) != 1 || got[0].Attempts != 1 {
			t.Fatalf("claim: %+v; want one notification at attempt 1", got)
		}
		if again := fx.claimNotifications(worker2, longLease, 10); len(again) != 0 {
			t.Fatalf("claimed while leased: %v", entryIDs(again))
		}
		// Only the targets asked for are claimed.
		if other := fx.claimNotifications(worker2, longLease, 10, hookB); len(other) != 0 {
			t.Fatalf("claimed another target's: %v", entryIDs(other))
		}
		// The holder dies; its lease runs out and the notification is
		// delivered again, by another worker, as another attempt.
		fx.elapse(shortLease + leaseSlack)
		rescued := fx.claimNotifications(worker2, longLease, 10)
		if len(rescued) != 1 || rescued[0].ID != got[0].ID || rescued[0].Attempts != 2 || rescued[0].LeaseToken == got[0].LeaseToken {
			t.Fatalf("rescue: %+v; want %s at attempt 2 under a new token", rescued, got[0].ID)
		}
		_, err := fx.record(got[0], store.DeliveryDelivered, 0, "")
		requireLeaseLost(t, err)
		done, err := fx.record(rescued[0], store.DeliveryDelivered, 0, `{"id":"x"}`)
		if err != nil || done.Status != store.NotificationDelivered || done.LeaseToken != "" {
			t.Fatalf("record delivered: %+v, %v", done, err)
		}
		// Recording twice is a conflict, not a lost lease: it left pending.
		_, err = fx.record(rescued[0], store.DeliveryDelivered, 0, "")
		if !errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("record again: %v; want a conflict", err)
		}
		if got := fx.claimNotifications(worker, longLease, 10); len(got) != 0 {
			t.Fatalf("claimed a delivered notification: %v", entryIDs(got))
		}
		if ds := fx.notifications(tenant, store.NotificationDelivered); len(ds) != 1 || string(ds[0].Payload) != `{"id":"x"}` {
			t.Fatalf("delivered listing: %+v", ds)
		}
	})

	t.Run("RetryBacksOff", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.setDefaultTargets()
		fx.createNew()
		first := fx.claimNotifications(worker, longLease, 10)[0]
		e, err := fx.record(first, store.DeliveryRetry, time.Hour, `{"n":1}`)
		if err != nil || e.Status != store.NotificationPending || e.LastError != "boom" {
			t.Fatalf("record retry: %+v, %v", e, err)
		}
		requireTime(t, "next attempt", e.NextAttemptAt, fx.clock.Now().Add(time.Hour))
		if got := fx.claimNotifications(worker, longLease, 10); len(got) != 0 {
			t.Fatalf("claimed before its next attempt: %v", entryIDs(got))
		}
		fx.clock.Advance(time.Hour)
		second := fx.claimNotifications(worker, longLease, 10)
		if len(second) != 1 || second[0].Attempts != 2 || string(second[0].Payload) != `{"n":1}` {
			t.Fatalf("second claim: %+v; want attempt 2 with the first payload", second)
		}
		// The first attempt's payload is kept: later ones send the same body.
		e, err = fx.record(second[0], store.DeliveryFailed, 0, `{"n":2}`)
		if err != nil || e.Status != store.NotificationFailed || string(e.Payload) != `{"n":1}` {
			t.Fatalf("record failed: %+v, %v", e, err)
		}
		if got := fx.claimNotifications(worker, longLease, 10); len(got) != 0 {
			t.Fatalf("claimed a failed notification: %v", entryIDs(got))
		}
		failed := fx.notifications(tenant, store.NotificationFailed)
		if len(failed) != 1 || failed[0].ID != first.ID {
			t.Fatalf("failed listing: %v", entryIDs(failed))
		}
		if got := fx.notifications(tenant, store.NotificationPending); len(got) != 0 {
			t.Fatalf("pending listing: %v", entryIDs(got))
		}
	})

	t.Run("RetryRequeues", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.setDefaultTargets()
		fx.createNew()
		c := fx.claimNotifications(worker, longLease, 10)[0]
		_, err := fx.store.RetryNotification(fx.ctx, &store.RetryNotificationParams{Tenant: tenant, ID: c.ID})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("retry a pending notification: %v; want a conflict", err)
		}
		if _, err := fx.record(c, store.DeliveryFailed, 0, ""); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []store.RetryNotificationParams{{Tenant: otherTenant, ID: c.ID}, {Tenant: tenant, ID: "ntf_0_nope"}} {
			_, err := fx.store.RetryNotification(fx.ctx, &bad)
			requireErrorIs(t, err, store.ErrNotFound)
		}
		fx.clock.Advance(time.Minute)
		e, err := fx.store.RetryNotification(fx.ctx, &store.RetryNotificationParams{Tenant: tenant, ID: c.ID})
		if err != nil || e.Status != store.NotificationPending || e.Attempts != 0 {
			t.Fatalf("retry: %+v, %v; want pending with no attempts", e, err)
		}
		requireTime(t, "next attempt", e.NextAttemptAt, fx.clock.Now())
		again := fx.claimNotifications(worker, longLease, 10)
		if len(again) != 1 || again[0].ID != c.ID || again[0].Attempts != 1 {
			t.Fatalf("claim after retry: %+v", again)
		}
	})

	t.Run("ConcurrentClaimsShareNothing", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.setDefaultTargets()
		const n = 12
		for range n {
			fx.createNew()
		}
		var (
			mu  sync.Mutex
			all []string
		)
		concurrently(6, func(i int) {
			for {
				got, err := fx.store.ClaimNotifications(fx.ctx, &store.ClaimNotificationsParams{
					Owner: worker, LeaseDuration: longLease, Limit: 2, Targets: []string{hookA},
				})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, e := range got {
					all = append(all, e.ID)
				}
				mu.Unlock()
			}
		})
		slices.Sort(all)
		if len(all) != n || len(slices.Compact(slices.Clone(all))) != n {
			t.Fatalf("claimed %d notifications (%d distinct); want each of %d once", len(all), len(slices.Compact(slices.Clone(all))), n)
		}
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		for _, bad := range []*store.SetNotificationTargetsParams{
			{Targets: []store.NotificationTarget{{Name: "", Events: []store.EventType{store.EventCreated}}}},
			{Targets: []store.NotificationTarget{{Name: "a b"}}},
			{Targets: []store.NotificationTarget{{Name: "a"}, {Name: "a"}}},
		} {
			if err := fx.store.SetNotificationTargets(fx.ctx, bad); !isInvalidParams(err) {
				t.Errorf("SetNotificationTargets(%+v): %v; want invalid params", bad, err)
			}
		}
		if _, err := fx.store.ClaimNotifications(fx.ctx, &store.ClaimNotificationsParams{Owner: worker, Limit: 1}); !isInvalidParams(err) {
			t.Errorf("claim without a lease: %v", err)
		}
		if _, err := fx.store.ListNotifications(fx.ctx, &store.ListNotificationsParams{Tenant: tenant, Status: "lost"}); !isInvalidParams(err) {
			t.Errorf("list a bad status: %v", err)
		}
		if _, err := fx.store.RecordDelivery(fx.ctx, &store.RecordDeliveryParams{Tenant: tenant, ID: "x", LeaseToken: "t", Result: "maybe"}); !isInvalidParams(err) {
			t.Errorf("record a bad result: %v", err)
		}
	})
}
