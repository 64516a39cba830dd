package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

// sender is a target's Send: it records each attempt and fails the first
// fail of them.
type sender struct {
	fail int

	mu       sync.Mutex
	ids      []string
	bodies   []string
	attempts int
}

func (s *sender) send(_ context.Context, id string, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	s.ids, s.bodies = append(s.ids, id), append(s.bodies, string(body))
	if s.attempts <= s.fail {
		return errors.New("receiver answered 503 Service Unavailable")
	}
	return nil
}

func (s *sender) sent() ([]string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...), append([]string(nil), s.bodies...)
}

// body is the rendering the tests give NotificationConfig.Body.
func body(e *store.OutboxEntry, p *store.Proposal) ([]byte, error) {
	return json.Marshal(map[string]string{"id": e.ID, "type": string(e.EventType), "proposal": p.ID, "status": string(p.Status)})
}

func delivery(st store.Store, s *sender, maxAttempts int) *maintenance.NotificationDelivery {
	return maintenance.NewNotificationDelivery(st, maintenance.NotificationConfig{
		Targets: []maintenance.NotificationTarget{{
			Name: "t1", Events: []store.EventType{store.EventCreated}, MaxAttempts: maxAttempts,
			Backoff: func(int) time.Duration { return time.Minute }, Send: s.send,
		}},
		Body: body, Owner: "test", PollInterval: time.Hour, LeaseDuration: time.Minute, Logger: discard(),
	})
}

// only returns the tenant's one notification.
func only(t *testing.T, st store.Store) *store.OutboxEntry {
	t.Helper()
	ns, err := st.ListNotifications(t.Context(), &store.ListNotificationsParams{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 1 {
		t.Fatalf("%d notifications, want 1", len(ns))
	}
	return ns[0]
}

// TestNotificationDelivery: Run writes its targets to the store before it
// claims (nobody called Sync), so the next event gets a notification; a
// triggered run claims it and has it sent with the rendered body, a failed
// attempt is recorded as a retry after the target's backoff, and the next
// attempt, once due, resends the same id and body and is recorded
// delivered. On every store.
func TestNotificationDelivery(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		s := &sender{fail: 1}
		d := delivery(st, s, 5)
		start(t, d)
		// Answered after the targets were written and a first claim made.
		if err := trigger(t, d); err != nil {
			t.Fatal(err)
		}
		p := propose(t, e, "d1")
		n := only(t, st)
		if n.Target != "t1" || n.EventType != store.EventCreated || n.ProposalID != p.ID || n.Status != store.NotificationPending {
			t.Fatalf("notification %+v; want a pending proposal.created for t1", n)
		}

		if err := trigger(t, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the failed attempt is recorded", func() bool { return only(t, st).Attempts == 1 && only(t, st).LastError != "" })
		n = only(t, st)
		if n.Status != store.NotificationPending || !n.NextAttemptAt.Equal(clock.Now().Add(time.Minute)) || n.LastError != "receiver answered 503 Service Unavailable" {
			t.Fatalf("after a failed attempt: %+v; want pending, due in a minute, with the error", n)
		}
		if err := trigger(t, d); err != nil {
			t.Fatal(err)
		}
		if ids, _ := s.sent(); len(ids) != 1 {
			t.Fatalf("%d attempts before the backoff passed, want 1", len(ids))
		}

		clock.Advance(time.Minute)
		if err := trigger(t, d); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the second attempt is recorded delivered", func() bool { return only(t, st).Status == store.NotificationDelivered })
		ids, bodies := s.sent()
		if len(ids) != 2 || ids[0] != n.ID || ids[1] != n.ID || bodies[0] != bodies[1] {
			t.Fatalf("attempts %v with bodies %q; want two of %s with one body", ids, bodies, n.ID)
		}
		var b map[string]string
		if err := json.Unmarshal([]byte(bodies[0]), &b); err != nil || b["id"] != n.ID || b["proposal"] != p.ID || b["type"] != "proposal.created" {
			t.Errorf("body %s (%v); want the notification's id, type and proposal", bodies[0], err)
		}
	})
}

// TestNotificationDeliveryFailsAfterMaxAttempts: DeliverDue makes one
// attempt per due notification and waits for its record; the last allowed
// attempt that fails leaves the notification failed, not due again. On
// every store.
func TestNotificationDeliveryFailsAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		s := &sender{fail: 100}
		d := delivery(st, s, 2)
		if err := d.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		propose(t, e, "f1")
		for i, want := range []store.NotificationStatus{store.NotificationPending, store.NotificationFailed} {
			if n, err := d.DeliverDue(t.Context()); err != nil || n != 1 {
				t.Fatalf("attempt %d: DeliverDue = %d, %v; want 1 claimed", i+1, n, err)
			}
			if got := only(t, st); got.Status != want || got.Attempts != i+1 {
				t.Fatalf("after attempt %d: %s with %d attempts, want %s", i+1, got.Status, got.Attempts, want)
			}
			clock.Advance(time.Minute)
		}
		if n, err := d.DeliverDue(t.Context()); err != nil || n != 0 {
			t.Errorf("a failed notification was claimed again: %d, %v", n, err)
		}
	})
}

