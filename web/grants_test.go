package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// toolCall makes alice's agent's call of payments.refund under a tool call
// id of its own, so that the same input can be asked for again, and returns
// the answer's status.
func (h *harness) toolCall(tool, thread, customer string, amount float64) string {
	h.t.Helper()
	body := fmt.Sprintf(`{"thread_id":%q,"tool_call_id":%q,"action":"payments.refund","input":{"amount":%g,"customer":%q},"wait_seconds":0}`,
		thread, tool, amount, customer)
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/calls", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer key_alice")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		h.t.Fatalf("call %s: status %d: %v", tool, resp.StatusCode, err)
	}
	return out.Status
}

// settle waits, through the engine, until the proposal is terminal.
func (h *harness) settle(pid string) *cstype.Proposal {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := h.engine.Wait(ctx, countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}, pid)
	if err != nil {
		h.t.Fatalf("wait for %s: %v", pid, err)
	}
	return p
}

var grantItem = regexp.MustCompile(`<li class="grant" data-id="(grt_[^"]+)" data-state="([a-z]+)">`)

// grantsOn returns the grants a page lists, id to state.
func grantsOn(body string) map[string]string {
	out := map[string]string{}
	for _, m := range grantItem.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestGrants: bob approves alice's refund with "remember for the thread";
// the grant shows on the grants page of those who may manage it (bob who
// granted it, alice whose calls it approves, olga the operator) with its
// action, scope, input digest and origin proposal, inactive until the
// approved refund succeeds and live after; carol (finance, who did not
// grant it) and eve (another tenant) neither see nor revoke it; the same
// call again is approved by the grant; bob revokes it through the page's
// form, it shows as revoked with no button, and the same call asks again.
func TestGrants(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pid := h.propose("t_grant", "c_gate", 30)
	bob := h.client()
	bob.signIn("key_bob")
	tok := bob.csrf("/proposals/" + pid)
	resp, _ := bob.post("/proposals/"+pid+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}, "remember": {"thread"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(resp.Header.Get("Location"), "?result=applied") {
		t.Fatalf("approve with remember: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The refund is held at the gate: the grant is made, not yet live.
	resp, body := bob.get("/grants")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/grants: %d\n%s", resp.StatusCode, body)
	}
	gs := grantsOn(body)
	if len(gs) != 1 {
		t.Fatalf("bob's grants %v, want one:\n%s", gs, body)
	}
	var gid string
	for id, state := range gs {
		gid = id
		if state != "inactive" {
			t.Errorf("before the refund ran: state %q, want inactive", state)
		}
	}
	h.Release()
	if p := h.settle(pid); p.Status != cstype.StatusSucceeded {
		t.Fatalf("the refund ended %s", p.Status)
	}
	_, body = bob.get("/grants")
	if st := grantsOn(body)[gid]; st != "live" {
		t.Fatalf("after the refund succeeded: state %q, want live:\n%s", st, body)
	}
	p := h.settle(pid)
	for _, want := range []string{"payments.refund", "for the thread", "requested by alice", "t_grant", p.InputDigest,
		`href="/proposals/` + pid + `"`, "granted by bob", `action="/grants/` + gid + `/revoke"`, `href="/grants"`} {
		if !strings.Contains(body, want) {
			t.Errorf("bob's grants page lacks %q:\n%s", want, body)
		}
	}

	// Those who may manage it see it; others do not.
	for key, sees := range map[string]bool{"key_alice": true, "key_olga": true, "key_carol": false, "key_eve": false} {
		c := h.client()
		c.signIn(key)
		_, body := c.get("/grants")
		if _, ok := grantsOn(body)[gid]; ok != sees || strings.Contains(body, gid) != sees {
			t.Errorf("%s sees the grant: %v, want %v:\n%s", key, ok, sees, body)
		}
		if !sees && !strings.Contains(body, "No remembered approvals") {
			t.Errorf("%s's empty grants page:\n%s", key, body)
		}
	}

	// carol and eve may not revoke it, even with a form of their own.
	carol := h.client()
	carol.signIn("key_carol")
	if resp, body := carol.post("/grants/"+gid+"/revoke", url.Values{"csrf": {carol.csrf("/grants")}}, nil); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(body, "may not revoke") {
		t.Errorf("carol revokes: %d\n%s", resp.StatusCode, body)
	}
	eve := h.client()
	eve.signIn("key_eve")
	if resp, body := eve.post("/grants/"+gid+"/revoke", url.Values{"csrf": {eve.csrf("/grants")}}, nil); resp.StatusCode != http.StatusNotFound ||
		strings.Contains(body, "t_grant") {
		t.Errorf("eve of another tenant revokes: %d\n%s", resp.StatusCode, body)
	}

	// The grant approves the same call again, in its thread.
	if st := h.toolCall("call_again", "t_grant", "c_gate", 30); st != "succeeded" {
		t.Fatalf("the same call under a live grant: %s, want succeeded", st)
	}

	// bob revokes it through the page's form.
	tok = bob.csrf("/grants")
	resp, _ = bob.post("/grants/"+gid+"/revoke", url.Values{"csrf": {tok}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/grants?result=revoked" {
		t.Fatalf("revoke: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, body = bob.get(resp.Header.Get("Location"))
	if st := grantsOn(body)[gid]; st != "revoked" || !strings.Contains(body, "The grant is revoked") ||
		!strings.Contains(body, "Revoked by bob") || strings.Contains(body, `action="/grants/`+gid+`/revoke"`) {
		t.Errorf("after revoking: state %q:\n%s", st, body)
	}
	if st := h.toolCall("call_after", "t_grant", "c_gate", 30); st != "pending" {
		t.Errorf("the same call after the revocation: %s, want pending", st)
	}
	// Revoking again is no error; the grant stays revoked.
	if resp, _ := bob.post("/grants/"+gid+"/revoke", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("revoke again: %d", resp.StatusCode)
	}
}

// TestGrantAnyInput: a grant the rule widens to any input says so instead
// of naming a digest, and the filter by thread keeps to its thread.
func TestGrantAnyInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pid := h.call("credits.grant", "t_credit", "c_1", 5)
	bob := h.client()
	bob.signIn("key_bob")
	tok := bob.csrf("/proposals/" + pid)
	if resp, _ := bob.post("/proposals/"+pid+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}, "remember": {"thread"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	h.settle(pid)
	_, body := bob.get("/grants?thread=t_credit")
	if gs := grantsOn(body); len(gs) != 1 || !strings.Contains(body, "any input") || strings.Contains(body, "sha256:") {
		t.Errorf("a grant for any input: %v\n%s", gs, body)
	}
	if _, body := bob.get("/grants?thread=t_other"); len(grantsOn(body)) != 0 || !strings.Contains(body, "No remembered approvals in this thread") {
		t.Errorf("another thread's grants:\n%s", body)
	}
}

// TestGrantRevokeCSRF: a revocation without the session's token, with a
// wrong one, or from another site is refused and changes nothing.
func TestGrantRevokeCSRF(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pid := h.propose("t_gcsrf", "c_1", 10)
	bob := h.client()
	bob.signIn("key_bob")
	tok := bob.csrf("/proposals/" + pid)
	if resp, _ := bob.post("/proposals/"+pid+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}, "remember": {"thread"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	h.settle(pid)
	_, body := bob.get("/grants")
	var gid string
	for id := range grantsOn(body) {
		gid = id
	}
	if gid == "" {
		t.Fatalf("no grant listed:\n%s", body)
	}
	path := "/grants/" + gid + "/revoke"
	for name, tc := range map[string]struct {
		form url.Values
		hdr  http.Header
	}{
		"no token":     {url.Values{}, nil},
		"wrong token":  {url.Values{"csrf": {tok + "x"}}, nil},
		"other origin": {url.Values{"csrf": {tok}}, http.Header{"Origin": {"https://evil.example"}}},
		"cross-site":   {url.Values{"csrf": {tok}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}},
	} {
		if resp, _ := bob.post(path, tc.form, tc.hdr); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	// Signed out, a revocation is refused too.
	if resp, _ := h.client().post(path, url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("signed out: %d, want 403", resp.StatusCode)
	}
	if _, body := bob.get("/grants"); grantsOn(body)[gid] != "live" {
		t.Fatalf("a refused revocation changed the grant:\n%s", body)
	}
	resp, _ := bob.post(path, url.Values{"csrf": {tok}}, http.Header{"Origin": {h.url}, "Sec-Fetch-Site": {"same-origin"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke with the token: %d", resp.StatusCode)
	}
	if _, body := bob.get("/grants"); grantsOn(body)[gid] != "revoked" {
		t.Errorf("not revoked:\n%s", body)
	}
}

// TestGrantHostileIDs: ids no grant has, however odd, are 404 pages, never
// 500s, and a hostile thread filter is shown escaped. (A bare ".." never
// reaches the inbox: the mux redirects to the cleaned path.)
func TestGrantHostileIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	bob := h.client()
	bob.signIn("key_bob")
	tok := bob.csrf("/grants")
	for _, id := range []string{
		"grt_nope", "nope", strings.Repeat("g", 300), strings.Repeat("ü", 5000), "grt_<script>alert(1)</script>",
		"' OR 1=1 --", "grt_\x00", "%", "...", "grt_..", "a/b", "grt_\u202e", "\xff\xfe",
	} {
		resp, body := bob.post("/grants/"+url.PathEscape(id)+"/revoke", url.Values{"csrf": {tok}}, nil)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "There is no such grant.") || strings.Contains(body, "<script>alert") {
			t.Errorf("revoke %q: %d\n%s", id, resp.StatusCode, body)
		}
	}
	for _, thread := range []string{"<script>alert(1)</script>", strings.Repeat("t", 5000), "\x00", "\xff"} {
		resp, body := bob.get("/grants?thread=" + url.QueryEscape(thread))
		if resp.StatusCode >= 500 || strings.Contains(body, "<script>alert") {
			t.Errorf("thread filter %q: %d\n%s", thread, resp.StatusCode, body)
		}
	}
	// Signed out, the page sends the browser to sign in and back.
	if resp, _ := h.client().get("/grants"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fgrants" {
		t.Errorf("signed out: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}
