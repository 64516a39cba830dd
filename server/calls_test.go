package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store/storetest"
)

// forEachStore runs fn against a fresh harness on every store driver.
func forEachStore(t *testing.T, ho harnessOptions, fn func(t *testing.T, h *harness)) {
	forStores(t, storeKinds, ho, fn)
}

// forAllStores is forEachStore on PostgreSQL too.
func forAllStores(t *testing.T, ho harnessOptions, fn func(t *testing.T, h *harness)) {
	forStores(t, allStoreKinds, ho, fn)
}

func forStores(t *testing.T, kinds []string, ho harnessOptions, fn func(t *testing.T, h *harness)) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, newHarness(t, kind, ho))
		})
	}
}

func want[T comparable](t *testing.T, what string, got any, w T) {
	t.Helper()
	if g, ok := got.(T); !ok || g != w {
		t.Errorf("%s = %#v, want %#v", what, got, w)
	}
}

func TestCallAnswers(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		t.Run("succeeded without a proposal", func(t *testing.T) {
			res := h.call("alice", map[string]any{"thread_id": "t1", "tool_call_id": "read_1", "action": "notes.read", "input": map[string]any{"id": "n1"}})
			want(t, "status", res["status"], "succeeded")
			want(t, "executed", res["executed"], true)
			want(t, "receipt", res["receipt"], "note")
			if res["proposal"] != nil {
				t.Errorf("proposal = %v, want null", res["proposal"])
			}
			if r, _ := res["result"].(map[string]any); r["id"] != "n1" {
				t.Errorf("result = %v", res["result"])
			}
		})

		var id string
		t.Run("pending, then succeeded after approval", func(t *testing.T) {
			res := h.call("alice", refund("call_1", "c_9", 40))
			want(t, "status", res["status"], "pending")
			want(t, "executed", res["executed"], false)
			id, _ = res["proposal_id"].(string)
			p, _ := res["proposal"].(map[string]any)
			want(t, "proposal.id", p["id"], id)
			want(t, "proposal.status", p["status"], "pending")
			want(t, "proposal.tenant", p["tenant"], "acme")
			want(t, "proposal.preview", p["preview"], "Refund 40 EUR to c_9")
			if d, _ := p["input_digest"].(string); !strings.HasPrefix(d, "sha256:") {
				t.Errorf("input_digest = %q", d)
			}

			d := h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob", body: map[string]any{"reason": "ok"}}).json(t)
			want(t, "decision", d["status"], "applied")

			res = h.call("alice", refund("call_1", "c_9", 40))
			want(t, "status", res["status"], "succeeded")
			want(t, "executed", res["executed"], true)
			want(t, "receipt", res["receipt"], "rf_c_9")
			if r, _ := res["result"].(map[string]any); r["refunded"] != 40.0 {
				t.Errorf("result = %v", res["result"])
			}
			p, _ = res["proposal"].(map[string]any)
			want(t, "proposal.status", p["status"], "succeeded")

			// A settled call answers its recorded outcome.
			again := h.call("alice", refund("call_1", "c_9", 40))
			want(t, "repeat receipt", again["receipt"], "rf_c_9")
		})

		t.Run("failed", func(t *testing.T) {
			id := h.pending("call_fail", "c_fail")
			h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob"})
			res := h.call("alice", refund("call_fail", "c_fail", 40))
			want(t, "status", res["status"], "failed")
			want(t, "executed", res["executed"], true)
			if e, _ := res["error"].(string); !strings.Contains(e, "card declined") {
				t.Errorf("error = %q", e)
			}
		})

		t.Run("two phase", func(t *testing.T) {
			body := refund("call_tp", "c_tp", 12)
			body["mode"] = "two_phase"
			res := h.call("alice", body)
			want(t, "status", res["status"], "confirmation_required")
			want(t, "code", res["code"], "CONFIRMATION_REQUIRED")
			want(t, "summary", res["summary"], "Refund 12 EUR to c_tp")
			cid, _ := res["confirmation_id"].(string)
			pid, _ := res["proposal_id"].(string)
			if cid == "" || pid == "" || res["expires_at"] == nil {
				t.Fatalf("confirmation answer = %v", res)
			}
			h.must(200, req{method: "POST", path: "/v1/proposals/" + pid + "/approve", token: "bob"})

			// Evidence for another input: mismatch.
			bad := refund("call_tp_2", "c_tp", 13)
			bad["mode"], bad["evidence"] = "two_phase", cid
			res = h.call("alice", bad)
			want(t, "status", res["status"], "confirmation_invalid")
			want(t, "code", res["code"], "CONFIRMATION_INVALID")
			want(t, "reason", res["reason"], "mismatch")
			want(t, "retry", res["retry"], "no")

			retry := refund("call_tp_3", "c_tp", 12)
			retry["mode"], retry["evidence"] = "two_phase", cid
			res = h.call("alice", retry)
			want(t, "status", res["status"], "succeeded")
			want(t, "receipt", res["receipt"], "rf_c_tp")

			// Spent evidence cannot be spent again.
			retry["tool_call_id"] = "call_tp_4"
			res = h.call("alice", retry)
			want(t, "status", res["status"], "confirmation_invalid")
			want(t, "reason", res["reason"], "consumed")
		})

		t.Run("independent", func(t *testing.T) {
			body := refund("call_ind", "c_ind", 5)
			body["mode"] = "independent"
			res := h.call("alice", body)
			want(t, "status", res["status"], "pending")
			want(t, "executed", res["executed"], false)
		})

		t.Run("denied", func(t *testing.T) {
			res := h.call("alice", map[string]any{"thread_id": "t1", "tool_call_id": "del_1", "action": "danger.delete", "input": map[string]any{}})
			want(t, "status", res["status"], "denied")
			want(t, "code", res["code"], countersign.DeniedByPolicy)
			if r, _ := res["reason"].(string); r == "" {
				t.Error("denial without a reason")
			}
		})

		t.Run("rejected", func(t *testing.T) {
			id := h.pending("call_rej", "c_rej")
			h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob", body: map[string]any{"reason": "no"}})
			res := h.call("alice", refund("call_rej", "c_rej", 40))
			want(t, "status", res["status"], "rejected")
			want(t, "executed", res["executed"], false)
		})

		t.Run("cancelled", func(t *testing.T) {
			id := h.pending("call_can", "c_can")
			h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/cancel", token: "alice"})
			res := h.call("alice", refund("call_can", "c_can", 40))
			want(t, "status", res["status"], "cancelled")
			want(t, "executed", res["executed"], false)
		})

		t.Run("superseded", func(t *testing.T) {
			h.pending("call_sup_1", "c_sup")
			h.pending("call_sup_2", "c_sup")
			res := h.call("alice", refund("call_sup_1", "c_sup", 40))
			want(t, "status", res["status"], "superseded")
			want(t, "executed", res["executed"], false)
		})

		t.Run("unknown", func(t *testing.T) {
			body := map[string]any{"thread_id": "t1", "tool_call_id": "flaky_1", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0}
			res := h.call("alice", body)
			pid, _ := res["proposal_id"].(string)
			h.must(200, req{method: "POST", path: "/v1/proposals/" + pid + "/approve", token: "alice"})
			res = h.call("alice", body)
			want(t, "status", res["status"], "unknown")
			if v, ok := res["executed"]; !ok || v != nil {
				t.Errorf("executed = %v (present %v), want null", v, ok)
			}
		})

		t.Run("unknown without a proposal", func(t *testing.T) {
			res := h.call("alice", map[string]any{"thread_id": "t1", "tool_call_id": "probe_1", "action": "probe.read", "input": map[string]any{}})
			want(t, "status", res["status"], "unknown")
			if v, ok := res["proposal"]; !ok || v != nil {
				t.Errorf("proposal = %v (present %v), want null", v, ok)
			}
		})

		t.Run("reconciling", func(t *testing.T) {
			body := map[string]any{"thread_id": "t1", "tool_call_id": "recon_1", "action": "flaky.reconciled", "input": map[string]any{}, "wait_seconds": 0}
			res := h.call("alice", body)
			pid, _ := res["proposal_id"].(string)
			h.must(200, req{method: "POST", path: "/v1/proposals/" + pid + "/approve", token: "alice"})
			res = h.call("alice", body)
			want(t, "status", res["status"], "reconciling")
			if v, ok := res["executed"]; !ok || v != nil {
				t.Errorf("executed = %v (present %v), want null", v, ok)
			}
		})
	})
}

