package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/tcpproxy"
	"github.com/countersign/countersign/store/pgstore"
)

// proxiedHarness is a PostgreSQL harness whose store reaches the server
// through a proxy the test can take down.
func proxiedHarness(t *testing.T, ho harnessOptions) (*harness, *tcpproxy.Proxy) {
	t.Helper()
	dsn, schema := pgtest.NewSchema(t)
	proxy, via := pgtest.Proxied(t, dsn)
	st, err := pgstore.Open(context.Background(), pgtest.PoolDSN(via), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ho.store = st
	inner := ho.server
	ho.server = func(o *Options) {
		o.Ready = func(ctx context.Context) error {
			_, err := st.SchemaVersion(ctx)
			return err
		}
		if inner != nil {
			inner(o)
		}
	}
	return newHarness(t, "pg", ho), proxy
}

// outageRequests are requests to every documented route that reads or
// writes the store, each valid as far as the server can tell without the
// store, so that nothing but the outage stops it.
func outageRequests(id string) []req {
	return []req{
		{method: "POST", path: "/v1/calls", token: "alice", body: refund("o_new", "c_o_new", 3)},
		{method: "GET", path: "/v1/proposals", token: "bob"},
		{method: "GET", path: "/v1/proposals/" + id, token: "bob"},
		{method: "GET", path: "/v1/proposals/" + id + "/events", token: "bob"},
		{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob", body: map[string]any{"reason": "ok"}},
		{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob", body: map[string]any{"reason": "no"}},
		{method: "POST", path: "/v1/proposals/" + id + "/cancel", token: "alice", body: map[string]any{}},
		{method: "POST", path: "/v1/proposals/" + id + "/resolve", token: "carol", body: map[string]any{"outcome": "failed", "note": "checked"}},
		{method: "POST", path: "/v1/proposals/" + id + "/settle", token: "alice", body: map[string]any{"lease_token": "lt_none", "outcome": "succeeded"}},
		{method: "POST", path: "/v1/proposals/" + id + "/renew", token: "alice", body: map[string]any{"lease_token": "lt_none"}},
		{method: "GET", path: "/v1/threads/t1", token: "alice"},
		{method: "GET", path: "/v1/threads/t1/proposals", token: "alice"},
		{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: map[string]any{"text": "hello"}},
		{method: "GET", path: "/v1/threads/t1/runs/r1", token: "alice"},
		{method: "POST", path: "/v1/threads/t1/runs/r1/cancel", token: "alice"},
		{method: "GET", path: "/v1/grants", token: "alice"},
		{method: "DELETE", path: "/v1/grants/grt_none", token: "alice"},
		{method: "GET", path: "/v1/events", token: "bob"},
		{method: "GET", path: "/v1/audit", token: "carol"},
		{method: "GET", path: "/v1/notifications", token: "carol"},
		{method: "POST", path: "/v1/notifications/ntf_none/retry", token: "carol"},
	}
}

// TestStoreOutage takes PostgreSQL away from a running server (the proxy
// refuses connections and resets the open ones, as a stopped database
// does) and brings it back: meanwhile every route that needs the store
// answers 503 UNAVAILABLE with Retry-After, never 500, /readyz fails,
// /healthz does not, an open event stream and a waiting call hold on; after
// it, the same requests succeed, the stream delivers and the waiter is
// answered, without anything restarted.
func TestStoreOutage(t *testing.T) {
	h, proxy := proxiedHarness(t, harnessOptions{})
	id := h.pending("o1", "c_o1")
	events := h.stream(t, "bob", "")

	// A wait-mode call waiting for its decision when the store goes.
	waiter := make(chan *response, 1)
	go func() {
		body := refund("o_wait", "c_o_wait", 7)
		body["wait_seconds"] = 30
		waiter <- h.do(req{method: "POST", path: "/v1/calls", token: "alice", body: body})
	}()
	var waitID string
	deadline := time.Now().Add(10 * time.Second)
	for waitID == "" && time.Now().Before(deadline) {
		page := h.must(200, req{method: "GET", path: "/v1/proposals?status=pending", token: "bob"}).json(t)
		items, _ := page["proposals"].([]any)
		for _, it := range items {
			if p, _ := it.(map[string]any); p["tool_call_id"] == "o_wait" {
				waitID, _ = p["id"].(string)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waitID == "" {
		t.Fatal("the waiting call's proposal never appeared")
	}

	proxy.Down()
	downAt := time.Now()
	unavailable := 0
	for _, r := range outageRequests(id) {
		resp := h.do(r)
		switch {
		case resp.status == http.StatusServiceUnavailable:
			if code := resp.errorCode(t); code != CodeUnavailable {
				t.Errorf("%s %s: 503 with code %s, want %s", r.method, r.path, code, CodeUnavailable)
			}
			if ra := resp.header.Get("Retry-After"); ra == "" {
				t.Errorf("%s %s: 503 without Retry-After", r.method, r.path)
			}
			unavailable++
		default:
			t.Errorf("%s %s while the store is down: %d %s, want 503 UNAVAILABLE", r.method, r.path, resp.status, resp.body)
		}
	}
	if r := h.do(req{method: "GET", path: "/readyz"}); r.status != http.StatusServiceUnavailable {
		t.Errorf("/readyz while the store is down: %d", r.status)
	}
	h.must(200, req{method: "GET", path: "/healthz"})
	h.must(200, req{method: "GET", path: "/metrics"})
	select {
	case r := <-waiter:
		t.Fatalf("the waiting call answered during the outage: %d %s", r.status, r.body)
	case <-time.After(time.Second):
	}
	t.Logf("%d routes answered 503 UNAVAILABLE during a %v outage", unavailable, time.Since(downAt).Round(time.Millisecond))

	if err := proxy.Pass(); err != nil {
		t.Fatal(err)
	}
	// Everything resumes by itself: the first request after the return is
	// served (the pool reconnects), the stream delivers, the waiter ends.
	h.must(200, req{method: "GET", path: "/readyz"})
	h.must(200, req{method: "GET", path: "/v1/proposals/" + id, token: "bob"})
	h.decide(200, "bob", waitID, "approve", map[string]any{"reason": "after the outage"}, nil)
	select {
	case r := <-waiter:
		if r.status != 200 {
			t.Fatalf("the waiting call: %d %s", r.status, r.body)
		}
		var res map[string]any
		_ = json.Unmarshal(r.body, &res)
		if res["status"] != "succeeded" {
			t.Fatalf("the waiting call answered %v, want succeeded: %s", res["status"], r.body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting call was not answered after the store came back")
	}
	seen := false
	for !seen {
		ev := next(t, events)
		if p := ev.proposal(t); p["id"] == waitID {
			seen = true
		}
	}
	h.decide(200, "bob", id, "approve", nil, nil)
	for _, r := range outageRequests(id) {
		if r.path == "/v1/events" {
			continue // a stream: it does not end; the one above delivered
		}
		if resp := h.do(r); resp.status >= 500 {
			t.Errorf("%s %s after the store came back: %d %s", r.method, r.path, resp.status, resp.body)
		}
	}
}
