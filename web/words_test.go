package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// deadlineWords is how the pages write the deadline exp, a whole minute,
// seen at now: the time of day in UTC, with the date on another day.
func deadlineWords(exp, now time.Time) string {
	exp, now = exp.UTC(), now.UTC()
	if exp.YearDay() != now.YearDay() || exp.Year() != now.Year() {
		return exp.Format("2006-01-02 15:04 UTC")
	}
	return exp.Format("15:04 UTC")
}

// text is an element's text in the page, "" when there is none.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return eval[string](t, ctx, `(document.querySelector(`+jsString(sel)+`) || {textContent: ""}).textContent.trim()`)
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// waitText waits until the element sel reads want.
func waitText(t *testing.T, ctx context.Context, what, sel, want string) {
	t.Helper()
	waitFor(t, ctx, what+": "+want, `(document.querySelector(`+jsString(sel)+`) || {textContent: ""}).textContent.trim() === `+jsString(want))
}

// TestWaitAndTwoPhaseWordsInChromium follows wait and two_phase proposals
// through bob's browser: before approval the page says that approving lets
// alice's agent run it when it calls again (or confirms), before the
// deadline, or it lapses; after approval, that it waits for the agent; once
// the agent calls, that it ran; and when the agent never does, that it
// lapsed; the list says the same of approved and lapsed ones. "What will
// happen" says what runs, as whom, executed by whom, the metadata folded
// below; the remember choice says identical requests.
func TestWaitAndTwoPhaseWordsInChromium(t *testing.T) {
	clock := &testClock{now: time.Now().UTC().Truncate(time.Minute)}
	start := clock.Now()
	h := newHarnessWith(t, clock)
	by := deadlineWords(start.Add(10*time.Minute), start) // the policy's default TTL
	bob := browser(t)
	signInBrowser(t, bob, h.url, "key_bob")

	// wait: alice's agent asks, and stops waiting at once.
	w := h.agentCall("payments.refund", "t_wait", "c_wait", 30, `,"mode":"wait"`)
	if w.Status != "pending" {
		t.Fatalf("the wait call: %+v", w)
	}
	step(t, bob, "open the wait proposal", chromedp.Navigate(h.url+"/proposals/"+w.ProposalID))
	waitFor(t, bob, "the decision form", `!!document.querySelector("#approve")`)
	if got, want := text(t, bob, "#fate"), "Approving lets it run when alice's agent calls again (at once, if it is still waiting), before "+by+"; otherwise it lapses and never runs."; got != want {
		t.Errorf("a pending wait proposal says\n%q, want\n%q", got, want)
	}
	if got, want := text(t, bob, "#runs"), "payments.refund v1 runs as alice with the input below, executed by alice's agent."; got != want {
		t.Errorf("What will happen says\n%q, want\n%q", got, want)
	}
	// The sentence is what will happen; the metadata is folded away below,
	// in the technical details.
	if !eval[bool](t, bob, `(() => { const r = document.querySelector("#runs"), tech = document.querySelector("details#technical");
		return r.parentElement.querySelector("h2").textContent === "What will happen" && !!tech && !tech.open &&
			!!(r.compareDocumentPosition(tech) & Node.DOCUMENT_POSITION_FOLLOWING) && /Mode\s*wait/.test(tech.textContent) &&
			/State version/.test(tech.textContent) && /Operation id/.test(tech.textContent); })()`) {
		t.Errorf("What will happen lacks its sentence above the folded metadata:\n%s", eval[string](t, bob, `document.body.innerText`))
	}
	labels := eval[string](t, bob, `[...document.querySelectorAll("input[name=remember]")].map(i => i.parentElement.textContent.trim()).join("\n")`)
	if want := "Only this request\nThis and identical requests from alice's agent (same action, same input) for the rest of this thread"; labels != want {
		t.Errorf("the remember choices read\n%s\nwant\n%s", labels, want)
	}
	if note := text(t, bob, "#remember-note"); !strings.Contains(note, "once this request has run and succeeded") {
		t.Errorf("the remember note: %q", note)
	}

	step(t, bob, "approve the wait proposal", chromedp.Click(chromedp.CSS("#approve")))
	waitText(t, bob, "approved, waiting for the agent", "#fate",
		"Approved, not run yet: it runs when alice's agent calls again, before "+by+"; otherwise it lapses.")
	// The agent's call stopped waiting (wait_seconds 0): the approval
	// says that only its next call runs it.
	if got, want := text(t, bob, ".result"), "Your approval was recorded. It has not run: it runs only when the agent calls again, before the deadline below; otherwise it lapses without running."; got != want {
		t.Errorf("after approving, the page says\n%q, want\n%q", got, want)
	}
	if got := text(t, bob, "#status"); got != "approved" {
		t.Errorf("status %q, want approved", got)
	}
	// The list says it too.
	step(t, bob, "list the approved", chromedp.Navigate(h.url+"/?status=approved"))
	waitFor(t, bob, "the approved proposal", `!!document.querySelector("li[data-id='`+w.ProposalID+`']")`)
	if got, want := text(t, bob, "li[data-id='"+w.ProposalID+"'] .note"), "Approved, not run yet: it runs when alice's agent calls again, before "+by+"; otherwise it lapses."; got != want {
		t.Errorf("the list says\n%q, want\n%q", got, want)
	}
	step(t, bob, "back to the proposal", chromedp.Navigate(h.url+"/proposals/"+w.ProposalID))
	waitFor(t, bob, "the proposal page", `document.querySelector("#status").textContent === "approved"`)
	eval[bool](t, bob, `window.__noReload = true`)
	// The agent calls again: it runs, and bob's page says so without a reload.
	if again := h.agentCall("payments.refund", "t_wait", "c_wait", 30, `,"mode":"wait"`); again.Status != "succeeded" || again.Receipt != "rf_c_wait" {
		t.Fatalf("the agent's second call: %+v", again)
	}
	waitText(t, bob, "ran", "#fate", "It ran and succeeded.")
	if !eval[bool](t, bob, `window.__noReload === true`) {
		t.Error("the page reloaded instead of updating")
	}

	// two_phase: the agent gets a confirmation, and must come back with it.
	c := h.agentCall("payments.refund", "t_2p", "c_2p", 20, `,"mode":"two_phase"`)
	if c.Status != "confirmation_required" || c.ConfirmationID == "" {
		t.Fatalf("the two_phase call: %+v", c)
	}
	step(t, bob, "open the two_phase proposal", chromedp.Navigate(h.url+"/proposals/"+c.ProposalID))
	waitFor(t, bob, "the decision form", `!!document.querySelector("#approve")`)
	if got, want := text(t, bob, "#fate"), "Approving lets it run when alice's agent confirms it by calling again, before "+by+"; otherwise it lapses and never runs."; got != want {
		t.Errorf("a pending two_phase proposal says\n%q, want\n%q", got, want)
	}
	if got, want := text(t, bob, "#runs"), "payments.refund v1 runs as alice with the input below, executed by alice's agent."; got != want {
		t.Errorf("What will happen says %q, want %q", got, want)
	}
	step(t, bob, "approve the two_phase proposal", chromedp.Click(chromedp.CSS("#approve")))
	waitText(t, bob, "approved, waiting for the confirmation", "#fate",
		"Approved, not run yet: it runs when alice's agent confirms it by calling again, before "+by+"; otherwise it lapses.")
	if got := text(t, bob, ".result"); !strings.Contains(got, "it runs only when the agent calls again") {
		t.Errorf("after approving the two_phase proposal, the page says %q", got)
	}
	if done := h.agentCall("payments.refund", "t_2p", "c_2p", 20, `,"mode":"two_phase","evidence":`+jsString(c.ConfirmationID)); done.Status != "succeeded" {
		t.Fatalf("the confirmed call: %+v", done)
	}
	waitText(t, bob, "ran", "#fate", "It ran and succeeded.")

	// A wait proposal whose agent never calls again lapses.
	l := h.agentCall("payments.refund", "t_lapse", "c_lapse", 10, `,"mode":"wait"`)
	step(t, bob, "open the proposal that will lapse", chromedp.Navigate(h.url+"/proposals/"+l.ProposalID))
	waitFor(t, bob, "the decision form", `!!document.querySelector("#approve")`)
	step(t, bob, "approve it", chromedp.Click(chromedp.CSS("#approve")))
	waitFor(t, bob, "approved", `document.querySelector("#status").textContent === "approved"`)
	clock.Advance(11 * time.Minute)
	// The page names the deadline's date only when it is not today's; the
	// advance may have crossed midnight.
	by = deadlineWords(start.Add(10*time.Minute), clock.Now())
	step(t, bob, "reload past the deadline", chromedp.Navigate(h.url+"/proposals/"+url.PathEscape(l.ProposalID)))
	waitText(t, bob, "lapsing", "#fate", "Approved, but alice's agent did not call again before "+by+": it lapses without running.")
	// The worker sweeps too, and may have expired it first.
	if _, err := h.sweep(); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	step(t, bob, "reload after the sweep", chromedp.Navigate(h.url+"/proposals/"+url.PathEscape(l.ProposalID)))
	waitText(t, bob, "lapsed", "#fate", "It lapsed: approved, but alice's agent did not call again before "+by+", so it never ran.")
	if got := text(t, bob, "#status"); got != "expired" {
		t.Errorf("status %q, want expired", got)
	}
	step(t, bob, "list the expired", chromedp.Navigate(h.url+"/?status=expired"))
	waitFor(t, bob, "the lapsed proposal", `!!document.querySelector("li[data-id='`+l.ProposalID+`']")`)
	if got, want := text(t, bob, "li[data-id='"+l.ProposalID+"'] .note"), "It lapsed: approved, but alice's agent did not call again before "+by+", so it never ran."; got != want {
		t.Errorf("the list says\n%q, want\n%q", got, want)
	}
	// And the agent that comes back too late runs nothing.
	if late := h.agentCall("payments.refund", "t_lapse", "c_lapse", 10, `,"mode":"wait"`); late.Status != "expired" {
		t.Errorf("the agent's call after the lapse: %+v", late)
	}
}