// TestCallExpired moves the store's and the engine's clock past the
// deadline rather than sleeping through a short TTL (on a slow machine such
// a TTL lapsed before the proposal was even read back).
func TestCallExpired(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewClock(time.Now())
			h := newHarness(t, kind, harnessOptions{now: clock.Now})
			id := h.pending("call_exp", "c_exp")
			clock.Advance(time.Hour)
			d := h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob"}).json(t)
			want(t, "late decision", d["status"], "expired")
			res := h.call("alice", refund("call_exp", "c_exp", 40))
			want(t, "status", res["status"], "expired")
			want(t, "executed", res["executed"], false)
		})
	}
}

// TestCallWaitLongPoll: a wait-mode call blocks until the decision, within
// wait_seconds, and answers pending when the wait runs out.
func TestCallWaitLongPoll(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		body := refund("call_wait", "c_wait", 40)
		body["wait_seconds"] = 0.3
		start := time.Now()
		res := h.call("alice", body)
		if el := time.Since(start); el < 250*time.Millisecond || el > 5*time.Second {
			t.Errorf("a 0.3s wait took %v", el)
		}
		want(t, "status", res["status"], "pending")
		id, _ := res["proposal_id"].(string)

		body["wait_seconds"] = 30
		done := make(chan map[string]any, 1)
		go func() { done <- h.call("alice", body) }()
		time.Sleep(200 * time.Millisecond)
		h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob"})
		select {
		case res := <-done:
			want(t, "status", res["status"], "succeeded")
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting call did not answer after the approval")
		}
	})
}

