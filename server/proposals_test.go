package server

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// ids lists the proposal ids of a listing's answer.
func ids(t *testing.T, resp *response) []string {
	t.Helper()
	ps, ok := resp.json(t)["proposals"].([]any)
	if !ok {
		t.Fatalf("no proposals list: %s", resp.body)
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i], _ = p.(map[string]any)["id"].(string)
	}
	return out
}

func TestListProposals(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		a := h.pending("l1", "c_1")
		b := h.pending("l2", "c_2")
		h.must(200, req{method: "POST", path: "/v1/proposals/" + b + "/reject", token: "bob"})
		// dave's own proposal in his own thread (flaky.write: the requester decides).
		d := h.call("dave", map[string]any{"thread_id": "dave_t", "tool_call_id": "d1", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0})
		dID, _ := d["proposal_id"].(string)

		list := func(token, q string) []string {
			return ids(t, h.must(200, req{method: "GET", path: "/v1/proposals" + q, token: token}))
		}
		cases := []struct {
			token, query string
			want         []string
		}{
			{"alice", "", []string{b, a}},             // her thread, newest first
			{"bob", "", []string{b, a}},               // role:finance decides them
			{"carol", "", []string{}},                 // an operator neither owns nor decides
			{"dave", "", []string{dID}},               // only his own
			{"alice", "?status=pending", []string{a}}, // filters
			{"alice", "?status=rejected,pending", []string{b, a}},
			{"alice", "?status=rejected&status=pending", []string{b, a}},
			{"alice", "?action=payments.refund", []string{b, a}},
			{"alice", "?action=flaky.write", []string{}},
			{"alice", "?thread_id=t1", []string{b, a}},
			{"alice", "?thread_id=t2", []string{}},
			{"alice", "?limit=1000", []string{b, a}},
		}
		for _, c := range cases {
			if got := list(c.token, c.query); !slices.Equal(got, c.want) {
				t.Errorf("%s GET /v1/proposals%s = %v, want %v", c.token, c.query, got, c.want)
			}
		}
		for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?status=done", "?limit=-1"} {
			// Each breaks the document too: status has a pattern of the
			// known statuses since Schemathesis found it admitting any string.
			resp := h.must(400, req{method: "GET", path: "/v1/proposals" + q, token: "alice", invalid: true})
			if code := resp.errorCode(t); code != CodeInvalidInput {
				t.Errorf("%s: code %s", q, code)
			}
		}
		h.must(401, req{method: "GET", path: "/v1/proposals"})

		// One thread.
		if got := ids(t, h.must(200, req{method: "GET", path: "/v1/threads/t1/proposals", token: "alice"})); !slices.Equal(got, []string{b, a}) {
			t.Errorf("thread t1 = %v", got)
		}
		// dave may decide nothing in alice's thread: he may not list it.
		h.must(403, req{method: "GET", path: "/v1/threads/t1/proposals", token: "dave"})
		h.must(404, req{method: "GET", path: "/v1/threads/nope/proposals", token: "alice"})
		h.must(400, req{method: "GET", path: "/v1/threads/t1/proposals?limit=0", token: "alice", invalid: true})
	})
}

