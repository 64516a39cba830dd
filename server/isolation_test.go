package server

import (
	"bytes"
	"testing"
)

// TestTenantIsolation walks every route with tokens of another tenant
// ("globex": x_alice has alice's actor name and every role, x_eve is a
// finance operator) against acme's records, and checks that each answers as
// docs/api.md says (403 for another tenant's proposal, 404 for a thread or grant,
// since those are namespaced by tenant) and that no answer carries anything
// of acme's.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		// acme's records.
		pending := h.pending("iso_1", "c_secret")
		settled := h.pending("iso_2", "c_secret2")
		h.decide(200, "bob", settled, "approve", map[string]any{"remember": "thread"}, nil)
		h.call("alice", refund("iso_2", "c_secret2", 40))
		gs, _ := h.must(200, req{method: "GET", path: "/v1/grants", token: "alice"}).json(t)["grants"].([]any)
		if len(gs) != 1 {
			t.Fatalf("acme grants = %v", gs)
		}
		grant, _ := gs[0].(map[string]any)["id"].(string)
		flaky := map[string]any{"thread_id": "t1", "tool_call_id": "iso_3", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0}
		unknown, _ := h.call("alice", flaky)["proposal_id"].(string)
		h.decide(200, "alice", unknown, "approve", nil, nil)
		h.call("alice", flaky)

		secrets := [][]byte{[]byte(pending), []byte(settled), []byte(unknown), []byte(grant), []byte("c_secret"), []byte("acme")}
		clean := func(what string, resp *response) {
			t.Helper()
			for _, s := range secrets {
				if bytes.Contains(resp.body, s) {
					t.Errorf("%s: answer %d leaks %q: %s", what, resp.status, s, resp.body)
				}
			}
		}
		streams := map[string]<-chan sseEvent{}
		for _, tok := range []string{"x_alice", "x_eve"} {
			streams[tok] = h.stream(t, tok, "")
		}
		// Activity in acme while globex streams.
		h.decide(200, "bob", h.pending("iso_4", "c_secret4"), "reject", nil, nil)

		for _, tok := range []string{"x_alice", "x_eve"} {
			steps := []struct {
				method, path string
				body         any
				status       int
			}{
				{"GET", "/v1/proposals", nil, 200},
				{"GET", "/v1/proposals?thread_id=t1", nil, 200},
				{"GET", "/v1/proposals?status=pending&action=payments.refund", nil, 200},
				{"GET", "/v1/threads/t1/proposals", nil, 404},
				{"GET", "/v1/threads/t1", nil, 404},
				{"GET", "/v1/proposals/" + pending, nil, 403},
				{"GET", "/v1/proposals/" + pending + "?wait_seconds=0.1", nil, 403},
				{"GET", "/v1/proposals/" + settled, nil, 403},
				{"GET", "/v1/proposals/" + pending + "/events", nil, 403},
				{"POST", "/v1/proposals/" + pending + "/approve", map[string]any{"remember": "thread"}, 403},
				{"POST", "/v1/proposals/" + pending + "/reject", nil, 403},
				{"POST", "/v1/proposals/" + pending + "/cancel", nil, 403},
				{"POST", "/v1/proposals/" + unknown + "/resolve", map[string]any{"outcome": "failed", "note": "x"}, 403},
				{"GET", "/v1/grants", nil, 200},
				{"GET", "/v1/grants?thread_id=t1", nil, 200},
				{"DELETE", "/v1/grants/" + grant, nil, 404},
			}
			for _, s := range steps {
				resp := h.do(req{method: s.method, path: s.path, token: tok, body: s.body})
				if resp.status != s.status {
					t.Errorf("%s %s %s: %d, want %d: %s", tok, s.method, s.path, resp.status, s.status, resp.body)
				}
				clean(tok+" "+s.method+" "+s.path, resp)
				if s.status == 200 {
					m := resp.json(t)
					for _, k := range []string{"proposals", "grants"} {
						if l, ok := m[k].([]any); ok && len(l) != 0 {
							t.Errorf("%s %s: %d %s", tok, s.path, len(l), k)
						}
					}
				}
			}
		}

		// The same thread and tool call ids in globex are another call.
		res := h.call("x_alice", refund("iso_1", "c_globex", 40))
		xid, _ := res["proposal_id"].(string)
		if xid == "" || xid == pending {
			t.Fatalf("globex's call answered %v", res)
		}
		want(t, "tenant", res["proposal"].(map[string]any)["tenant"], "globex")
		for _, path := range []string{"/v1/threads/t1", "/v1/threads/t1/proposals", "/v1/proposals/" + xid, "/v1/proposals/" + xid + "/events"} {
			clean("x_alice GET "+path, h.must(200, req{method: "GET", path: path, token: "x_alice"}))
		}
		if got := ids(t, h.must(200, req{method: "GET", path: "/v1/threads/t1/proposals", token: "x_alice"})); len(got) != 1 || got[0] != xid {
			t.Errorf("globex's t1 = %v, want [%s]", got, xid)
		}
		// And acme cannot reach globex's proposal either.
		h.must(403, req{method: "GET", path: "/v1/proposals/" + xid, token: "bob"})
		h.must(403, req{method: "POST", path: "/v1/proposals/" + xid + "/approve", token: "bob"})

		// The streams saw globex's proposal first, nothing of acme's.
		for tok, ch := range streams {
			ev := next(t, ch)
			if ev.proposal(t)["id"] != xid {
				t.Errorf("%s's first event: %s %s", tok, ev.name, ev.data)
			}
			for _, s := range secrets {
				if bytes.Contains([]byte(ev.data), s) {
					t.Errorf("%s's stream leaks %q", tok, s)
				}
			}
		}

		// acme's records are as they were.
		want(t, "pending", h.must(200, req{method: "GET", path: "/v1/proposals/" + pending, token: "alice"}).json(t)["status"], "pending")
		want(t, "unknown", h.must(200, req{method: "GET", path: "/v1/proposals/" + unknown, token: "alice"}).json(t)["status"], "unknown")
		gs, _ = h.must(200, req{method: "GET", path: "/v1/grants", token: "alice"}).json(t)["grants"].([]any)
		if len(gs) != 1 || gs[0].(map[string]any)["revoked_at"] != nil {
			t.Errorf("acme's grant after globex's attempts: %v", gs)
		}
	})
}