func TestCallErrors(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		long := strings.Repeat("x", 257)
		cases := []struct {
			name    string
			token   string
			body    any
			invalid bool
			status  int
			code    string
			path    string // details[0].path
		}{
			{"no token", "", refund("e1", "c", 1), false, 401, CodeUnauthenticated, ""},
			{"unknown token", "mallory", refund("e1", "c", 1), false, 401, CodeUnauthenticated, ""},
			{"authenticator down", "broken", refund("e1", "c", 1), false, 500, CodeInternal, ""},
			{"unknown action", "alice", map[string]any{"thread_id": "t1", "tool_call_id": "e2", "action": "nope", "input": map[string]any{}}, false, 404, CodeActionNotFound, ""},
			{"schema: missing property", "alice", map[string]any{"thread_id": "t1", "tool_call_id": "e3", "action": "payments.refund", "input": map[string]any{"amount": 1}}, false, 400, CodeInvalidInput, ""},
			{"schema: wrong type", "alice", map[string]any{"thread_id": "t1", "tool_call_id": "e4", "action": "payments.refund", "input": map[string]any{"amount": "ten", "customer": "c"}}, false, 400, CodeInvalidInput, "/amount"},
			{"missing thread_id", "alice", map[string]any{"tool_call_id": "e5", "action": "payments.refund", "input": map[string]any{}}, true, 400, CodeInvalidBody, "thread_id"},
			{"missing tool_call_id", "alice", map[string]any{"thread_id": "t1", "action": "payments.refund", "input": map[string]any{}}, true, 400, CodeInvalidBody, "tool_call_id"},
			{"missing action", "alice", map[string]any{"thread_id": "t1", "tool_call_id": "e6", "input": map[string]any{}}, true, 400, CodeInvalidBody, "action"},
			{"missing input", "alice", map[string]any{"thread_id": "t1", "tool_call_id": "e7", "action": "payments.refund"}, true, 400, CodeInvalidBody, "input"},
			{"bad mode", "alice", map[string]any{"thread_id": "t1", "tool_call_id": "e8", "action": "payments.refund", "input": map[string]any{}, "mode": "later"}, true, 400, CodeInvalidBody, "mode"},
			{"wait over 60", "alice", map[string]any{"thread_id": "t1", "tool_call_id": "e9", "action": "payments.refund", "input": map[string]any{}, "wait_seconds": 61}, true, 400, CodeInvalidBody, "wait_seconds"},
			{"negative wait", "alice", map[string]any{"thread_id": "t1", "tool_call_id": "e9", "action": "payments.refund", "input": map[string]any{}, "wait_seconds": -1}, true, 400, CodeInvalidBody, "wait_seconds"},
			{"long thread id", "alice", map[string]any{"thread_id": long, "tool_call_id": "e10", "action": "payments.refund", "input": map[string]any{}}, true, 400, CodeInvalidBody, "thread_id"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				resp := h.must(c.status, req{method: "POST", path: "/v1/calls", token: c.token, body: c.body, invalid: c.invalid})
				if got := resp.errorCode(t); got != c.code {
					t.Errorf("code %q, want %q: %s", got, c.code, resp.body)
				}
				if c.status == 401 && resp.header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				if c.path != "" {
					e, _ := resp.json(t)["error"].(map[string]any)
					ds, _ := e["details"].([]any)
					if len(ds) == 0 {
						t.Fatalf("no details: %s", resp.body)
					}
					if d, _ := ds[0].(map[string]any); d["path"] != c.path {
						t.Errorf("details[0].path = %v, want %q", d["path"], c.path)
					}
				}
			})
		}
		// Nothing was stored for the refused calls.
		page := h.must(200, req{method: "GET", path: "/v1/proposals", token: "alice"}).json(t)
		if ps, _ := page["proposals"].([]any); len(ps) != 0 {
			t.Errorf("%d proposals stored by refused calls", len(ps))
		}
	})
}

