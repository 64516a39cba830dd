package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/passkeytest"
)

const stepUpPublicURL = "https://countersign.acme.example"

var stepUpPolicy = countersign.Policy{Rules: []countersign.Rule{
	{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, StepUp: countersign.StepUpPasskey},
}}

// TestStepUpHTTP: a step-up proposal over HTTP: refused without an
// assertion (403 STEP_UP_REQUIRED with the inbox page), with remember,
// with a replayed or malformed assertion; approved with a fresh one, the
// decision recording step_up.
func TestStepUpHTTP(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{engine: func(o *countersign.Options) {
		o.Policy, o.PublicURL = &stepUpPolicy, stepUpPublicURL
	}}, func(t *testing.T, h *harness) {
		// carol (operator) makes bob a link; bob (not an operator) may not.
		if code := h.must(403, req{method: "POST", path: "/v1/passkeys/enrollments", token: "bob", body: map[string]any{"actor": "bob"}}).errorCode(t); code != CodeForbidden {
			t.Errorf("bob makes a link: %s, want FORBIDDEN", code)
		}
		h.must(400, req{method: "POST", path: "/v1/passkeys/enrollments", token: "carol", body: map[string]any{}, invalid: true})
		link := h.must(201, req{method: "POST", path: "/v1/passkeys/enrollments", token: "carol", body: map[string]any{"actor": "bob"}}).json(t)
		url, _ := link["url"].(string)
		token, ok := strings.CutPrefix(url, stepUpPublicURL+"/passkeys/enroll/")
		if !ok {
			t.Fatalf("link %q: want one under the public URL", url)
		}
		bob := identities["bob"]
		key := passkeytest.New(stepUpPublicURL)
		c, err := h.engine.BeginPasskeyEnrollment(t.Context(), bob, token)
		if err != nil {
			t.Fatal(err)
		}
		att, _ := key.Create(c.Options)
		if _, err := h.engine.FinishPasskeyRegistration(t.Context(), bob, "laptop", att); err != nil {
			t.Fatal(err)
		}

		res := h.call("alice", map[string]any{"thread_id": "t1", "tool_call_id": "su1", "action": "payments.refund",
			"input": map[string]any{"amount": 20000, "customer": "c1"}, "mode": "independent"})
		id, _ := res["proposal_id"].(string)
		if id == "" {
			t.Fatalf("call answer %v: want a pending proposal", res)
		}
		approve := "/v1/proposals/" + id + "/approve"

		// A text decision cannot carry a passkey: the same refusal.
		if code := h.must(403, req{method: "POST", path: "/v1/threads/t1/messages", token: "bob", body: say("yes")}).errorCode(t); code != CodeStepUpRequired {
			t.Errorf("bob says yes: %s, want STEP_UP_REQUIRED", code)
		}

		resp := h.must(403, req{method: "POST", path: approve, token: "bob"})
		body := resp.json(t)
		e, _ := body["error"].(map[string]any)
		details, _ := e["details"].(map[string]any)
		if e["code"] != CodeStepUpRequired || details["url"] != stepUpPublicURL+"/proposals/"+id {
			t.Fatalf("approve without an assertion: %s, want STEP_UP_REQUIRED with details.url the inbox page", resp.body)
		}
		if code := h.must(400, req{method: "POST", path: approve, token: "bob", body: map[string]any{"remember": "thread"}}).errorCode(t); code != CodeInvalidRemember {
			t.Errorf("approve with remember: %s, want INVALID_REMEMBER", code)
		}
		// Hostile assertions decide nothing and never 500.
		for _, bad := range []struct {
			body   string
			status int
		}{
			{`{"assertion": "x"}`, 400},
			{`{"assertion": [1,2]}`, 400},
			{`{"assertion": 7}`, 400},
			{`{"assertion": {}}`, 403},
			{`{"assertion": {"id": "AA", "type": "public-key", "response": {"clientDataJSON": "!!"}}}`, 403},
			{`{"assertion": {"response": {"clientDataJSON": "eyJjaGFsbGVuZ2UiOiJ4In0", "authenticatorData": "", "signature": ""}}}`, 403},
			{`{"assertion": null}`, 403},
		} {
			// Off the document (not an object) on purpose, where it is.
			r := h.do(req{method: "POST", path: approve, token: "bob", body: bad.body, invalid: bad.status == 400 || strings.Contains(bad.body, "null")})
			if r.status != bad.status {
				t.Errorf("approve %s: %d %s, want %d", bad.body, r.status, r.body, bad.status)
			}
		}
		// Only an approver gets a challenge.
		h.must(403, req{method: "POST", path: "/v1/proposals/" + id + "/step-up", token: "dave"})
		h.must(403, req{method: "POST", path: "/v1/proposals/" + id + "/step-up", token: "x_eve"})
		ch := h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/step-up", token: "bob"}).json(t)
		opts, err := json.Marshal(ch["publicKey"])
		if err != nil {
			t.Fatal(err)
		}
		assertion, err := key.Get(opts)
		if err != nil {
			t.Fatal(err)
		}
		ok200 := h.must(200, req{method: "POST", path: approve, token: "bob", body: map[string]any{"assertion": json.RawMessage(assertion)}}).json(t)
		p, _ := ok200["proposal"].(map[string]any)
		ds, _ := p["decisions"].([]any)
		if len(ds) != 1 || ds[0].(map[string]any)["step_up"] != "passkey" || p["status"] != "approved" {
			t.Fatalf("approve with the assertion: %v, want approved with step_up passkey", ok200)
		}
		// The same assertion again: spent (the proposal is approved, so
		// nothing would change anyway; a second proposal shows the spend).
		res = h.call("alice", map[string]any{"thread_id": "t1", "tool_call_id": "su2", "action": "payments.refund",
			"input": map[string]any{"amount": 30000, "customer": "c2"}, "mode": "independent"})
		second, _ := res["proposal_id"].(string)
		if code := h.must(403, req{method: "POST", path: "/v1/proposals/" + second + "/approve", token: "bob",
			body: map[string]any{"assertion": json.RawMessage(assertion)}}).errorCode(t); code != CodeStepUpRequired {
			t.Errorf("a spent assertion for another proposal: %s, want STEP_UP_REQUIRED", code)
		}
		// A rejection needs none.
		h.must(200, req{method: "POST", path: "/v1/proposals/" + second + "/reject", token: "bob"})
	})
}
