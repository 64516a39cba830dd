package web_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/cstype"
)

// hiddenText is what a hostile agent puts in a refund's customer and
// thread: a right-to-left override that turns "exe.pdf" around, a
// zero-width space, an ANSI escape, a tag character and a C1 control.
const hiddenText = "\u202Efdp.exe\u200B\x1b[2J\U000E0041\u0085"

// hiddenShown is hiddenText as every page must show it.
const hiddenShown = `\u{202E}fdp.exe\u{200B}\u{001B}[2J\u{E0041}\u{0085}`

// hiddenRunes are hiddenText's invisible and control characters, none of
// which a page may show as they are.
const hiddenRunes = "\u202E\u200B\x1b\U000E0041\u0085"

// callHidden makes alice's agent's refund call whose customer and thread
// hold hiddenText, and returns the proposal id. The body is written by
// encoding/json: Go's %q spells some of these characters in ways JSON does
// not know.
func (h *harness) callHidden() string {
	h.t.Helper()
	body, err := json.Marshal(map[string]any{
		"thread_id": "t_" + hiddenText, "tool_call_id": "call_hidden", "action": "payments.refund",
		"input": map[string]any{"amount": 10, "customer": "c_" + hiddenText}, "wait_seconds": 0,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/calls", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer key_alice")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out callAnswer
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.ProposalID == "" {
		h.t.Fatalf("call: status %d, %+v, %v", resp.StatusCode, out, err)
	}
	return out.ProposalID
}

// threadExactField is the hidden field that carries the thread filter's
// exact id back.
var threadExactField = regexp.MustCompile(`<input type="hidden" name="thread_exact" value="[^"]*">`)

// hiddenThreadFields are the hidden fields that send a thread id back as
// it is (the filter's exact id, the revoke form's way back to the filtered
// page): the only places a page holds the id's characters, never shown.
var hiddenThreadFields = regexp.MustCompile(`<input type="hidden" name="(?:thread_exact|thread)" value="[^"]*">`)

// checkPlain fails when page shows any of hiddenRunes as it is, or lacks
// any of want.
func checkPlain(t *testing.T, name, page string, want ...string) {
	t.Helper()
	shown := hiddenThreadFields.ReplaceAllString(page, "")
	if i := strings.IndexAny(shown, hiddenRunes); i >= 0 {
		t.Errorf("%s shows %q as it is, at %d:\n%s", name, []rune(shown[i:])[0], i, page)
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("%s lacks %s:\n%s", name, w, page)
		}
	}
}

