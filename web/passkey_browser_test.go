package web_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/teststores"
)

// The passkey ceremonies in Chromium, each person's browser with its own
// virtual authenticator (the DevTools WebAuthn domain: CTAP2, internal
// transport, resident keys, user verification), on SQLite and PostgreSQL.

// TestPasskeyEnrollmentInChromium: bob has no passkey and the page says how
// to get one; carol, signed in, opens bob's enrollment link and is told it
// is someone else's; bob enrols through it; the link, once used, says so.
// Bob adds a passkey on a new device (his phone) with an assertion by his
// laptop's, then removes the laptop's with an assertion by the phone's.
// Carol's link, opened after its 15 minutes, says it expired.
func TestPasskeyEnrollmentInChromium(t *testing.T) {
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		h := newPasskeyHarness(t, open)
		bob, laptop := h.person("key_bob")
		carol, _ := h.person("key_carol")

		step(t, bob, "bob's passkeys", chromedp.Navigate(h.url+"/passkeys"))
		waitFor(t, bob, "no passkey yet", `!!document.querySelector("#no-passkeys") &&
			document.querySelector("#no-passkeys").textContent.includes("countersign passkeys enroll bob")`)
		axe(t, bob, "passkeys, none")

		link := h.enrollmentLink("bob")
		step(t, carol, "carol opens bob's link", chromedp.Navigate(link))
		waitFor(t, carol, "the refusal", `document.body.innerText.includes("made for someone else")`)
		axe(t, carol, "enrollment link refused")
		if eval[bool](t, carol, `!!document.querySelector("#enroll")`) {
			t.Error("carol was offered to enrol through bob's link")
		}

		step(t, bob, "bob opens his link", chromedp.Navigate(link))
		waitFor(t, bob, "the enrollment page", `!!document.querySelector("#enroll")`)
		axe(t, bob, "enrollment page")
		step(t, bob, "bob creates a passkey",
			chromedp.SendKeys(chromedp.CSS("#name"), "laptop"),
			chromedp.Click(chromedp.CSS("#enroll")),
		)
		waitFor(t, bob, "enrolled", `location.pathname === "/passkeys" && /enrolled/.test((document.querySelector(".result") || {}).textContent)`)
		if got := names(t, bob); got != "laptop" {
			t.Fatalf("bob's passkeys: %q, want laptop", got)
		}

		step(t, bob, "bob opens his link again", chromedp.Navigate(link))
		waitFor(t, bob, "the refusal", `document.body.innerText.includes("used already")`)

		// The phone's passkey: the laptop's authenticator answers the
		// assertion; while the server holds the creation's start, the
		// laptop goes and the phone comes, which makes the new passkey.
		h.clock.Advance(time.Minute) // the passkeys are listed oldest first
		arrived, release := h.gateNext("/passkeys/add/begin")
		step(t, bob, "bob adds a passkey",
			chromedp.Navigate(h.url+"/passkeys"),
			chromedp.WaitVisible(chromedp.CSS("#add-passkey")),
			chromedp.SendKeys(chromedp.CSS("#name"), "phone"),
			chromedp.Click(chromedp.CSS("#add-passkey")),
		)
		await(t, "the laptop's assertion", arrived)
		removeAuthenticator(t, bob, laptop)
		authenticator(t, bob)
		close(release)
		waitFor(t, bob, "added", `/added/.test((document.querySelector(".result") || {}).textContent)`)
		if got := names(t, bob); got != "laptop,phone" {
			t.Fatalf("bob's passkeys: %q, want laptop,phone", got)
		}
		axe(t, bob, "passkeys, two")

		// Only the phone's authenticator is left to answer the removal.
		step(t, bob, "bob removes the laptop's", chromedp.Click(chromedp.CSS(`button[aria-label="Remove passkey laptop"]`)))
		waitFor(t, bob, "removed", `/removed/.test((document.querySelector(".result") || {}).textContent)`)
		if got := names(t, bob); got != "phone" {
			t.Fatalf("bob's passkeys: %q, want phone", got)
		}

		link = h.enrollmentLink("carol")
		h.clock.Advance(countersign.EnrollmentTTL + time.Minute)
		step(t, carol, "carol opens her link too late", chromedp.Navigate(link))
		waitFor(t, carol, "the refusal", `document.body.innerText.includes("expired")`)
		if eval[bool](t, carol, `!!document.querySelector("#enroll")`) {
			t.Error("an expired link offered enrollment")
		}
	})
}