// TestPagination walks pages through X-Action-Proposals-Next, decoded as
// decodeURIComponent does, and checks forged cursors.
func TestPagination(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		const n = 7
		var all []string
		for i := range n {
			all = append(all, h.pending(fmt.Sprintf("p%d", i), fmt.Sprintf("c_%d", i)))
		}
		slices.Reverse(all) // newest first
		for _, path := range []string{"/v1/proposals", "/v1/threads/t1/proposals"} {
			var got []string
			var cursors []string
			after := ""
			for page := 0; ; page++ {
				if page > n {
					t.Fatalf("%s: more pages than proposals", path)
				}
				q := "?limit=3"
				if after != "" {
					// As a browser would: encodeURIComponent into the query.
					q += "&after=" + url.QueryEscape(after)
				}
				resp := h.must(200, req{method: "GET", path: path + q, token: "bob"})
				got = append(got, ids(t, resp)...)
				next := resp.header.Get(NextHeader)
				if next == "" {
					break
				}
				after = decodeURIComponent(t, next)
				cursors = append(cursors, after)
			}
			if !slices.Equal(got, all) {
				t.Errorf("%s: paged = %v, want %v", path, got, all)
			}
			if len(cursors) < 2 {
				t.Fatalf("%s: %d cursors for %d proposals in pages of 3", path, len(cursors), n)
			}

			// Any change to a cursor is refused.
			c := cursors[0]
			forged := []string{
				flipLast(c),              // last character changed
				c[:len(c)-2],             // truncated
				c + "A",                  // extended
				"not-a-cursor",           // garbage
				strings.ToUpper(c),       // case changed
				"%%%",                    // not even an escape
				strings.Repeat("A", 600), // long
			}
			for _, f := range forged {
				if f == c {
					continue
				}
				resp := h.do(req{method: "GET", path: path + "?after=" + url.QueryEscape(f), token: "bob"})
				if resp.status != 400 || resp.errorCode(t) != CodeInvalidCursor {
					t.Errorf("%s after=%q: %d %s, want 400 INVALID_CURSOR", path, f, resp.status, resp.body)
				}
			}
		}
		// Every answer lets browsers read the cursor header.
		resp := h.must(200, req{method: "GET", path: "/v1/proposals?limit=1", token: "bob"})
		if !strings.Contains(resp.header.Get("Access-Control-Expose-Headers"), NextHeader) {
			t.Errorf("Access-Control-Expose-Headers = %q", resp.header.Get("Access-Control-Expose-Headers"))
		}
	})
}

func TestGetProposal(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		id := h.pending("g1", "c_g")
		for _, c := range []struct {
			token  string
			status int
		}{{"alice", 200}, {"bob", 200}, {"dave", 403}, {"carol", 403}, {"x_alice", 403}, {"", 401}} {
			resp := h.must(c.status, req{method: "GET", path: "/v1/proposals/" + id, token: c.token})
			if c.status == 200 {
				want(t, "id", resp.json(t)["id"], id)
			}
		}
		h.must(404, req{method: "GET", path: "/v1/proposals/prp_nope", token: "alice"})
		h.must(404, req{method: "GET", path: "/v1/proposals/" + strings.Repeat("x", 300), token: "alice"})
		h.must(400, req{method: "GET", path: "/v1/proposals/" + id + "?wait_seconds=61", token: "alice", invalid: true})
		h.must(400, req{method: "GET", path: "/v1/proposals/" + id + "?wait_seconds=soon", token: "alice", invalid: true})

		// Audit trail.
		h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob", body: map[string]any{"reason": "no"}})
		evs, _ := h.must(200, req{method: "GET", path: "/v1/proposals/" + id + "/events", token: "alice"}).json(t)["events"].([]any)
		var types []string
		for _, e := range evs {
			types = append(types, e.(map[string]any)["type"].(string))
		}
		if !slices.Equal(types, []string{"proposal.created", "proposal.decided"}) {
			t.Errorf("events = %v", types)
		}
		h.must(403, req{method: "GET", path: "/v1/proposals/" + id + "/events", token: "dave"})
		h.must(403, req{method: "GET", path: "/v1/proposals/" + id + "/events", token: "x_eve"})
		h.must(404, req{method: "GET", path: "/v1/proposals/prp_nope/events", token: "alice"})
	})
}

// TestGetProposalWait: ?wait_seconds answers at a decision, or after N seconds.
func TestGetProposalWait(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		id := h.pending("w1", "c_w")
		start := time.Now()
		p := h.must(200, req{method: "GET", path: "/v1/proposals/" + id + "?wait_seconds=0.3", token: "bob"}).json(t)
		if el := time.Since(start); el < 250*time.Millisecond {
			t.Errorf("a 0.3s wait answered after %v", el)
		}
		want(t, "status", p["status"], "pending")

		done := make(chan map[string]any, 1)
		go func() {
			done <- h.must(200, req{method: "GET", path: "/v1/proposals/" + id + "?wait_seconds=30", token: "alice"}).json(t)
		}()
		time.Sleep(150 * time.Millisecond)
		h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob"})
		select {
		case p := <-done:
			want(t, "status", p["status"], "rejected")
		case <-time.After(10 * time.Second):
			t.Fatal("the long-poll did not answer the rejection")
		}
		// A terminal proposal answers at once.
		start = time.Now()
		h.must(200, req{method: "GET", path: "/v1/proposals/" + id + "?wait_seconds=30", token: "alice"})
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("a terminal proposal's wait took %v", el)
		}
	})
}