// TestStrictBodies: unknown fields, wrong types, invalid JSON, trailing data
// and oversized bodies, on every route that takes a body.
func TestStrictBodies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	id := h.pending("call_strict", "c_strict")
	routes := []struct {
		path  string
		valid string // a valid body, as a base for the broken ones
	}{
		{"/v1/calls", `{"thread_id":"t1","tool_call_id":"s1","action":"notes.read","input":{"id":"x"}}`},
		{"/v1/proposals/" + id + "/approve", `{"reason":"ok"}`},
		{"/v1/proposals/" + id + "/reject", `{"reason":"no"}`},
		{"/v1/proposals/" + id + "/cancel", `{"reason":"oops"}`},
		{"/v1/proposals/" + id + "/resolve", `{"outcome":"failed","note":"checked"}`},
	}
	big := `{"reason":"` + strings.Repeat("a", MaxBodyBytes+1-len(`{"reason":""}`)) + `"}`
	for _, rt := range routes {
		field := rt.valid[2 : strings.Index(rt.valid[2:], `"`)+2] // the first field's name
		cases := []struct {
			name, body, code, path string
			status                 int
		}{
			{"unknown field", rt.valid[:len(rt.valid)-1] + `,"extra":1}`, CodeInvalidBody, "extra", 400},
			{"field in another case", strings.Replace(rt.valid, `"`+field+`"`, `"`+strings.ToUpper(field)+`"`, 1), CodeInvalidBody, strings.ToUpper(field), 400},
			{"wrong type", `{"` + field + `":123}`, CodeInvalidBody, field, 400},
			{"invalid JSON", `{"` + field + `":`, CodeInvalidBody, "", 400},
			{"not an object", `["a"]`, CodeInvalidBody, "", 400},
			{"null", `null`, CodeInvalidBody, "", 400},
			{"trailing data", rt.valid + ` {}`, CodeInvalidBody, "", 400},
			{"trailing garbage", rt.valid + `x`, CodeInvalidBody, "", 400},
			{"1 MiB + 1", big, CodeBodyTooLarge, "", 413},
			{"duplicate key", rt.valid[:len(rt.valid)-1] + `,"` + field + `":` + firstValue(rt.valid) + `}`, CodeInvalidBody, field, 400},
			{"duplicate escaped key", `{"` + field + `":1,"\u00` + fmt.Sprintf("%x", field[0]) + field[1:] + `":2}`, CodeInvalidBody, field, 400},
			{"duplicate key deep inside", `{"` + field + `":{"a":{"b":[0,{"c":1,"d":{},"c":2}]}}}`, CodeInvalidBody, field + ".a.b[1].c", 400},
			{"text/plain", rt.valid, CodeUnsupportedMedia, "", 415},
			{"form", rt.valid, CodeUnsupportedMedia, "", 415},
			{"no Content-Type", rt.valid, CodeUnsupportedMedia, "", 415},
			{"latin-1 JSON", rt.valid, CodeUnsupportedMedia, "", 415},
			{"JSON with a suffix", rt.valid, CodeUnsupportedMedia, "", 415},
		}
		contentTypes := map[string]string{
			"text/plain": "text/plain", "form": "application/x-www-form-urlencoded", "no Content-Type": "",
			"latin-1 JSON": "application/json; charset=iso-8859-1", "JSON with a suffix": "application/jsonx",
		}
		for _, c := range cases {
			t.Run(rt.path[strings.LastIndex(rt.path, "/")+1:]+"/"+c.name, func(t *testing.T) {
				if c.status == 413 && len(c.body) != MaxBodyBytes+1 {
					t.Fatalf("test body of %d bytes is not over the limit", len(c.body))
				}
				var header map[string]string
				if ct, ok := contentTypes[c.name]; ok {
					header = map[string]string{"Content-Type": ct}
				}
				resp := h.must(c.status, req{method: "POST", path: rt.path, token: "alice", body: c.body, header: header, invalid: true})
				if got := resp.errorCode(t); got != c.code {
					t.Errorf("code %q, want %q: %s", got, c.code, resp.body)
				}
				if c.path != "" {
					e, _ := resp.json(t)["error"].(map[string]any)
					ds, _ := e["details"].([]any)
					var d map[string]any
					if len(ds) > 0 {
						d, _ = ds[0].(map[string]any)
					}
					if d["path"] != c.path {
						t.Errorf("details = %v, want path %q", ds, c.path)
					}
					if m, _ := e["message"].(string); !strings.Contains(m, c.path) {
						t.Errorf("message %q does not name %q", m, c.path)
					}
				}
			})
		}
	}
	// Exactly 1 MiB is accepted (as far as the size goes).
	exact := `{"reason":"` + strings.Repeat("a", MaxBodyBytes-len(`{"reason":""}`)) + `"}`
	if len(exact) != MaxBodyBytes {
		t.Fatalf("exact body is %d bytes", len(exact))
	}
	resp := h.do(req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "bob", body: exact})
	if resp.status != 200 {
		t.Errorf("a 1 MiB body: status %d: %.200s", resp.status, resp.body)
	}
	// Empty bodies are {} for decisions, whatever their Content-Type (or
	// none), and refused for calls.
	h.must(400, req{method: "POST", path: "/v1/calls", token: "alice", body: "", invalid: true})
	p2 := h.pending("call_strict_2", "c_strict_2")
	h.must(200, req{method: "POST", path: "/v1/proposals/" + p2 + "/approve", token: "bob", body: ""})
	p3 := h.pending("call_strict_3", "c_strict_3")
	h.must(200, req{method: "POST", path: "/v1/proposals/" + p3 + "/approve", token: "bob"})
	p4 := h.pending("call_strict_4", "c_strict_4")
	h.must(200, req{method: "POST", path: "/v1/proposals/" + p4 + "/reject", token: "bob", body: " ", header: map[string]string{"Content-Type": "text/plain"}, invalid: true})
	// A charset parameter is allowed, in any case.
	for i, ct := range []string{"application/json; charset=utf-8", "Application/JSON;Charset=UTF-8", "application/json"} {
		res := h.must(200, req{method: "POST", path: "/v1/calls", token: "alice", header: map[string]string{"Content-Type": ct},
			body: fmt.Sprintf(`{"thread_id":"t1","tool_call_id":"ct_%d","action":"notes.read","input":{"id":"x"}}`, i)}).json(t)
		want(t, "status with "+ct, res["status"], "succeeded")
	}
}