// TestStepUpInChromium: approvals of step-up proposals. Over HTTP, via
// Slack, or with remember, an approval is refused and decides nothing; dave,
// without a passkey, is told how to get one and may still reject. Bob
// approves a refund in the inbox, his passkey asked for it. An assertion
// bob's browser made for a wire (kept from the server) is refused for
// another proposal and when carol posts it, then counts once for bob, and
// its replay is refused. A wire of quorum two is approved by bob and carol,
// each with their own authenticator and assertion.
func TestStepUpInChromium(t *testing.T) {
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		h := newPasskeyHarness(t, open)
		bob, _ := h.person("key_bob")
		carol, _ := h.person("key_carol")
		h.enroll(bob, "bob", "laptop")
		h.enroll(carol, "carol", "laptop")
		refund := h.call("payments.refund", 500)

		// Over HTTP: 403 STEP_UP_REQUIRED with the proposal's page.
		var refused struct {
			Error struct {
				Code    string            `json:"code"`
				Message string            `json:"message"`
				Details map[string]string `json:"details"`
			} `json:"error"`
		}
		code := h.api(http.MethodPost, "/v1/proposals/"+refund+"/approve", "key_bob", `{"reason":"ok"}`, &refused)
		page := h.url + "/proposals/" + refund
		if code != http.StatusForbidden || refused.Error.Code != "STEP_UP_REQUIRED" || refused.Error.Details["url"] != page {
			t.Fatalf("an approval over HTTP without an assertion: %d %+v, want 403 STEP_UP_REQUIRED with url %s", code, refused.Error, page)
		}
		// Via Slack, which carries no assertion: the same refusal.
		_, err := h.engine.Decide(t.Context(), &countersign.Decision{
			Identity:   countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}},
			ProposalID: refund, Verdict: countersign.Approve, Via: countersign.ViaSlack,
		})
		if se, ok := errors.AsType[*countersign.StepUpRequiredError](err); !ok || se.URL != page {
			t.Fatalf("an approval via slack: %v, want a step-up refusal with %s", err, page)
		}
		// remember: refused, with or without a passkey.
		var invalid struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		code = h.api(http.MethodPost, "/v1/proposals/"+refund+"/approve", "key_bob", `{"remember":"thread"}`, &invalid)
		if code != http.StatusBadRequest || invalid.Error.Code != "INVALID_REMEMBER" {
			t.Fatalf("an approval with remember: %d %+v, want 400 INVALID_REMEMBER", code, invalid.Error)
		}
		bobClient := h.client("key_bob")
		resp, body := bobClient.post("/proposals/"+refund+"/decide", url.Values{"csrf": {bobClient.csrf("/proposals/" + refund)},
			"verdict": {"approved"}, "remember": {"thread"}}, nil)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "none is remembered") {
			t.Fatalf("an inbox approval with remember: %d\n%s", resp.StatusCode, body)
		}
		// Without the script, the inbox's approval carries no assertion.
		resp, body = bobClient.post("/proposals/"+refund+"/decide", url.Values{"csrf": {bobClient.csrf("/proposals/" + refund)},
			"verdict": {"approved"}}, nil)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "needs your passkey") {
			t.Fatalf("an inbox approval without an assertion: %d\n%s", resp.StatusCode, body)
		}
		if p := h.proposal(refund); p.Status != "pending" || len(p.Decisions) != 0 {
			t.Fatalf("after the refusals the refund is %s with %d decisions, want pending with none", p.Status, len(p.Decisions))
		}

		// dave has no passkey: no Approve, a way to get one, and Reject.
		dave := h.client("key_dave")
		_, body = dave.get("/proposals/" + refund)
		if strings.Contains(body, `id="approve"`) || !strings.Contains(body, "countersign passkeys enroll dave") || !strings.Contains(body, `id="reject"`) {
			t.Errorf("dave's page of the refund offers an approval, or no way to a passkey, or no rejection:\n%s", body)
		}

		// bob approves in the inbox: the page asks for his passkey; it
		// offers no remember.
		step(t, bob, "bob opens the refund", chromedp.Navigate(page))
		waitFor(t, bob, "the step-up note", `!!document.querySelector("#step-up-note") && !!document.querySelector("#approve")`)
		if eval[bool](t, bob, `!!document.querySelector("input[name=remember]")`) {
			t.Error("a step-up proposal's page offers remember")
		}
		if !strings.Contains(eval[string](t, bob, `document.querySelector("#step-up-note").textContent`), "passkey") {
			t.Error("the step-up note does not name the passkey")
		}
		axe(t, bob, "proposal with step-up")
		if strings.HasSuffix(t.Name(), "/sqlite") {
			screenshot(t, bob, "step-up.png")
		}
		step(t, bob, "bob approves", chromedp.SendKeys(chromedp.CSS("#reason"), "checked the invoice"), chromedp.Click(chromedp.CSS("#approve")))
		waitFor(t, bob, "the approval recorded", `/recorded/.test((document.querySelector(".result") || {}).textContent)`)
		p := h.proposal(refund)
		if p.Status == "pending" || len(p.Decisions) != 1 || p.Decisions[0].Actor != "bob" || p.Decisions[0].StepUp != "passkey" || p.Decisions[0].Via != "web" {
			t.Fatalf("the refund after bob's approval: %+v", p)
		}

		// An assertion kept from the server: for a wire, by bob.
		wire, other := h.call("payments.wire", 900000), h.call("payments.refund", 70)
		caught := h.captureNext("/proposals/" + wire + "/decide")
		step(t, bob, "bob opens the wire", chromedp.Navigate(h.url+"/proposals/"+wire))
		step(t, bob, "bob approves the wire", chromedp.WaitVisible(chromedp.CSS("#approve")), chromedp.Click(chromedp.CSS("#approve")))
		kept := await(t, "bob's posted approval", caught)
		if kept.Form.Get("assertion") == "" || kept.Form.Get("verdict") != "approved" {
			t.Fatalf("bob's posted approval: %v", kept.Form)
		}
		replay := func(who *client, path string, form url.Values) (*http.Response, string) {
			t.Helper()
			hd := http.Header{}
			if who == nil { // as bob's browser: his cookie
				hd.Set("Cookie", kept.Header.Get("Cookie"))
				who = &client{t: t, base: h.url, http: &http.Client{CheckRedirect: bobClient.http.CheckRedirect}}
			}
			return who.post(path, form, hd)
		}
		// For another proposal: refused.
		resp, body = replay(nil, "/proposals/"+other+"/decide", kept.Form)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "needs your passkey") {
			t.Fatalf("bob's wire assertion for another proposal: %d\n%s", resp.StatusCode, body)
		}
		// By another approver: refused.
		carolClient := h.client("key_carol")
		asCarol := url.Values{}
		for k, v := range kept.Form {
			asCarol[k] = v
		}
		asCarol.Set("csrf", carolClient.csrf("/proposals/"+wire))
		resp, body = replay(carolClient, "/proposals/"+wire+"/decide", asCarol)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "needs your passkey") {
			t.Fatalf("bob's assertion posted by carol: %d\n%s", resp.StatusCode, body)
		}
		if p := h.proposal(other); p.Status != "pending" || len(p.Decisions) != 0 {
			t.Fatalf("the other refund: %+v, want pending, undecided", p)
		}
		if p := h.proposal(wire); p.Status != "pending" || len(p.Decisions) != 0 {
			t.Fatalf("the wire after the misuses: %+v, want pending, undecided", p)
		}
		// As bob, for the wire: it counts (the misuses burnt nothing).
		resp, body = replay(nil, "/proposals/"+wire+"/decide", kept.Form)
		if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "result=applied") {
			t.Fatalf("bob's assertion for the wire: %d %s\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
		}
		// Again: a replay, refused (without step-up, the engine would
		// answer that bob's approval stands, unchanged).
		resp, body = replay(nil, "/proposals/"+wire+"/decide", kept.Form)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "used, expired") {
			t.Fatalf("a replayed assertion: %d\n%s", resp.StatusCode, body)
		}
		if p := h.proposal(wire); p.Status != "pending" || len(p.Decisions) != 1 {
			t.Fatalf("the wire after bob's approval and its replay: %+v, want pending with one approval", p)
		}

		// A wire of quorum two, in both browsers.
		wire2 := h.call("payments.wire", 800000)
		step(t, bob, "bob opens the second wire", chromedp.Navigate(h.url+"/proposals/"+wire2))
		step(t, bob, "bob approves it", chromedp.WaitVisible(chromedp.CSS("#approve")), chromedp.Click(chromedp.CSS("#approve")))
		waitFor(t, bob, "bob's approval recorded", `/recorded/.test((document.querySelector(".result") || {}).textContent)`)
		if p := h.proposal(wire2); p.Status != "pending" || len(p.Decisions) != 1 {
			t.Fatalf("the second wire after bob: %+v, want pending with one approval", p)
		}
		step(t, carol, "carol opens the second wire", chromedp.Navigate(h.url+"/proposals/"+wire2))
		step(t, carol, "carol approves it", chromedp.WaitVisible(chromedp.CSS("#approve")), chromedp.Click(chromedp.CSS("#approve")))
		waitFor(t, carol, "carol's approval recorded", `/recorded/.test((document.querySelector(".result") || {}).textContent)`)
		p = h.proposal(wire2)
		if p.Status == "pending" || len(p.Decisions) != 2 {
			t.Fatalf("the second wire after bob and carol: %+v, want approved by both", p)
		}
		for _, d := range p.Decisions {
			if d.StepUp != "passkey" || d.Decision != "approved" || d.Via != "web" {
				t.Errorf("a decision of the second wire: %+v, want approved via web with a passkey", d)
			}
		}

		// Rejections need no passkey.
		resp, body = dave.post("/proposals/"+other+"/decide", url.Values{"csrf": {dave.csrf("/proposals/" + other)}, "verdict": {"rejected"}}, nil)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("dave's rejection: %d\n%s", resp.StatusCode, body)
		}
		if p := h.proposal(other); p.Status != "rejected" {
			t.Fatalf("the other refund after dave's rejection: %s", p.Status)
		}
	})
}
