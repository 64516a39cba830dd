package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// What an approver needs to decide, on the proposal page and in the list:
// the conversation up to the call, the input for reading, their own part
// (waiting for them or for others, their vote, what is still needed), the
// counts of what waits for them, and the internals folded away.

// inputShown is the input's top-level fields as the page lists them, each
// "name=value" with the value's text.
func inputShown(t *testing.T, ctx context.Context) string {
	t.Helper()
	return eval[string](t, ctx, `[...document.querySelectorAll("#input > dl.fields > dt")].map(dt =>
		dt.textContent + "=" + dt.nextElementSibling.innerText.trim()).join(" ")`)
}

// mailBody is the body alice asks her agent to send: three lines, markup
// that must stay text, and a right-to-left override that must show.
const mailBody = "Dear customer,\nyour refund of 40 EUR is on its way: <b>no action</b> needed.\nRegards \u202Eevil"

// mailBodyShown is mailBody as the page shows it.
const mailBodyShown = "Dear customer,\nyour refund of 40 EUR is on its way: <b>no action</b> needed.\nRegards \\u{202E}evil"

// mailProposal has alice talk to her mail agent in thread t_mail: a
// message stored before, the request that makes the agent call email.send
// with mailBody, and a message after the call. It returns the proposal.
func mailProposal(t *testing.T, h *harness) string {
	t.Helper()
	h.say("t_mail", "Customer c_42 called: where is the refund?", false)
	ids := h.say("t_mail", "tell c_42 about Your refund:\n"+mailBody, true)
	if len(ids) != 1 {
		t.Fatalf("the mail agent's run made %v, want one proposal", ids)
	}
	h.say("t_mail", "posted after the call", false)
	return ids[0]
}

// TestProposalPageInChromium: bob opens an email proposal his finance role
// decides. The page reads, top to bottom: the title, what will happen, who
// asked, the conversation up to the call (alice's two messages and the
// agent's reply that called it, not the call's result nor what alice wrote
// after), the input (fields as a list, the body as text with its line
// breaks and its markup and override shown, the exact JSON folded), and
// the decision; the internals are folded under "Technical details", which
// the keyboard unfolds. At phone width nothing overflows.
func TestProposalPageInChromium(t *testing.T) {
	h := newHarness(t)
	id := mailProposal(t, h)
	b := browser(t)
	signInBrowser(t, b, h.url, "key_bob")
	step(t, b, "open the email proposal", chromedp.Navigate(h.url+"/proposals/"+id))
	waitFor(t, b, "the proposal page", `!!document.querySelector("#approve")`)

	if got, want := eval[string](t, b, `[...document.querySelectorAll("main h1, main h2")].filter(h => !h.closest("details")).map(h => h.textContent).join(" / ")`),
		"Email c_42: Your refund / What will happen / Who asked / Conversation up to the call / Input / Decision"; got != want {
		t.Errorf("the page's parts, in order:\n%s\nwant\n%s", got, want)
	}

	// The conversation: who said what, the call last.
	conv := eval[string](t, b, `[...document.querySelectorAll("#conversation li")].map(li =>
		li.querySelector(".msg-head strong").textContent + ": " + (li.querySelector(".msg-text") || {innerText: ""}).innerText +
		" [" + (li.querySelector(".msg-note") || {textContent: ""}).textContent + "]").join("\n")`)
	want := "alice: Customer c_42 called: where is the refund? []\n" +
		"alice: tell c_42 about Your refund:\n" + mailBodyShown + " []\n" +
		"alice's agent: I'll send that email. [Called email.send: this request.]"
	if conv != want {
		t.Errorf("the conversation reads\n%s\nwant\n%s", conv, want)
	}
	if !eval[bool](t, b, `document.querySelectorAll("#conversation li.msg-the-call").length === 1 && !!document.querySelector("#conversation li:last-child.msg-the-call")`) {
		t.Error("the call is not marked, or not last")
	}

	// The input: fields, the body's lines as lines, markup as text.
	// In the order the stored input holds them (the engine keeps it
	// canonical: keys sorted).
	if got := inputShown(t, b); got != "body="+mailBodyShown+" subject=Your refund to=c_42" {
		t.Errorf("the input reads %q", got)
	}
	if ws := eval[string](t, b, `getComputedStyle(document.querySelector("#input .multiline")).whiteSpace`); ws != "pre-wrap" {
		t.Errorf("the body's white-space is %q, want pre-wrap", ws)
	}
	if n := eval[float64](t, b, `document.querySelector("#input .multiline").getClientRects()[0].height / parseFloat(getComputedStyle(document.querySelector("#input .multiline")).lineHeight)`); n < 3 {
		t.Errorf("the body shows on %.1f lines, want 3 or more", n)
	}
	if eval[bool](t, b, `!!document.querySelector("#input b, #conversation b")`) {
		t.Error("the body's markup became an element")
	}
	// The exact JSON is there, folded.
	if eval[bool](t, b, `document.querySelector("details.json").open`) {
		t.Error("the exact JSON is not folded")
	}
	if got := eval[string](t, b, `document.querySelector("details.json pre").textContent`); !strings.Contains(got, `"body": "Dear customer,\nyour refund`) {
		t.Errorf("the exact JSON: %s", got)
	}

	screenshot(t, b, "inbox-proposal.png")

	// Internals are folded: not in what the page shows until unfolded.
	visible := eval[string](t, b, `document.querySelector("main").innerText`)
	for _, internal := range []string{"Operation id", "State version", "Input digest", "not sealed yet", "Audit trail", "Tool call id", "run_"} {
		if strings.Contains(visible, internal) {
			t.Errorf("the page shows %q before Technical details is unfolded:\n%s", internal, visible)
		}
	}
	step(t, b, "unfold Technical details with the keyboard",
		chromedp.Focus(chromedp.CSS("details#technical > summary")), chromedp.KeyEvent(kb.Enter))
	waitFor(t, b, "Technical details open", `document.querySelector("details#technical").open`)
	tech := eval[string](t, b, `document.querySelector("details#technical").innerText`)
	for _, internal := range []string{"Operation id", "State version", "Input digest", "Audit trail", "proposal.created"} {
		if !strings.Contains(tech, internal) {
			t.Errorf("Technical details lack %q:\n%s", internal, tech)
		}
	}

	// Phone width: the page still fits, details open.
	step(t, b, "phone width", chromedp.EmulateViewport(390, 844))
	if overflow := eval[bool](t, b, `document.documentElement.scrollWidth > window.innerWidth + 1`); overflow {
		t.Error("the proposal page overflows a phone-width screen")
	}
}