// TestNotificationDeliverSeesTheProposalAsItStands: a target that delivers
// itself (an approver channel) gets, at each attempt, the notification and
// the proposal read again, so a retry after a decision shows the decision;
// nothing is kept as a payload, and failures retry and fail as a POST's do.
// On every store.
func TestNotificationDeliverSeesTheProposalAsItStands(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		var mu sync.Mutex
		var seen []store.Status
		var observed []string
		d := maintenance.NewNotificationDelivery(st, maintenance.NotificationConfig{
			Targets: []maintenance.NotificationTarget{{
				Name: "slack", Events: []store.EventType{store.EventCreated}, MaxAttempts: 3,
				Backoff: func(int) time.Duration { return time.Minute },
				Send:    func(context.Context, string, []byte) error { return errors.New("Send called: Deliver must replace it") },
				Deliver: func(_ context.Context, n *store.OutboxEntry, p *store.Proposal) error {
					mu.Lock()
					defer mu.Unlock()
					if n.Target != "slack" || n.ProposalID != p.ID || n.EventType != store.EventCreated {
						return errors.New("the notification and its proposal do not match")
					}
					seen = append(seen, p.Status)
					if len(seen) == 1 {
						return errors.New("chat.postMessage: ratelimited")
					}
					return nil
				},
			}},
			Body:  func(*store.OutboxEntry, *store.Proposal) ([]byte, error) { return nil, errors.New("Body called") },
			Owner: "test", PollInterval: time.Hour, LeaseDuration: time.Minute, Logger: discard(),
			Observe: func(target, result string) {
				mu.Lock()
				defer mu.Unlock()
				observed = append(observed, target+" "+result)
			},
		})
		if err := d.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		p := propose(t, e, "c1")
		if n, err := d.DeliverDue(t.Context()); err != nil || n != 1 {
			t.Fatalf("DeliverDue = %d, %v", n, err)
		}
		if got := only(t, st); got.Status != store.NotificationPending || got.LastError != "chat.postMessage: ratelimited" || got.Payload != nil {
			t.Fatalf("after a failed attempt: %+v; want pending with the error and no payload", got)
		}
		bob := countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
		if _, err := e.Decide(t.Context(), &countersign.Decision{Identity: bob, ProposalID: p.ID, Verdict: countersign.Approve}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		if n, err := d.DeliverDue(t.Context()); err != nil || n != 1 {
			t.Fatalf("DeliverDue = %d, %v", n, err)
		}
		if got := only(t, st); got.Status != store.NotificationDelivered {
			t.Fatalf("after the second attempt: %+v; want delivered", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 2 || seen[0] != store.StatusPending || seen[1] != store.StatusApproved {
			t.Errorf("attempts saw %v; want pending, then approved (the proposal read again)", seen)
		}
		if strings.Join(observed, ", ") != "slack retry, slack delivered" {
			t.Errorf("observed %q; want each attempt's target and result", observed)
		}
	})
}
