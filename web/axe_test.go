package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// axeScript is axe-core as `make web-deps` installs it (npm ci in
// web/testdata/axe, from its lockfile).
const axeScript = "testdata/axe/node_modules/axe-core/axe.min.js"

// axeSource reads axe-core. In CI a missing install fails the test.
func axeSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(axeScript)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core is not installed (%v): run `make web-deps` (npm ci in web/testdata/axe); CI needs it", err)
		}
		t.Skipf("skipping the accessibility test: axe-core is not installed (%v); run `make web-deps`", err)
	}
	return string(b)
}

// axeViolation is one rule a page breaks, as axe reports it.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// axeReport is what one axe run found.
type axeReport struct {
	Passes     int            `json:"passes"`
	Violations []axeViolation `json:"violations"`
}

// checkAxe runs axe-core in the page and fails the test on any serious or
// critical violation. Injected through the DevTools protocol, axe is not
// bound by the page's Content-Security-Policy, which allows no other script.
func checkAxe(t *testing.T, ctx context.Context, page, src string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](src+"\n;typeof axe === 'object'")); err != nil {
		t.Fatalf("%s: inject axe-core: %v", page, err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify({
		passes: r.passes.length,
		violations: r.violations.map(v => ({id: v.id, impact: v.impact || "", help: v.help,
			nodes: v.nodes.map(n => n.target.join(" "))}))}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: run axe: %v", page, err)
	}
	var rep axeReport
	if err := json.Unmarshal([]byte(raw), &rep); err != nil {
		t.Fatalf("%s: axe's report %q: %v", page, raw, err)
	}
	if rep.Passes == 0 {
		t.Fatalf("%s: axe checked nothing: %s", page, raw)
	}
	for _, v := range rep.Violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			t.Errorf("%s: %s violation %s (%s) at %s", page, v.Impact, v.ID, v.Help, strings.Join(v.Nodes, ", "))
		}
	}
}