// decide posts a decision and returns its answer.
func (h *harness) decide(want int, token, id, verb string, body any, header map[string]string) map[string]any {
	h.t.Helper()
	return h.must(want, req{method: "POST", path: "/v1/proposals/" + id + "/" + verb, token: token, body: body, header: header}).json(h.t)
}

func TestDecisions(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		id := h.pending("d1", "c_d1")
		// Who may not decide: alice (requester, not finance), dave, carol, another tenant.
		for _, tok := range []string{"alice", "dave", "carol", "x_eve", "x_alice"} {
			if r := h.decide(403, tok, id, "approve", nil, nil); r["error"] == nil {
				t.Errorf("%s: 403 without error object", tok)
			}
		}
		r := h.decide(200, "bob", id, "approve", map[string]any{"reason": "ok"}, map[string]string{ViaHeader: "cli"})
		want(t, "status", r["status"], "applied")
		p, _ := r["proposal"].(map[string]any)
		want(t, "proposal.status", p["status"], "approved")
		ds, _ := p["decisions"].([]any)
		if len(ds) != 1 {
			t.Fatalf("decisions = %v", ds)
		}
		d0, _ := ds[0].(map[string]any)
		want(t, "via", d0["via"], "cli")
		want(t, "actor", d0["actor"], "bob")
		want(t, "reason", d0["reason"], "ok")

		want(t, "again", h.decide(200, "bob", id, "approve", nil, nil)["status"], "unchanged")
		want(t, "reject after approve", h.decide(200, "bob", id, "reject", nil, nil)["status"], "conflict")

		// Not found: {"status": "not_found", "error": …}.
		nf := h.decide(404, "bob", "prp_nope", "approve", nil, nil)
		want(t, "404 status", nf["status"], "not_found")
		if nf["error"] == nil {
			t.Error("404 without error object")
		}
		// Bad bodies and headers.
		h.must(400, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob", body: map[string]any{"remember": "forever"}, invalid: true})
		h.must(400, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob", header: map[string]string{ViaHeader: "text"}, invalid: true})
		h.must(400, req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob", body: map[string]any{"remember": "run"}, invalid: true})

		// "web" cannot be claimed by a header: only the inbox's session may.
		h.must(400, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob", header: map[string]string{ViaHeader: "web"}, invalid: true})

		// Via the CLI, and a rejection.
		id2 := h.pending("d2", "c_d2")
		r = h.decide(200, "bob", id2, "reject", map[string]any{"reason": "too much"}, map[string]string{ViaHeader: "cli"})
		want(t, "status", r["status"], "applied")
		p, _ = r["proposal"].(map[string]any)
		want(t, "proposal.status", p["status"], "rejected")
		want(t, "via", p["decisions"].([]any)[0].(map[string]any)["via"], "cli")
		want(t, "approve after reject", h.decide(200, "bob", id2, "approve", nil, nil)["status"], "conflict")
		want(t, "reject again", h.decide(200, "bob", id2, "reject", nil, nil)["status"], "unchanged")

		// Default channel: api.
		id3 := h.pending("d3", "c_d3")
		p, _ = h.decide(200, "bob", id3, "approve", nil, nil)["proposal"].(map[string]any)
		want(t, "via", p["decisions"].([]any)[0].(map[string]any)["via"], "api")
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	// Who may cancel, and the unchanged answer to cancelling again, are the
	// engine's (Engine.Cancel): on every store.
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		id := h.pending("c1", "c_c1")
		h.decide(403, "bob", id, "cancel", nil, nil) // only the requester
		h.decide(403, "x_alice", id, "cancel", nil, nil)
		r := h.decide(200, "alice", id, "cancel", map[string]any{"reason": "changed my mind"}, nil)
		want(t, "status", r["status"], "applied")
		want(t, "proposal.status", r["proposal"].(map[string]any)["status"], "cancelled")
		want(t, "again", h.decide(200, "alice", id, "cancel", nil, nil)["status"], "unchanged")
		want(t, "approve after cancel", h.decide(200, "bob", id, "approve", nil, nil)["status"], "conflict")

		id2 := h.pending("c2", "c_c2")
		h.decide(200, "bob", id2, "approve", nil, nil)
		resp := h.must(409, req{method: "POST", path: "/v1/proposals/" + id2 + "/cancel", token: "alice"})
		if code := resp.errorCode(t); code != CodeInvalidState {
			t.Errorf("code %s", code)
		}
		e, _ := resp.json(t)["error"].(map[string]any)
		if d, _ := e["details"].(map[string]any); d["status"] != "approved" {
			t.Errorf("details = %v", e["details"])
		}
		nf := h.decide(404, "alice", "prp_nope", "cancel", nil, nil)
		want(t, "404 status", nf["status"], "not_found")
	})
}

func TestResolve(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		uncertain := func(action, tool string) string {
			body := map[string]any{"thread_id": "t1", "tool_call_id": tool, "action": action, "input": map[string]any{}, "wait_seconds": 0}
			id, _ := h.call("alice", body)["proposal_id"].(string)
			h.decide(200, "alice", id, "approve", nil, nil)
			if st := h.call("alice", body)["status"]; st != "unknown" && st != "reconciling" {
				t.Fatalf("%s ended %v", action, st)
			}
			return id
		}
		unknown := uncertain("flaky.write", "r1")
		ok := map[string]any{"outcome": "succeeded", "receipt": "rcpt_1", "note": "checked the ledger"}
		h.decide(403, "bob", unknown, "resolve", ok, nil)   // not an operator
		h.decide(403, "alice", unknown, "resolve", ok, nil) // the requester is not enough
		h.decide(403, "x_eve", unknown, "resolve", ok, nil) // another tenant's operator
		for _, bad := range []map[string]any{
			{"outcome": "succeeded"},
			{"outcome": "succeeded", "note": ""},
			{"outcome": "done", "note": "x"},
			{"note": "x"},
		} {
			h.must(400, req{method: "POST", path: "/v1/proposals/" + unknown + "/resolve", token: "carol", body: bad, invalid: true})
		}
		r := h.decide(200, "carol", unknown, "resolve", ok, nil)
		want(t, "status", r["status"], "applied")
		p, _ := r["proposal"].(map[string]any)
		want(t, "proposal.status", p["status"], "succeeded")
		want(t, "receipt", p["outcome"].(map[string]any)["receipt"], "rcpt_1")
		h.must(409, req{method: "POST", path: "/v1/proposals/" + unknown + "/resolve", token: "carol", body: ok})

		recon := uncertain("flaky.reconciled", "r2")
		r = h.decide(200, "carol", recon, "resolve", map[string]any{"outcome": "failed", "note": "never arrived"}, map[string]string{ViaHeader: "cli"})
		want(t, "proposal.status", r["proposal"].(map[string]any)["status"], "failed")

		pending := h.pending("r3", "c_r3")
		resp := h.must(409, req{method: "POST", path: "/v1/proposals/" + pending + "/resolve", token: "carol", body: ok})
		if code := resp.errorCode(t); code != CodeInvalidState {
			t.Errorf("code %s", code)
		}
		nf := h.decide(404, "carol", "prp_nope", "resolve", ok, nil)
		want(t, "404 status", nf["status"], "not_found")
	})
}