// firstValue is the first member's value of a flat JSON object.
func firstValue(obj string) string {
	var fields map[string]any
	if err := json.NewDecoder(strings.NewReader(obj)).Decode(&fields); err != nil {
		panic(err)
	}
	key := obj[2 : strings.Index(obj[2:], `"`)+2]
	b, _ := json.Marshal(fields[key])
	return string(b)
}

func TestEscapeURIComponent(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "abc", "a b+c/d=e?f&g#h%i", "AQID_-x", "ümlaut ✓", "\x00\n"} {
		e := escapeURIComponent(s)
		if strings.ContainsAny(e, " +/=?&#") {
			t.Errorf("escape(%q) = %q keeps a reserved character", s, e)
		}
		if got := decodeURIComponent(t, e); got != s {
			t.Errorf("decodeURIComponent(escape(%q)) = %q", s, got)
		}
	}
}

// decodeURIComponent is JavaScript's: %XX sequences only ("+" stays "+").
func decodeURIComponent(t testing.TB, s string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			t.Fatalf("decodeURIComponent(%q): truncated escape", s)
		}
		var v byte
		if _, err := fmt.Sscanf(s[i+1:i+3], "%02X", &v); err != nil {
			t.Fatalf("decodeURIComponent(%q): %v", s, err)
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String()
}

