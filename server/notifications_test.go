package server

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/store"
)

// A notification whose receiver keeps failing is failed after max_attempts,
// listed over HTTP for the tenant's operators only, and requeued by an
// operator's retry, which delivers it with the same id.
func TestNotificationsFailedListedAndRetried(t *testing.T) {
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t, kind, harnessOptions{})
			var accept atomic.Bool
			var (
				mu   sync.Mutex
				keys []string
			)
			receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
				if !accept.Load() {
					w.WriteHeader(http.StatusInternalServerError)
				}
			}))
			defer receiver.Close()
			d, err := notifications.New(notifications.Options{
				Engine: h.engine, Render: RenderProposal, Logger: slog.New(slog.DiscardHandler),
				Targets: []notifications.Target{{
					URL: receiver.URL, Events: []cstype.EventType{cstype.EventCreated}, MaxAttempts: 2,
					Backoff: notifications.Backoff{Initial: time.Millisecond, Max: time.Millisecond},
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			pid := h.pending("call_n", "c_1")
			// Deliver until the attempts are spent.
			var failed []any
			for len(failed) == 0 {
				if _, err := d.DeliverDue(t.Context()); err != nil {
					t.Fatal(err)
				}
				failed = h.must(200, req{method: "GET", path: "/v1/notifications?status=failed", token: "carol"}).json(t)["notifications"].([]any)
				time.Sleep(time.Millisecond)
			}
			n := failed[0].(map[string]any)
			id := n["id"].(string)
			if len(failed) != 1 || n["proposal_id"] != pid || n["type"] != "proposal.created" || n["status"] != "failed" ||
				n["attempts"] != 2.0 || !strings.Contains(n["last_error"].(string), "500") {
				t.Fatalf("failed notifications: %v", failed)
			}
			// Listing and retrying are the tenant's operators' alone.
			for _, tok := range []string{"alice", "bob", "dave"} {
				if got := h.must(403, req{method: "GET", path: "/v1/notifications?status=failed", token: tok}); got.errorCode(t) != CodeForbidden {
					t.Errorf("%s lists: %s", tok, got.body)
				}
				h.must(403, req{method: "POST", path: "/v1/notifications/" + id + "/retry", token: tok})
			}
			if got := h.must(200, req{method: "GET", path: "/v1/notifications", token: "x_eve"}).json(t)["notifications"].([]any); len(got) != 0 {
				t.Errorf("another tenant's operator lists %v", got)
			}
			h.must(404, req{method: "POST", path: "/v1/notifications/" + id + "/retry", token: "x_eve"})
			h.must(404, req{method: "POST", path: "/v1/notifications/ntf_0_nope/retry", token: "carol"})
			h.must(404, req{method: "POST", path: "/v1/notifications/" + strings.Repeat("n", 5000) + "/retry", token: "carol"})
			h.must(400, req{method: "GET", path: "/v1/notifications?status=lost", token: "carol", invalid: true})
			h.must(400, req{method: "POST", path: "/v1/notifications/" + id + "/retry", token: "carol", body: `{"x":1}`, invalid: true})

			accept.Store(true)
			got := h.must(200, req{method: "POST", path: "/v1/notifications/" + id + "/retry", token: "carol"}).json(t)["notification"].(map[string]any)
			if got["status"] != "pending" || got["attempts"] != 0.0 {
				t.Fatalf("retry answered %v", got)
			}
			if code := h.must(409, req{method: "POST", path: "/v1/notifications/" + id + "/retry", token: "carol", body: `{}`}).errorCode(t); code != CodeInvalidState {
				t.Errorf("a second retry: %s, want %s", code, CodeInvalidState)
			}
			for {
				if _, err := d.DeliverDue(t.Context()); err != nil {
					t.Fatal(err)
				}
				ds := h.must(200, req{method: "GET", path: "/v1/notifications?status=delivered&limit=10", token: "carol"}).json(t)["notifications"].([]any)
				if len(ds) == 1 {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(keys) != 3 || keys[0] != id || keys[1] != id || keys[2] != id {
				t.Errorf("receiver saw keys %v, want %s three times", keys, id)
			}
		})
	}
}

// TestNotificationErrorsHideURLSecrets: a last_error that holds a receiver's
// URL with a token, as versions before the deliverer redacted its errors
// stored them, is answered with the URL's userinfo and query values
// redacted; what went wrong still reads.
func TestNotificationErrorsHideURLSecrets(t *testing.T) {
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t, kind, harnessOptions{})
			const target = "http://127.0.0.1:1/in?token=qs-t0ken-1234"
			st := h.store
			d, err := notifications.New(notifications.Options{
				Engine: h.engine, Render: RenderProposal, Logger: slog.New(slog.DiscardHandler),
				Targets: []notifications.Target{{URL: target, Events: []cstype.EventType{cstype.EventCreated}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			h.pending("call_n", "c_1")
			claimed, err := st.ClaimNotifications(t.Context(), &store.ClaimNotificationsParams{
				Owner: "old-version", LeaseDuration: time.Minute, Limit: 1, Targets: []string{notifications.TargetName(target)},
			})
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claim: %v, %v", claimed, err)
			}
			c := claimed[0]
			if _, err := st.RecordDelivery(t.Context(), &store.RecordDeliveryParams{
				Tenant: c.Tenant, ID: c.ID, LeaseToken: c.LeaseToken, Result: store.DeliveryFailed,
				Error: `Post "http://alice:pw-1234@127.0.0.1:1/in?token=qs-t0ken-1234": dial tcp 127.0.0.1:1: connect: connection refused`,
			}); err != nil {
				t.Fatal(err)
			}
			got := h.must(200, req{method: "GET", path: "/v1/notifications?status=failed", token: "carol"})
			if strings.Contains(string(got.body), "qs-t0ken-1234") || strings.Contains(string(got.body), "pw-1234") {
				t.Errorf("the answer holds the URL's secrets: %s", got.body)
			}
			ns := got.json(t)["notifications"].([]any)
			if len(ns) != 1 {
				t.Fatalf("failed notifications: %v", ns)
			}
			if e := ns[0].(map[string]any)["last_error"].(string); e != `Post "http://REDACTED@127.0.0.1:1/in?token=REDACTED": dial tcp 127.0.0.1:1: connect: connection refused` {
				t.Errorf("last_error %q", e)
			}
		})
	}
}