// TestIndependentWordsInChromium: an independent proposal's page says that
// approving queues it for the worker, then that it is running, then that
// it ran; a rule that remembers any input says so instead of "identical".
func TestIndependentWordsInChromium(t *testing.T) {
	h := newHarness(t)
	bob := browser(t)
	signInBrowser(t, bob, h.url, "key_bob")
	id := h.propose("t_ind", "c_gate", 75)
	step(t, bob, "open the independent proposal", chromedp.Navigate(h.url+"/proposals/"+id))
	waitFor(t, bob, "the decision form", `!!document.querySelector("#approve")`)
	if got, want := text(t, bob, "#fate"), "Approving queues it; the Countersign worker runs it."; got != want {
		t.Errorf("a pending independent proposal says %q, want %q", got, want)
	}
	if got, want := text(t, bob, "#runs"), "payments.refund v1 runs as alice with the input below, executed by the Countersign worker."; got != want {
		t.Errorf("What will happen says %q, want %q", got, want)
	}
	step(t, bob, "approve", chromedp.Click(chromedp.CSS("#approve")))
	// The worker holds it at the gate: queued, then running.
	waitFor(t, bob, "queued or running", `["Approved and queued: the Countersign worker runs it. It has not run yet.",
		"Running now, executed by the Countersign worker."].includes(document.querySelector("#fate").textContent.trim())`)
	waitText(t, bob, "running", "#fate", "Running now, executed by the Countersign worker.")
	h.Release()
	waitText(t, bob, "ran", "#fate", "It ran and succeeded.")

	// credits.* remembers approvals for any input: the words say so.
	cid := h.call("credits.grant", "t_credit", "c_credit", 5)
	step(t, bob, "open the credit", chromedp.Navigate(h.url+"/proposals/"+cid))
	waitFor(t, bob, "the decision form", `!!document.querySelector("#approve")`)
	labels := eval[string](t, bob, `[...document.querySelectorAll("input[name=remember]")].map(i => i.parentElement.textContent.trim()).join("\n")`)
	if want := "Only this request\nThis and every credits.grant request from alice's agent, with any input, for the rest of this thread"; labels != want {
		t.Errorf("the remember choices of a rule that widens grants read\n%s\nwant\n%s", labels, want)
	}
}

