package notifications_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/countersign/countersign/webhook"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	alice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	bob   = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
)

var secret = []byte("notify-secret")

type refundInput struct {
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

func newStore(t *testing.T, kind string) store.Store {
	t.Helper()
	switch kind {
	case "mem":
		return memstore.New(nil)
	case "sqlite":
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "cs.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Fatalf("unknown store %q", kind)
	return nil
}

func newEngine(t *testing.T, st store.Store) *countersign.Engine {
	t.Helper()
	a, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name:         "payments.refund",
		Confirmation: countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest, in refundInput) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "rf_" + in.Customer}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := countersign.New(countersign.Options{
		Store: st, Actions: []*countersign.Action{a}, Logger: slog.New(slog.DiscardHandler),
		Policy: &countersign.Policy{Rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// propose makes a pending refund proposal and returns its id.
func propose(t *testing.T, e *countersign.Engine, toolCall string) string {
	t.Helper()
	res, err := e.Call(t.Context(), &countersign.Call{
		Identity: alice, ThreadID: "t1", ToolCallID: toolCall,
		Action: "payments.refund", Input: []byte(`{"amount": 40, "customer": "c_9"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Proposal == nil || res.Proposal.Status != cstype.StatusPending {
		t.Fatalf("call: %+v; want a pending proposal", res)
	}
	return res.Proposal.ID
}

// receiver records every request it gets and answers failures with 503
// until it has failed fail times.
type receiver struct {
	t    *testing.T
	fail int

	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		rc.t.Error(err)
	}
	rc.mu.Lock()
	rc.requests = append(rc.requests, r)
	rc.bodies = append(rc.bodies, b)
	n := len(rc.requests)
	rc.mu.Unlock()
	if n <= rc.fail {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) got() ([]*http.Request, [][]byte) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*http.Request(nil), rc.requests...), append([][]byte(nil), rc.bodies...)
}

func newDeliverer(t *testing.T, st store.Store, target notifications.Target) *notifications.Deliverer {
	t.Helper()
	d, err := notifications.New(notifications.Options{
		Engine: newEngine(t, st), Targets: []notifications.Target{target}, Render: server.RenderProposal,
		PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d
}

// settle runs d's passes until the tenant's only notification is no longer
// pending, and returns it. Backoffs are a millisecond: a pass that finds
// nothing due only waits for the next.
func settle(t *testing.T, st store.Store, d *notifications.Deliverer) *cstype.OutboxEntry {
	t.Helper()
	for t.Context().Err() == nil {
		if _, err := d.DeliverDue(t.Context()); err != nil {
			t.Fatal(err)
		}
		ns, err := st.ListNotifications(t.Context(), &store.ListNotificationsParams{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != 1 {
			t.Fatalf("notifications: %d, want 1", len(ns))
		}
		if ns[0].Status != cstype.NotificationPending {
			return ns[0]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("test ended first")
	return nil
}

var fastBackoff = notifications.Backoff{Initial: time.Millisecond, Max: time.Millisecond}

// A receiver that fails three times gets four attempts, all with the same
// Idempotency-Key and the same signed body, and the fourth delivers it.
func TestDeliveryRetriesUntilDelivered(t *testing.T) {
	for _, kind := range []string{"mem", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			st := newStore(t, kind)
			e := newEngine(t, st)
			rc := &receiver{t: t, fail: 3}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			d := newDeliverer(t, st, notifications.Target{
				URL: srv.URL, Events: []cstype.EventType{cstype.EventCreated}, Secret: secret, Backoff: fastBackoff,
			})
			pid := propose(t, e, "call_1")

			n := settle(t, st, d)
			if n.Status != cstype.NotificationDelivered || n.Attempts != 4 {
				t.Fatalf("notification %+v; want delivered at attempt 4", n)
			}
			reqs, bodies := rc.got()
			if len(reqs) != 4 {
				t.Fatalf("receiver got %d requests, want 4", len(reqs))
			}
			for i, r := range reqs {
				if key := r.Header.Get("Idempotency-Key"); key != n.ID {
					t.Errorf("attempt %d: Idempotency-Key %q, want %q", i+1, key, n.ID)
				}
				if string(bodies[i]) != string(bodies[0]) {
					t.Errorf("attempt %d sent another body:\n%s\n%s", i+1, bodies[i], bodies[0])
				}
				if err := webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), bodies[i], time.Now(), 0); err != nil {
					t.Errorf("attempt %d: signature: %v", i+1, err)
				}
				if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("attempt %d: %s, %s", i+1, r.Method, r.Header.Get("Content-Type"))
				}
			}
			if err := webhook.Verify([]byte("another secret"), reqs[0].Header.Get(webhook.SignatureHeader), bodies[0], time.Now(), 0); err == nil {
				t.Error("a signature verified under another secret")
			}
			var body struct {
				ID       string          `json:"id"`
				Type     string          `json:"type"`
				Proposal server.Proposal `json:"proposal"`
				At       time.Time       `json:"at"`
			}
			dec := json.NewDecoder(bytes.NewReader(bodies[0]))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				t.Fatalf("body %s: %v", bodies[0], err)
			}
			if body.ID != n.ID || body.Type != "proposal.created" || body.Proposal.ID != pid ||
				body.Proposal.Status != "pending" || !body.At.Equal(n.At) {
				t.Errorf("body %+v does not announce %s's creation", body, pid)
			}
		})
	}
}

// A receiver that never answers 2xx gets MaxAttempts attempts, then the
// notification is failed; an operator's retry sends it again.
func TestDeliveryFailsAfterMaxAttempts(t *testing.T) {
	st := newStore(t, "sqlite")
	e := newEngine(t, st)
	rc := &receiver{t: t, fail: 5}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	d := newDeliverer(t, st, notifications.Target{
		URL: srv.URL, Events: []cstype.EventType{cstype.EventCreated}, MaxAttempts: 3, Backoff: fastBackoff,
	})
	propose(t, e, "call_1")
	n := settle(t, st, d)
	if n.Status != cstype.NotificationFailed || n.Attempts != 3 || n.LastError == "" {
		t.Fatalf("notification %+v; want failed after 3 attempts, with the error", n)
	}
	if reqs, _ := rc.got(); len(reqs) != 3 {
		t.Fatalf("receiver got %d requests, want 3", len(reqs))
	}
	operator := countersign.Identity{Tenant: "acme", Actor: "carol", Roles: []string{countersign.RoleOperator}}
	if _, err := e.RetryNotification(t.Context(), bob, n.ID); err == nil {
		t.Fatal("a non-operator retried a notification")
	}
	if _, err := e.RetryNotification(t.Context(), operator, n.ID); err != nil {
		t.Fatal(err)
	}
	// Two more failures (4 and 5), then the receiver accepts the third.
	n = settle(t, st, d)
	if n.Status != cstype.NotificationDelivered || n.Attempts != 3 {
		t.Fatalf("after the retry: %+v; want delivered at its third attempt", n)
	}
	if reqs, _ := rc.got(); len(reqs) != 6 {
		t.Fatalf("receiver got %d requests, want 6", len(reqs))
	}
}

// A receiver that blocks does not hold up a decision: the decision's
// transaction only writes the outbox row, and delivery happens in the
// workers. Every wait is bounded by slowWait and fails the test when it
// runs out.
func TestSlowReceiverDoesNotDelayDecisions(t *testing.T) {
	const slowWait = 10 * time.Second
	st := newStore(t, "sqlite")
	e := newEngine(t, st)
	arrived := make(chan struct{}, 16)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done(): // the deliverer gave up: the test is ending
		}
	}))
	defer srv.Close()
	defer close(release)
	d := newDeliverer(t, st, notifications.Target{
		URL: srv.URL, Events: []cstype.EventType{cstype.EventCreated, cstype.EventDecided}, Timeout: time.Hour,
	})
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = d.Run(ctx)
	}()
	defer func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(slowWait):
			t.Errorf("the deliverer did not stop within %v of its context's end", slowWait)
		}
	}()
	awaitRequest := func(what string) {
		t.Helper()
		select {
		case <-arrived:
		case <-time.After(slowWait):
			t.Fatalf("%s did not reach the receiver within %v", what, slowWait)
		}
	}

	pid := propose(t, e, "call_1")
	awaitRequest("the creation's notification") // it is being delivered, and blocks
	decideCtx, decided := context.WithTimeout(t.Context(), slowWait)
	defer decided()
	res, err := e.Decide(decideCtx, &countersign.Decision{Identity: bob, ProposalID: pid, Verdict: countersign.Approve})
	if err != nil || res.Status != countersign.DecideApplied {
		t.Fatalf("decide while the receiver blocks: %+v, %v (within %v)", res, err, slowWait)
	}
	// The decision's notification is delivered beside the blocked one:
	// a slow receiver holds one of the worker's slots, not the others.
	awaitRequest("the decision's notification, while the creation's blocks,")
	ns, err := st.ListNotifications(t.Context(), &store.ListNotificationsParams{Tenant: "acme", Status: cstype.NotificationPending})
	if err != nil || len(ns) != 2 {
		t.Fatalf("pending notifications: %d, %v; want the creation's and the decision's", len(ns), err)
	}
}

func TestOptionsInvalid(t *testing.T) {
	e := newEngine(t, memstore.New(nil))
	for name, o := range map[string]notifications.Options{
		"no engine":    {Render: server.RenderProposal},
		"no render":    {Engine: e},
		"bad url":      {Engine: e, Render: server.RenderProposal, Targets: []notifications.Target{{URL: "ftp://x", Events: []cstype.EventType{cstype.EventCreated}}}},
		"no events":    {Engine: e, Render: server.RenderProposal, Targets: []notifications.Target{{URL: "http://x"}}},
		"twice":        {Engine: e, Render: server.RenderProposal, Targets: []notifications.Target{{URL: "http://x", Events: []cstype.EventType{cstype.EventCreated}}, {URL: "http://x", Events: []cstype.EventType{cstype.EventCreated}}}},
		"short lease":  {Engine: e, Render: server.RenderProposal, LeaseDuration: time.Second, Targets: []notifications.Target{{URL: "http://x", Events: []cstype.EventType{cstype.EventCreated}, Timeout: 5 * time.Second}}},
		"backoff":      {Engine: e, Render: server.RenderProposal, Targets: []notifications.Target{{URL: "http://x", Events: []cstype.EventType{cstype.EventCreated}, Backoff: notifications.Backoff{Initial: time.Minute, Max: time.Second}}}},
		"neg attempts": {Engine: e, Render: server.RenderProposal, Targets: []notifications.Target{{URL: "http://x", Events: []cstype.EventType{cstype.EventCreated}, MaxAttempts: -1}}},
		"channel name": {Engine: e, Render: server.RenderProposal, Channels: []notifications.Channel{{Name: "Slack!", Events: created, Deliver: nop}}},
		"channel named as a receiver": {Engine: e, Render: server.RenderProposal,
			Channels: []notifications.Channel{{Name: notifications.TargetName("http://x"), Events: created, Deliver: nop}}},
		"channel twice":      {Engine: e, Render: server.RenderProposal, Channels: []notifications.Channel{{Name: "slack", Events: created, Deliver: nop}, {Name: "slack", Events: created, Deliver: nop}}},
		"channel no events":  {Engine: e, Render: server.RenderProposal, Channels: []notifications.Channel{{Name: "slack", Deliver: nop}}},
		"channel no deliver": {Engine: e, Render: server.RenderProposal, Channels: []notifications.Channel{{Name: "slack", Events: created}}},
	} {
		if _, err := notifications.New(o); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

func TestBackoffDoubles(t *testing.T) {
	b := notifications.Backoff{Initial: time.Second, Max: 10 * time.Second}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 60: 10 * time.Second} {
		if got := b.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
}

// A worker that dies during the last allowed attempt leaves its lease to
// run out; the next claim finds the attempts spent and fails the
// notification without another request.
func TestDeadWorkersLastAttemptCounts(t *testing.T) {
	st := newStore(t, "mem")
	e := newEngine(t, st)
	rc := &receiver{t: t}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	target := notifications.Target{URL: srv.URL, Events: []cstype.EventType{cstype.EventCreated}, MaxAttempts: 1}
	d := newDeliverer(t, st, target)
	propose(t, e, "call_1")
	// The dead worker: it claimed, under a short lease, and never recorded.
	claimed, err := st.ClaimNotifications(t.Context(), &store.ClaimNotificationsParams{
		Owner: "dead", LeaseDuration: time.Millisecond, Limit: 1, Targets: []string{notifications.TargetName(srv.URL)},
	})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	n := settle(t, st, d)
	if n.Status != cstype.NotificationFailed || n.Attempts != 2 || !strings.Contains(n.LastError, "attempts spent") {
		t.Fatalf("notification %+v; want failed, its one attempt spent", n)
	}
	if reqs, _ := rc.got(); len(reqs) != 0 {
		t.Fatalf("receiver got %d requests, want none", len(reqs))
	}
}

var created = []cstype.EventType{cstype.EventCreated}

func nop(context.Context, notifications.Delivery) error { return nil }

// A channel gets its notifications handed to Deliver, with the proposal as
// it stands at each attempt; a failed attempt is retried with the same id,
// and nothing is POSTed.
func TestChannelDelivers(t *testing.T) {
	for _, kind := range []string{"mem", "sqlite"} {
		t.Run(kind, func(t *testing.T) {
			st := newStore(t, kind)
			var mu sync.Mutex
			var got []notifications.Delivery
			d, err := notifications.New(notifications.Options{
				Engine: newEngine(t, st), Render: server.RenderProposal, Logger: slog.New(slog.DiscardHandler),
				Channels: []notifications.Channel{{Name: "slack", Events: created, Backoff: fastBackoff,
					Deliver: func(_ context.Context, dl notifications.Delivery) error {
						mu.Lock()
						defer mu.Unlock()
						got = append(got, dl)
						if len(got) == 1 {
							return errors.New("slack answered ratelimited")
						}
						return nil
					}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			id := propose(t, newEngine(t, st), "c1")
			if n := settle(t, st, d); n.Status != cstype.NotificationDelivered || n.Target != "slack" || n.Attempts != 2 {
				t.Fatalf("notification %+v; want delivered to slack at the second attempt", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 2 || got[0].ID != got[1].ID || got[1].Attempt != 2 || got[1].Event != cstype.EventCreated ||
				got[1].Tenant != "acme" || got[1].Proposal == nil || got[1].Proposal.ID != id {
				t.Errorf("deliveries %+v; want two of one notification about %s", got, id)
			}
		})
	}
}