// TestInboxShowsAgentTextAsPlainText: a refund whose customer (so its
// title and input) and thread hold a bidi override, a zero-width space, an
// ANSI escape, a tag and a C1 control is shown with each of them as
// \u{XXXX}, on the list, the proposal page (title, document title, input,
// thread, the approver's reason, the receipt) and the grants page. The
// thread filter's box shows the id escaped and still filters by the exact
// id when sent back as shown.
func TestInboxShowsAgentTextAsPlainText(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pid := h.callHidden()
	bob := h.client()
	bob.signIn("key_bob")

	title := "Refund 10 EUR to c_" + hiddenShown
	_, body := bob.get("/")
	checkPlain(t, "the list", body, `href="/proposals/`+pid+`">`+title+`</a>`, `thread <code>t_`+hiddenShown+`</code>`)

	resp, body := bob.get("/proposals/" + pid)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("proposal page: %d\n%s", resp.StatusCode, body)
	}
	checkPlain(t, "the proposal page", body, "<h1>"+title+"</h1>", title+" · Countersign</title>",
		`&#34;customer&#34;: &#34;c_\u{202E}fdp.exe\u{200B}`, `<code>t_`+hiddenShown+`</code></a>`)

	tok := bob.csrf("/proposals/" + pid)
	resp, _ = bob.post("/proposals/"+pid+"/decide", url.Values{"csrf": {tok}, "verdict": {"approved"}, "remember": {"thread"},
		"reason": {"fine \u202Eko\u2066"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	if p := h.settle(pid); p.Status != cstype.StatusSucceeded {
		t.Fatalf("the refund ended %s", p.Status)
	}
	_, body = bob.get("/proposals/" + pid)
	checkPlain(t, "the settled proposal page", body, `<q>fine \u{202E}ko\u{2066}</q>`, `<code>rf_c_`+hiddenShown+`</code>`)
	if strings.ContainsAny(body, "\u2066") {
		t.Errorf("the reason's isolate shows as it is:\n%s", body)
	}

	_, body = bob.get("/grants")
	checkPlain(t, "the grants page", body, `<code>t_`+hiddenShown+`</code></a>`)

	// The thread filter, reached by the thread's link: the box shows the id
	// as plain text, the list is the thread's; sent back as shown (the
	// form's fields), it still filters by the exact id.
	thread := "t_" + hiddenText
	_, body = bob.get("/?status=all&thread=" + url.QueryEscape(thread))
	checkPlain(t, "the thread's list", body, `name="thread" value="t_`+hiddenShown+`"`, `data-id="`+pid+`"`)
	exact := threadExactField.FindString(body)
	if exact == "" {
		t.Fatalf("the thread's list sends no exact id back:\n%s", body)
	}
	q := url.Values{"status": {"all"}, "thread": {"t_" + hiddenShown}, "thread_exact": {thread}}
	_, body = bob.get("/?" + q.Encode())
	if !strings.Contains(body, `data-id="`+pid+`"`) {
		t.Errorf("the filter sent back as shown lost the thread:\n%s", body)
	}
	// Typed over, the box is what is searched.
	q.Set("thread", "t_other")
	_, body = bob.get("/?" + q.Encode())
	if strings.Contains(body, `data-id="`+pid+`"`) || !strings.Contains(body, "No proposals match.") {
		t.Errorf("a thread typed over the shown one still finds the hidden one:\n%s", body)
	}
	_, body = bob.get("/grants?thread=" + url.QueryEscape(thread))
	checkPlain(t, "the thread's grants", body, `name="thread" value="t_`+hiddenShown+`"`)
	if len(grantsOn(body)) != 1 {
		t.Errorf("the thread's grants page lists %v, want the one grant:\n%s", grantsOn(body), body)
	}
}

// TestBrowserShowsAgentTextAsPlainText: what Chromium renders of the
// proposal page, and of the list after the thread filter is sent again,
// holds hiddenText's characters only as \u{XXXX}.
func TestBrowserShowsAgentTextAsPlainText(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	pid := h.callHidden()
	ctx := browser(t)
	signInBrowser(t, ctx, h.url, "key_bob")
	step(t, ctx, "open the proposal", chromedp.Navigate(h.url+"/proposals/"+pid), chromedp.WaitVisible(chromedp.CSS("h1")))
	text := eval[string](t, ctx, "document.title + '\\n' + document.body.innerText")
	checkPlain(t, "the rendered proposal page", text, "Refund 10 EUR to c_"+hiddenShown+" · Countersign", "t_"+hiddenShown)
	if got := inputShown(t, ctx); got != "amount=10 customer=c_"+hiddenShown {
		t.Errorf("the input reads %q", got)
	}
	// The exact JSON, unfolded, is plain text too.
	step(t, ctx, "unfold the exact input", chromedp.Click(chromedp.CSS("details.json summary")))
	checkPlain(t, "the exact input", eval[string](t, ctx, `document.querySelector("details.json").innerText`),
		`"customer": "c_\u{202E}fdp.exe\u{200B}`)

	// The thread's link, then the filter form sent again as it stands.
	step(t, ctx, "follow the thread's link", chromedp.Click(chromedp.CSS("dd a[href^='/?status=all&thread=']")),
		chromedp.WaitVisible(chromedp.CSS("input[name=thread]")))
	waitFor(t, ctx, "the thread's list", `location.pathname === "/" && !!document.querySelector("li.proposal[data-id='`+pid+`']")`)
	if v := eval[string](t, ctx, "document.querySelector('input[name=thread]').value"); v != "t_"+hiddenShown {
		t.Errorf("the thread filter's box shows %q, want %q", v, "t_"+hiddenShown)
	}
	step(t, ctx, "send the filter again", chromedp.Click(chromedp.CSS("form.filters button[type=submit]")))
	waitFor(t, ctx, "the filter's answer", `location.search.includes("thread_exact=")`)
	waitFor(t, ctx, "the thread's list again", `!!document.querySelector("li.proposal[data-id='`+pid+`']")`)
	checkPlain(t, "the rendered list", eval[string](t, ctx, "document.body.innerText"), "t_"+hiddenShown)
}