// TestPageCatchesUpWhenTheStreamOpensLate: a change made after the page
// was served but before its event stream opened still reaches the page,
// without a reload, once the stream opens.
func TestPageCatchesUpWhenTheStreamOpensLate(t *testing.T) {
	h := newHarness(t)
	bob := browser(t)
	signInBrowser(t, bob, h.url, "key_bob")
	w := h.agentCall("payments.refund", "t_late", "c_late", 30, `,"mode":"wait"`)
	h.HoldStreams()
	step(t, bob, "open the proposal", chromedp.Navigate(h.url+"/proposals/"+w.ProposalID))
	waitFor(t, bob, "the decision form", `!!document.querySelector("#approve")`)
	eval[bool](t, bob, `window.__noReload = true`)
	if got := text(t, bob, "#live-state"); got != "offline" {
		t.Fatalf("the stream opened while held: %q", got)
	}
	// carol approves while the stream of bob's page is not open.
	c := h.client()
	c.signIn("key_carol")
	tok := c.csrf("/proposals/" + w.ProposalID)
	if resp, _ := c.post("/proposals/"+w.ProposalID+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}}, nil); resp.StatusCode != 303 {
		t.Fatalf("carol approves: %d", resp.StatusCode)
	}
	h.ReleaseStreams()
	waitText(t, bob, "the approval, once the stream opens", "#status", "approved")
	if !eval[bool](t, bob, `window.__noReload === true`) {
		t.Error("the page reloaded instead of updating")
	}
}