// TestWaitingForYouInChromium: a refund of 250,000 EUR needs two finance
// approvals. bob approves it in his browser: the page then says that he
// approved (when, why) and that one more approval is needed from
// role:finance, and offers Approve and Reject no more; his list shows it
// under "Waiting for others" and the email under "Waiting for you", and
// his count is 1. carol's count still holds both. alice, the requester,
// decides neither: her count is 0, her list waits for others only, and her
// page of the refund says who decides it.
func TestWaitingForYouInChromium(t *testing.T) {
	h := newHarness(t)
	email := mailProposal(t, h)
	refund := h.propose("t_big", "c_big", 250000)
	b := browser(t)
	signInBrowser(t, b, h.url, "key_bob")
	if got := eval[string](t, b, `document.title`); got != "(2) Inbox · Countersign" {
		t.Errorf("bob's title before deciding: %q", got)
	}

	step(t, b, "open the refund", chromedp.Navigate(h.url+"/proposals/"+refund))
	waitFor(t, b, "the decision form", `!!document.querySelector("#approve") && !!document.querySelector("#reject")`)
	if got := text(t, b, "#needed"); got != "2 more approvals needed (role:finance)." {
		t.Errorf("before deciding: %q", got)
	}
	step(t, b, "approve with a reason",
		chromedp.SendKeys(chromedp.CSS("#reason"), "checked the ledger"),
		chromedp.Click(chromedp.CSS("#approve")))
	waitFor(t, b, "bob's decision shown", `!!document.querySelector("#your-decision")`)
	// The reason is quoted by <q>, whose marks the style adds.
	if got := text(t, b, "#your-decision"); !strings.HasPrefix(got, "You approved this request via web at ") || !strings.HasSuffix(got, " UTC: checked the ledger.") ||
		!eval[bool](t, b, `document.querySelector("#your-decision q").textContent === "checked the ledger"`) {
		t.Errorf("bob's decision reads %q", got)
	}
	if got := text(t, b, "#needed"); got != "1 more approval needed (role:finance)." {
		t.Errorf("after bob's approval: %q", got)
	}
	if eval[bool](t, b, `!!document.querySelector("#approve, #reject, form[action$='/decide']")`) {
		t.Error("bob is offered to decide again")
	}
	if got := eval[string](t, b, `document.title`); !strings.HasPrefix(got, "(1) ") {
		t.Errorf("bob's title after deciding: %q, want (1)", got)
	}
	screenshot(t, b, "inbox-decided.png")

	step(t, b, "bob's list", chromedp.Navigate(h.url+"/"))
	waitFor(t, b, "both groups", `!!document.querySelector("#yours li") && !!document.querySelector("#others li")`)
	groups := eval[string](t, b, `[...document.querySelectorAll("#list ul.proposals")].map(ul =>
		ul.id + ": " + [...ul.querySelectorAll("li")].map(li => li.dataset.id).join(",")).join("; ")`)
	if want := fmt.Sprintf("yours: %s; others: %s", email, refund); groups != want {
		t.Errorf("bob's list: %s, want %s", groups, want)
	}
	if got := text(t, b, "#others li .note"); got != "You approved it. 1 more approval needed (role:finance)." {
		t.Errorf("the refund's note: %q", got)
	}
	if got := text(t, b, "#pending .count"); got != "1" {
		t.Errorf("bob's badge: %q, want 1", got)
	}
	screenshot(t, b, "inbox-list.png")

	// carol: both wait for her.
	carol := h.client()
	carol.signIn("key_carol")
	if _, body := carol.get("/"); !strings.Contains(body, "<title>(2) Inbox · Countersign</title>") {
		t.Errorf("carol's list: want (2) in the title:\n%s", body)
	}

	// alice requested both and decides neither.
	step(t, b, "sign out", chromedp.Click(chromedp.CSS("form[action='/logout'] button")))
	waitFor(t, b, "the sign-in form", `location.pathname === "/login"`)
	signInBrowser(t, b, h.url, "key_alice")
	if got := eval[string](t, b, `document.title`); got != "Inbox · Countersign" {
		t.Errorf("alice's title: %q, want no count", got)
	}
	if eval[bool](t, b, `!!document.querySelector("#pending .count")`) {
		t.Error("alice's badge counts what only finance decides")
	}
	if got := text(t, b, "#list p.empty"); got != "Nothing waits for you." {
		t.Errorf("alice's Waiting for you: %q", got)
	}
	if got := eval[string](t, b, `[...document.querySelectorAll("#others li")].map(li => li.dataset.id).sort().join(",")`); got != strings.Join(slices.Sorted(slices.Values([]string{email, refund})), ",") {
		t.Errorf("alice's Waiting for others: %s", got)
	}
	step(t, b, "alice opens the refund", chromedp.Navigate(h.url+"/proposals/"+refund))
	waitFor(t, b, "who decides", `!!document.querySelector("#instead")`)
	if got := text(t, b, "#instead"); got != "You do not decide this request: it waits for role:finance." {
		t.Errorf("alice's page says %q", got)
	}
	if eval[bool](t, b, `!!document.querySelector("#approve, #reject")`) {
		t.Error("alice is offered to decide")
	}
}

