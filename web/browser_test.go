package web_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/internal/browsertest"
)

// screenshotDir is where the README's screenshots live. The test rewrites
// them when they are missing or COUNTERSIGN_SCREENSHOTS is set.
const screenshotDir = "../docs/screenshots"

// browser starts a headless Chromium with a fresh profile and returns a
// context for its first tab (internal/browsertest).
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, chromedp.WindowSize(1200, 900))
}

// step runs browser actions with a deadline.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	browsertest.Step(t, ctx, 20*time.Second, what, actions...)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it holds.
func waitFor(t *testing.T, ctx context.Context, what, predicate string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var err error
	for ctx.Err() == nil {
		// A navigation ends a poll; poll again on the new page.
		if _, err = chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingInterval(50*time.Millisecond))); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		body, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string]("document.body.innerText"))
		t.Fatalf("waiting for %s: %v\npage:\n%s", what, err, body)
	}
}

func signInBrowser(t *testing.T, ctx context.Context, base, key string) {
	t.Helper()
	step(t, ctx, "sign in as "+key,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), key),
		chromedp.Click(chromedp.CSS("form[action='/login'] button[type=submit]")),
	)
	waitFor(t, ctx, "the inbox after sign-in", `location.pathname === "/" && !!document.querySelector("#list")`)
	// The stream is connected once the page says so.
	waitFor(t, ctx, "the live stream", `document.querySelector("#live-state").textContent === "live"`)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: not a PNG", name)
	}
	path := filepath.Join(screenshotDir, name)
	if _, err := os.Stat(path); err == nil && os.Getenv("COUNTERSIGN_SCREENSHOTS") == "" {
		return
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestInboxInChromium drives the real server from two browsers: bob signs
// in, sees a proposal the API creates appear without a reload, approves it,
// and watches it succeed once the worker's execution finishes; carol's
// browser sees the same change; eve, of another tenant, cannot open it.
func TestInboxInChromium(t *testing.T) {
	h := newHarness(t)
	bob := browser(t)
	carol := browser(t)

	signInBrowser(t, bob, h.url, "key_bob")
	signInBrowser(t, carol, h.url, "key_carol")
	step(t, carol, "carol lists every status", chromedp.Navigate(h.url+"/?status=all"))
	waitFor(t, carol, "carol's stream", `document.querySelector("#live-state").textContent === "live"`)

	// Mark both pages: a reload would lose the marks.
	eval[bool](t, bob, `window.__noReload = true`)
	eval[bool](t, carol, `window.__noReload = true`)

	h.propose("t_demo", "c_42", 40)
	h.propose("t_demo", "c_7", 12.5)
	id := h.propose("t_live", "c_gate", 250)
	waitFor(t, bob, "the new proposal in bob's list", `!!document.querySelector("li[data-id='`+id+`']")`)
	waitFor(t, carol, "the new proposal in carol's list", `!!document.querySelector("li[data-id='`+id+`'][data-status='pending']")`)
	if !eval[bool](t, bob, `window.__noReload === true`) {
		t.Fatal("bob's list reloaded")
	}
	if title := eval[string](t, bob, `document.title`); !strings.HasPrefix(title, "(3) ") {
		t.Errorf("title %q: want the pending count (3)", title)
	}

	// The proposal page, then the approval.
	step(t, bob, "open the proposal", chromedp.Click(chromedp.CSS("li[data-id='"+id+"'] a.title")))
	waitFor(t, bob, "the proposal page", `!!document.querySelector("#approve")`)
	text := eval[string](t, bob, `document.body.innerText`)
	for _, want := range []string{"Refund 250 EUR to c_gate", "payments.refund", "alice", "t_live", "1 more approval needed (role:finance).", "left"} {
		if !strings.Contains(text, want) {
			t.Errorf("the proposal page lacks %q:\n%s", want, text)
		}
	}
	if got := inputShown(t, bob); got != "amount=250 customer=c_gate" {
		t.Errorf("the input reads %q", got)
	}
	step(t, bob, "approve",
		chromedp.SendKeys(chromedp.CSS("#reason"), "customer called"),
		chromedp.Click(chromedp.CSS("#approve")),
	)
	waitFor(t, bob, "the decision's result", `!!document.querySelector(".result") && /recorded/.test(document.querySelector(".result").textContent)`)
	waitFor(t, bob, "approved or executing", `["approved","executing"].includes(document.querySelector("#status").textContent)`)
	eval[bool](t, bob, `window.__noReload = true`)

	// The worker is executing, held at the gate; let it finish.
	h.Release()
	waitFor(t, bob, "succeeded on bob's page", `document.querySelector("#status").textContent === "succeeded"`)
	if !eval[bool](t, bob, `window.__noReload === true`) {
		t.Fatal("bob's proposal page reloaded")
	}
	if text := eval[string](t, bob, `document.body.innerText`); !strings.Contains(text, "rf_c_gate") || !strings.Contains(text, "bob approved via web") {
		t.Errorf("the outcome or the history is missing:\n%s", text)
	}
	waitFor(t, carol, "succeeded in carol's list", `!!document.querySelector("li[data-id='`+id+`'][data-status='succeeded']")`)
	if !eval[bool](t, carol, `window.__noReload === true`) {
		t.Fatal("carol's list reloaded")
	}

	// Phone width: the list still reads.
	step(t, bob, "phone width", chromedp.EmulateViewport(390, 844), chromedp.Navigate(h.url+"/?status=all"))
	waitFor(t, bob, "the list at phone width", `!!document.querySelector("#list li")`)
	if overflow := eval[bool](t, bob, `document.documentElement.scrollWidth > window.innerWidth + 1`); overflow {
		t.Error("the list overflows a phone-width screen")
	}
	screenshot(t, bob, "inbox-phone.png")

	// carol signs out; eve of another tenant signs in and cannot open it.
	step(t, carol, "sign out", chromedp.Click(chromedp.CSS("form[action='/logout'] button")))
	waitFor(t, carol, "the sign-in form", `location.pathname === "/login" && !!document.querySelector("#token")`)
	signInBrowser(t, carol, h.url, "key_eve")
	step(t, carol, "eve opens acme's proposal", chromedp.Navigate(h.url+"/proposals/"+id))
	text = eval[string](t, carol, `document.body.innerText`)
	if !strings.Contains(text, "You may not see this proposal") || strings.Contains(text, "c_gate") || strings.Contains(text, "t_live") {
		t.Errorf("another tenant's proposal page:\n%s", text)
	}
}