func TestThreads(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		id := h.pending("th1", "c_th")
		h.decide(200, "bob", id, "approve", nil, nil)
		h.call("alice", refund("th1", "c_th", 40))
		// An allowed call (no proposal) makes its caller the owner too.
		h.call("dave", map[string]any{"thread_id": "dave_notes", "tool_call_id": "n1", "action": "notes.read", "input": map[string]any{"id": "x"}})

		r := h.must(200, req{method: "GET", path: "/v1/threads/t1", token: "alice"}).json(t)
		th, _ := r["thread"].(map[string]any)
		want(t, "thread.id", th["id"], "t1")
		want(t, "thread.owner", th["owner"], "alice")
		msgs, _ := r["messages"].([]any)
		if len(msgs) != 1 {
			t.Fatalf("messages = %v", msgs)
		}
		m, _ := msgs[0].(map[string]any)
		o, _ := m["outcome"].(map[string]any)
		want(t, "outcome.proposal_id", o["proposal_id"], id)
		want(t, "outcome.receipt", o["receipt"], "rf_c_th")

		h.must(403, req{method: "GET", path: "/v1/threads/t1", token: "bob"})
		h.must(404, req{method: "GET", path: "/v1/threads/nope", token: "alice"})
		h.must(404, req{method: "GET", path: "/v1/threads/t1", token: "x_alice"}) // globex has no t1
		h.must(401, req{method: "GET", path: "/v1/threads/t1"})
		d := h.must(200, req{method: "GET", path: "/v1/threads/dave_notes", token: "dave"}).json(t)
		want(t, "owner", d["thread"].(map[string]any)["owner"], "dave")
	})
}