// TestTypingSurvivesUnrelatedChanges: an event that changes nothing on the
// page (another proposal arrives) leaves the decision form as it is, with
// what the approver typed, though the countdown moved on meanwhile.
func TestTypingSurvivesUnrelatedChanges(t *testing.T) {
	h := newHarness(t)
	bob := browser(t)
	signInBrowser(t, bob, h.url, "key_bob")
	id := h.propose("t_typing", "c_typing", 12)
	step(t, bob, "open the proposal", chromedp.Navigate(h.url+"/proposals/"+id))
	waitFor(t, bob, "the live stream", `!!document.querySelector("#approve") && document.querySelector("#live-state").textContent === "live"`)
	step(t, bob, "type a reason", chromedp.SendKeys(chromedp.CSS("#reason"), "checked the order"))
	eval[bool](t, bob, `(window.__form = document.querySelector("#approve"), true)`)
	// Let the countdown tick past what the server wrote.
	before := text(t, bob, "time[data-countdown]")
	waitFor(t, bob, "the countdown to move", `document.querySelector("time[data-countdown]").textContent !== `+jsString(before))
	h.propose("t_other", "c_other", 3)
	waitFor(t, bob, "the new pending count in the title", `document.title.startsWith("(2) ")`)
	if !eval[bool](t, bob, `document.querySelector("#approve") === window.__form`) {
		t.Error("an unrelated change replaced the decision form")
	}
	if got := eval[string](t, bob, `document.querySelector("#reason").value`); got != "checked the order" {
		t.Errorf("the typed reason is now %q", got)
	}
}