// TestAccessibilityInChromium runs axe-core on every page of the inbox, in
// light and dark colours: the sign-in page, the list, a proposal pending,
// approved and waiting for its agent, settled, lapsed and unknown (with the
// operator's form), with its conversation and input for reading (and again
// with the exact JSON and the technical details unfolded), approved by the
// reader and waiting for others, the requester's list and her page of a
// proposal she does not decide, the grants page (none; live and not yet live; one
// revoked through its button), and the error pages. None has a serious or critical
// violation, and each links the favicon, which loads as an image.
func TestAccessibilityInChromium(t *testing.T) {
	clock := &testClock{now: time.Now().UTC().Truncate(time.Minute)}
	h := newHarnessWith(t, clock)
	src := axeSource(t)

	// The proposals, brought to each state through the API and the inbox.
	pending := h.agentCall("payments.refund", "t_ax1", "c_pending", 40, `,"mode":"wait"`).ProposalID
	approved := h.agentCall("payments.refund", "t_ax2", "c_approved", 41, `,"mode":"two_phase"`).ProposalID
	settled := h.agentCall("payments.refund", "t_ax3", "c_settled", 42, `,"mode":"wait"`).ProposalID
	lapsed := h.agentCall("payments.refund", "t_ax4", "c_lapsed", 43, `,"mode":"wait"`).ProposalID
	carol := h.client()
	carol.signIn("key_carol")
	for _, id := range []string{approved, settled, lapsed} {
		tok := carol.csrf("/proposals/" + id)
		form := url.Values{"csrf": {tok}, "verdict": {"approved"}}
		if id == settled {
			form.Set("remember", "thread") // a grant, live once the refund succeeds
		}
		if resp, _ := carol.post("/proposals/"+id+"/decide", form, nil); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("approve %s: %d", id, resp.StatusCode)
		}
	}
	if a := h.agentCall("payments.refund", "t_ax3", "c_settled", 42, `,"mode":"wait"`); a.Status != "succeeded" {
		t.Fatalf("settle: %+v", a)
	}
	clock.Advance(11 * time.Minute)
	// The approvals nobody consumed lapse, and the undecided one expires.
	if _, err := h.sweep(); err != nil {
		t.Fatal(err)
	}
	fresh := h.agentCall("payments.refund", "t_ax5", "c_fresh", 44, `,"mode":"wait"`).ProposalID
	waiting := h.agentCall("payments.refund", "t_ax6", "c_waiting", 45, `,"mode":"two_phase"`).ProposalID
	tok := carol.csrf("/proposals/" + waiting)
	// A grant that is not live yet: its approved call has not run.
	if resp, _ := carol.post("/proposals/"+waiting+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}, "remember": {"thread"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve %s: %d", waiting, resp.StatusCode)
	}
	unknown := h.call("flaky.write", "t_ax7", "c_flaky", 1)
	tok = carol.csrf("/proposals/" + unknown)
	if resp, _ := carol.post("/proposals/"+unknown+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve %s: %d", unknown, resp.StatusCode)
	}

	// An email from a conversation with the mail agent; a refund that
	// needs two approvals, which bob approved.
	mail := mailProposal(t, h)
	big := h.agentCall("payments.refund", "t_ax8", "c_big", 250000, "").ProposalID
	bobHTTP := h.client()
	bobHTTP.signIn("key_bob")
	tok = bobHTTP.csrf("/proposals/" + big)
	if resp, _ := bobHTTP.post("/proposals/"+big+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}, "reason": {"ok"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve %s: %d", big, resp.StatusCode)
	}

	b := browser(t)
	type page struct {
		name, path, ready string
	}
	signedOut := []page{
		{"sign-in", "/login", `!!document.querySelector("#token")`},
	}
	bob := []page{
		{"list", "/", `!!document.querySelector("#list li")`},
		{"list of every status", "/?status=all", `!!document.querySelector("#list li")`},
		{"list waiting for you and for others", "/", `!!document.querySelector("#yours li") && !!document.querySelector("#others li")`},
		{"proposal pending", "/proposals/" + fresh, `!!document.querySelector("#approve") && !!document.querySelector("input[name=remember]")`},
		{"proposal with its conversation and input", "/proposals/" + mail, `!!document.querySelector("#conversation li.msg-the-call") && !!document.querySelector("#input .multiline")`},
		{"proposal with everything unfolded", "/proposals/" + mail, `!!document.querySelector("#trail") &&
			[...document.querySelectorAll("details")].every(d => (d.open = true))`},
		{"proposal you approved, waiting for others", "/proposals/" + big, `!!document.querySelector("#your-decision") && !!document.querySelector("#needed")`},
		{"proposal approved, waiting for its agent", "/proposals/" + waiting, `document.querySelector("#status").textContent === "approved"`},
		{"proposal lapsed, two_phase", "/proposals/" + approved, `document.querySelector("#status").textContent === "expired"`},
		{"proposal settled", "/proposals/" + settled, `document.querySelector("#status").textContent === "succeeded"`},
		{"proposal lapsed", "/proposals/" + lapsed, `document.querySelector("#status").textContent === "expired"`},
		{"proposal expired undecided", "/proposals/" + pending, `document.querySelector("#status").textContent === "expired"`},
		{"error: not found", "/nothing/here", `/no such page/.test(document.body.innerText)`},
		{"error: bad filter", "/?status=nonsense", `/Unknown status/.test(document.body.innerText)`},
		{"grants, none", "/grants", `!!document.querySelector("#grants .empty")`},
	}
	olga := []page{
		{"proposal unknown, for an operator", "/proposals/" + unknown, `!!document.querySelector("form[action$='/resolve']")`},
		{"grants, live and not yet live", "/grants", `!!document.querySelector("li.grant[data-state=live] form button") && !!document.querySelector("li.grant[data-state=inactive]")`},
	}
	alice := []page{
		{"list of the requester", "/", `!!document.querySelector("#others li")`},
		{"proposal the requester does not decide", "/proposals/" + big, `!!document.querySelector("#instead")`},
	}
	eve := []page{
		{"error: another tenant's proposal", "/proposals/" + fresh, `/You may not see this proposal/.test(document.body.innerText)`},
	}
	visit := func(pages []page) {
		for _, p := range pages {
			step(t, b, "open "+p.name, chromedp.Navigate(h.url+p.path))
			waitFor(t, b, p.name, p.ready)
			if got := eval[string](t, b, `(document.querySelector("link[rel=icon]") || {}).getAttribute?.("href") || ""`); got != "/favicon.ico" {
				t.Errorf("%s: the icon link is %q, want /favicon.ico", p.name, got)
			}
			for _, scheme := range []string{"light", "dark"} {
				if _, err := chromedp.Call(b, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
					Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
				}); err != nil {
					t.Fatalf("emulate %s colours: %v", scheme, err)
				}
				checkAxe(t, b, p.name+" ("+scheme+")", src)
			}
		}
	}
	visit(signedOut)
	if ok, err := chromedp.Run(b, chromedp.Evaluate[bool](`new Promise(ok => { const i = new Image(); i.onload = () => ok(i.naturalWidth > 0); i.onerror = () => ok(false); i.src = "/favicon.ico"; })`, chromedp.EvalAwaitPromise)); err != nil || !ok {
		t.Errorf("/favicon.ico does not load as an image: %v", err)
	}
	signInBrowser(t, b, h.url, "key_bob")
	visit(bob)
	signOut := func() {
		step(t, b, "sign out", chromedp.Navigate(h.url+"/"), chromedp.Click(chromedp.CSS("form[action='/logout'] button")))
		waitFor(t, b, "the sign-in form", `location.pathname === "/login"`)
	}
	signOut()
	signInBrowser(t, b, h.url, "key_olga")
	visit(olga)
	// olga revokes the live grant with its button; the page says so and
	// shows it revoked.
	step(t, b, "revoke the live grant", chromedp.Click(chromedp.CSS("li.grant[data-state=live] form button")))
	waitFor(t, b, "the revocation", `location.search === "?result=revoked" && !!document.querySelector("li.grant[data-state=revoked]") && !document.querySelector("li.grant[data-state=live]")`)
	visit([]page{{"grants, one revoked", "/grants?result=revoked", `!!document.querySelector("li.grant[data-state=revoked]") && !!document.querySelector(".result")`}})
	signOut()
	signInBrowser(t, b, h.url, "key_alice")
	visit(alice)
	signOut()
	signInBrowser(t, b, h.url, "key_eve")
	visit(eve)
}