// A tool call id repeated with another input or another action answers 409
// CALL_MISMATCH naming what differs, and stores nothing; the same input
// spelled otherwise replays the call.
func TestCallMismatch(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		id := h.pending("call_mm", "c_9")
		paths := func(resp *response) []string {
			e, _ := resp.json(t)["error"].(map[string]any)
			ds, _ := e["details"].([]any)
			var ps []string
			for _, d := range ds {
				m, _ := d.(map[string]any)
				p, _ := m["path"].(string)
				ps = append(ps, p)
			}
			return ps
		}
		for _, c := range []struct {
			name string
			body map[string]any
			want string
		}{
			{"another input", refund("call_mm", "c_9", 41), "input"},
			{"another action", map[string]any{"thread_id": "t1", "tool_call_id": "call_mm", "action": "notes.read", "input": map[string]any{"amount": 40, "customer": "c_9"}}, "action"},
			{"another action and input", map[string]any{"thread_id": "t1", "tool_call_id": "call_mm", "action": "notes.read", "input": map[string]any{"id": "n1"}}, "action,input"},
		} {
			resp := h.must(409, req{method: "POST", path: "/v1/calls", token: "alice", body: c.body})
			if code := resp.errorCode(t); code != CodeCallMismatch {
				t.Fatalf("%s: code %q: %s", c.name, code, resp.body)
			}
			if got := strings.Join(paths(resp), ","); got != c.want {
				t.Errorf("%s: details name %q, want %q: %s", c.name, got, c.want, resp.body)
			}
		}
		same := h.must(200, req{method: "POST", path: "/v1/calls", token: "alice",
			body: `{"wait_seconds":0,"input":{"customer":"c_9","amount":4e1},"action":"payments.refund","tool_call_id":"call_mm","run_id":"r1","thread_id":"t1"}`}).json(t)
		want(t, "replayed proposal_id", same["proposal_id"], id)
		page := h.must(200, req{method: "GET", path: "/v1/threads/t1/proposals", token: "alice"}).json(t)
		if ps, _ := page["proposals"].([]any); len(ps) != 1 {
			t.Errorf("the thread holds %d proposals, want 1", len(ps))
		}
	})
}

// TestCallConditions checks a rule's when over HTTP: the proposal names
// the rule that applied, and a condition that cannot decide answers 200
// denied with POLICY_ERROR, storing nothing.
func TestCallConditions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "sqlite", harnessOptions{engine: func(o *countersign.Options) {
		o.Policy = &countersign.Policy{Rules: append([]countersign.Rule{
			{Match: "payments.refund", When: "input.amount > 1000", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Quorum: 2},
			{Match: "payments.refund", When: "int(input.amount) % (int(input.amount) - 13) == 0", Effect: countersign.EffectAllow},
		}, testPolicy.Rules...)}
	}})
	res := h.call("alice", refund("call_big", "c_big", 1500))
	p, _ := res["proposal"].(map[string]any)
	if p == nil {
		t.Fatalf("a refund of 1500: %v, want a proposal", res)
	}
	want(t, "quorum", p["quorum"], float64(2))
	if rule, _ := p["rule"].(map[string]any); rule["match"] != "payments.refund" || rule["when"] != "input.amount > 1000" {
		t.Errorf("proposal.rule = %v, want payments.refund when input.amount > 1000", p["rule"])
	}
	res = h.call("alice", refund("call_small", "c_small", 40))
	if p, _ := res["proposal"].(map[string]any); p == nil {
		t.Fatalf("a refund of 40: %v", res)
	} else if rule, _ := p["rule"].(map[string]any); rule["match"] != "payments.*" || rule["when"] != "" {
		t.Errorf("proposal.rule = %v, want payments.* with no when", p["rule"])
	}
	// 13 % 0: the condition errors, and the call is denied.
	res = h.call("alice", refund("call_13", "c_13", 13))
	want(t, "status", res["status"], "denied")
	want(t, "code", res["code"], "POLICY_ERROR")
	list := h.must(200, req{method: "GET", path: "/v1/threads/t1/proposals", token: "alice"})
	if strings.Contains(string(list.body), "call_13") {
		t.Errorf("the denied call left a record: %s", list.body)
	}
}