// TestDecidedProposalOverHTTP: after one of two approvals, the form is
// gone from the approver's page, the vote and what is still needed are
// there, and a second approval posted anyway changes nothing.
func TestDecidedProposalOverHTTP(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := h.propose("t_q", "c_q", 200000)
	bob := h.client()
	bob.signIn("key_bob")
	tok := bob.csrf("/proposals/" + id)
	resp, _ := bob.post("/proposals/"+id+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}, "reason": {"fine"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	_, body := bob.get("/proposals/" + id)
	for _, want := range []string{`id="your-decision">You approved this request via web at`, `<q>fine</q>`,
		`id="needed">1 more approval needed (role:finance).</p>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, `action="/proposals/`+id+`/decide"`) {
		t.Errorf("the page still offers the decision:\n%s", body)
	}
	resp, _ = bob.post("/proposals/"+id+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}}, nil)
	if !strings.HasSuffix(resp.Header.Get("Location"), "?result=unchanged") {
		t.Errorf("approve again: %s", resp.Header.Get("Location"))
	}
}

// TestConversationBounded: the page shows the last 20 messages before the
// call, says how many earlier ones it leaves out, and ends with the call
// (an API call: an entry of its own). What alice writes after it, and in
// another thread, is not there.
func TestConversationBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.say("t_other", "in another thread", false)
	for i := 1; i <= 25; i++ {
		h.say("t_long", fmt.Sprintf("message %d of 25", i), false)
	}
	id := h.propose("t_long", "c_long", 5)
	h.say("t_long", "written after the call", false)
	bob := h.client()
	bob.signIn("key_bob")
	_, body := bob.get("/proposals/" + id)
	for _, want := range []string{`id="earlier">5 earlier messages are not shown.</p>`, "message 6 of 25", "message 25 of 25",
		`<li class="msg msg-call msg-the-call">`, "Called payments.refund: this request."} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s:\n%s", want, body)
		}
	}
	for _, absent := range []string{"message 5 of 25", "written after the call", "in another thread"} {
		if strings.Contains(body, absent) {
			t.Errorf("the page shows %q:\n%s", absent, body)
		}
	}
	if n := strings.Count(body, `<li class="msg `); n != 21 {
		t.Errorf("%d entries, want 20 messages and the call", n)
	}
}