func TestGrants(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		id := h.pending("gr1", "c_gr")
		h.decide(200, "bob", id, "approve", map[string]any{"remember": "thread"}, nil)
		if st := h.call("alice", refund("gr1", "c_gr", 40))["status"]; st != "succeeded" {
			t.Fatalf("call %v", st)
		}
		grants := func(token, q string) []map[string]any {
			gs, _ := h.must(200, req{method: "GET", path: "/v1/grants" + q, token: token}).json(t)["grants"].([]any)
			out := make([]map[string]any, len(gs))
			for i, g := range gs {
				out[i], _ = g.(map[string]any)
			}
			return out
		}
		gs := grants("alice", "")
		if len(gs) != 1 {
			t.Fatalf("alice's grants = %v", gs)
		}
		gid, _ := gs[0]["id"].(string)
		want(t, "scope", gs[0]["scope"], "thread")
		want(t, "granted_by", gs[0]["granted_by"], "bob")
		if gs[0]["activated_at"] == nil {
			t.Error("grant not live after the execution succeeded")
		}
		for tok, n := range map[string]int{"bob": 1, "carol": 1, "dave": 0, "x_eve": 0, "x_alice": 0} {
			if got := len(grants(tok, "")); got != n {
				t.Errorf("%s sees %d grants, want %d", tok, got, n)
			}
		}
		if n := len(grants("alice", "?thread_id=t1")); n != 1 {
			t.Errorf("thread t1: %d grants", n)
		}
		if n := len(grants("alice", "?thread_id=t2")); n != 0 {
			t.Errorf("thread t2: %d grants", n)
		}

		// The grant approves the same input again without a human.
		if st := h.call("alice", refund("gr2", "c_gr", 40))["status"]; st != "succeeded" {
			t.Errorf("a call under the grant: %v", st)
		}

		h.must(403, req{method: "DELETE", path: "/v1/grants/" + gid, token: "dave"})
		h.must(404, req{method: "DELETE", path: "/v1/grants/" + gid, token: "x_eve"})
		h.must(404, req{method: "DELETE", path: "/v1/grants/grt_nope", token: "alice"})
		g := h.must(200, req{method: "DELETE", path: "/v1/grants/" + gid, token: "bob"}).json(t)["grant"].(map[string]any)
		if g["revoked_at"] == nil {
			t.Errorf("revoked grant = %v", g)
		}
		h.must(200, req{method: "DELETE", path: "/v1/grants/" + gid, token: "alice"}) // twice is not an error

		// Revoked: the same input asks again.
		if st := h.call("alice", refund("gr3", "c_gr", 40))["status"]; st != "pending" {
			t.Errorf("a call after revocation: %v", st)
		}
	})
}

// flipLast changes the last character of s.
func flipLast(s string) string {
	last := byte('A')
	if s[len(s)-1] == 'A' {
		last = 'B'
	}
	return s[:len(s)-1] + string(last)
}
