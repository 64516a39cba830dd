package email_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/emersion/go-smtp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/channels/email"
	"github.com/countersign/countersign/channels/email/emailtest"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/teststores"
	"github.com/countersign/countersign/store"
)

// page is an answer of the link's pages.
type page struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, c *http.Client, link string) page {
	t.Helper()
	if c == nil {
		c = &http.Client{}
	}
	resp, err := c.Get(link)
	if err != nil {
		t.Fatalf("GET %s: %v", link, err)
	}
	return read(t, resp)
}

func post(t *testing.T, c *http.Client, link string, form url.Values, cookie *http.Cookie) page {
	t.Helper()
	if c == nil {
		c = &http.Client{}
	}
	req, err := http.NewRequest(http.MethodPost, link, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", link, err)
	}
	return read(t, resp)
}

// form is a link's page as a browser holds it: its cookie, and the CSRF
// value of its button.
type form struct {
	c    *http.Client
	csrf string
}

// openForm opens a link's page, as a person would before pressing.
func openForm(t *testing.T, link string) form {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	f := form{c: &http.Client{Jar: jar}}
	pg := get(t, f.c, link)
	requirePage(t, "open "+link, pg, http.StatusOK, "Nothing is decided until you press")
	m := csrfRE.FindStringSubmatch(pg.body)
	if m == nil {
		t.Fatalf("no CSRF value in the page of %s:\n%s", link, pg.body)
	}
	f.csrf = m[1]
	return f
}

// press posts a link's form from a goroutine other than the test's, where
// t.Fatal must not be called: it returns what came back, or the error,
// for the test's goroutine to judge.
func press(c *http.Client, link, csrf string) (page, error) {
	resp, err := c.PostForm(link, url.Values{"csrf": {csrf}})
	if err != nil {
		return page{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

func read(t *testing.T, resp *http.Response) page {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	pg := page{status: resp.StatusCode, header: resp.Header, body: string(b)}
	// Every page, whatever it says.
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("%s %s: Cache-Control %q, want no-store", resp.Request.Method, resp.Request.URL.Path, got)
	}
	if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("%s %s: Referrer-Policy %q, want no-referrer", resp.Request.Method, resp.Request.URL.Path, got)
	}
	if pg.status >= 500 && pg.status != http.StatusServiceUnavailable {
		t.Errorf("%s %s: %d", resp.Request.Method, resp.Request.URL.Path, pg.status)
	}
	return pg
}

// requirePage requires an answer's status and a sentence in it.
func requirePage(t *testing.T, what string, pg page, status int, says string) {
	t.Helper()
	if pg.status != status || !strings.Contains(pg.body, says) {
		t.Fatalf("%s: %d, want %d saying %q:\n%s", what, pg.status, status, says, pg.body)
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// confirm is a person with a browser-like client: it opens the link, and
// presses the page's button (posts the form with its CSRF value and the
// cookie the page set).
func confirm(t *testing.T, link string) page {
	t.Helper()
	f := openForm(t, link)
	return post(t, f.c, link, url.Values{"csrf": {f.csrf}}, nil)
}

// requireUndecided requires p to be pending with no decision.
func (h *harness) requireUndecided(what string, p *cstype.Proposal) {
	h.t.Helper()
	got := h.proposal(p.ID)
	if got.Status != cstype.StatusPending || len(got.Decisions) != 0 {
		h.t.Fatalf("%s decided: %s with %+v", what, got.Status, got.Decisions)
	}
}

// awaitDelivered waits until n of the email channel's notifications are
// delivered, so that no message is still on its way.
func (h *harness) awaitDelivered(n int) []*cstype.OutboxEntry {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		all, err := h.engine.Notifications(h.t.Context(), olga, cstype.NotificationDelivered, 100)
		if err != nil {
			h.t.Fatal(err)
		}
		if len(all) >= n {
			return all
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d notifications delivered, want %d", len(all), n)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline, not timing
	}
}

func TestMailScannerAndBrowser(t *testing.T) {
	t.Parallel()
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, bind(t, open), harnessOptions{})
		p := h.call("payments.refund", 50)
		quiet := h.call("payments.quiet", 60)
		bob := h.mailFor("bob@acme.example", p, 1)
		carolMail := h.mailFor("carol@acme.example", p, 1)
		h.awaitDelivered(2) // the refund's and the quiet one's: both done

		// Never the requester (her agent may read her mail), never a
		// non-approver, and never for a rule that does not notify email.
		for _, addr := range []string{"alice@acme.example", "olga@acme.example"} {
			if got := h.box.To(addr); len(got) != 0 {
				t.Errorf("%s was mailed %d messages", addr, len(got))
			}
		}
		for _, addr := range []string{"bob@acme.example", "carol@acme.example"} {
			if got := h.about(h.box.Messages(), addr, quiet); len(got) != 0 {
				t.Errorf("%s was mailed about a proposal whose rule does not notify email", addr)
			}
		}

		// The message: title, requester, input (plain text), expiry, links.
		if want := "Approval needed: Refund 50 EUR to c_1"; bob.Subject != want {
			t.Errorf("subject %q, want %q", bob.Subject, want)
		}
		if got := bob.Header.Get("Auto-Submitted"); got != "auto-generated" {
			t.Errorf("Auto-Submitted %q", got)
		}
		for _, want := range []string{"alice's agent asks to run payments.refund", `"note": "line one\nline <b>two</b> \u{202E}"`, "Decide before "} {
			if !strings.Contains(bob.Text, want) {
				t.Errorf("the text part lacks %q:\n%s", want, bob.Text)
			}
		}
		if !strings.Contains(bob.HTML, "line &lt;b&gt;two&lt;/b&gt; \\u{202E}") || strings.Contains(bob.HTML, "<b>two") {
			t.Errorf("the HTML part does not show the input as escaped plain text:\n%s", bob.HTML)
		}
		for _, l := range []string{bob.Approve, bob.Reject, carolMail.Approve} {
			if !strings.HasPrefix(l, h.url+"/d/") || len(strings.TrimPrefix(l, h.url+"/d/")) != 43 {
				t.Fatalf("link %q: want %s/d/ and a 43-character token", l, h.url)
			}
		}
		if bob.Approve == carolMail.Approve || bob.Approve == bob.Reject {
			t.Fatal("two links share a token")
		}

		// The scanner: a plain GET of each link shows a page and decides
		// nothing.
		for _, l := range []string{bob.Approve, bob.Reject} {
			pg := get(t, nil, l)
			requirePage(t, "scanner GET", pg, http.StatusOK, "Nothing is decided until you press")
			if !strings.Contains(pg.body, "c_1") || !strings.Contains(pg.body, "line &lt;b&gt;two&lt;/b&gt;") {
				t.Errorf("the confirmation page lacks the input:\n%s", pg.body)
			}
		}
		h.requireUndecided("a GET", p)

		// A POST without the page's CSRF value, or with another, decides
		// nothing.
		requirePage(t, "POST without csrf", post(t, nil, bob.Approve, url.Values{}, nil), http.StatusForbidden, "Nothing was decided")
		a, b := newToken(), newToken()
		requirePage(t, "POST with another csrf", post(t, nil, bob.Approve, url.Values{"csrf": {a}},
			&http.Cookie{Name: "countersign_email_csrf", Value: b}), http.StatusForbidden, "Nothing was decided")
		requirePage(t, "POST with a csrf but no cookie", post(t, nil, bob.Approve, url.Values{"csrf": {a}}, nil), http.StatusForbidden, "Nothing was decided")
		h.requireUndecided("a forged POST", p)

		// The human: Chromium opens the link and presses Approve.
		ctx := browser(t)
		step(t, ctx, "open the approve link", chromedp.Navigate(bob.Approve), chromedp.WaitVisible(chromedp.CSS("#confirm")))
		if got := text(t, ctx, "#confirm"); got != "Approve" {
			t.Fatalf("the button says %q", got)
		}
		h.requireUndecided("opening the page in a browser", p)
		step(t, ctx, "press Approve", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#result")))
		if got := text(t, ctx, "#result"); !strings.Contains(got, "Your decision was recorded") {
			t.Fatalf("after Approve the page says %q", got)
		}
		got := h.proposal(p.ID)
		if got.Status != cstype.StatusApproved || len(got.Decisions) != 1 || got.Decisions[0].Actor != "bob" ||
			got.Decisions[0].Via != countersign.ViaEmail || got.Decisions[0].Decision != countersign.Approve {
			t.Fatalf("after the click: %s %+v, want approved by bob via email", got.Status, got.Decisions)
		}

		// Bob's other link is spent with the one he used; the same link
		// again says it was used.
		requirePage(t, "bob's reject link", get(t, nil, bob.Reject), http.StatusGone, "You already used another link of this message, to approve")
		requirePage(t, "bob's approve link again", get(t, nil, bob.Approve), http.StatusGone, "You already used this link")
		// Carol's link, after the proposal was decided elsewhere, says so
		// and decides nothing.
		requirePage(t, "carol's link", get(t, nil, carolMail.Approve), http.StatusConflict, "approved (by bob via email)")
		if got := h.proposal(p.ID); len(got.Decisions) != 1 {
			t.Fatalf("decisions %+v after the stale links", got.Decisions)
		}
	})
}

func TestQuorumOfTwoLinks(t *testing.T) {
	t.Parallel()
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, bind(t, open), harnessOptions{})
		p := h.call("payments.bulk", 500)
		bob := h.mailFor("bob@acme.example", p, 1)
		carolMail := h.mailFor("carol@acme.example", p, 1)
		if !strings.Contains(bob.Text, "(2 approvals are needed)") {
			t.Errorf("the message does not say two approvals are needed:\n%s", bob.Text)
		}
		requirePage(t, "bob approves", confirm(t, bob.Approve), http.StatusOK, "It needs 1 more approval")
		if got := h.proposal(p.ID); got.Status != cstype.StatusPending || got.Approvals() != 1 {
			t.Fatalf("after one approval: %s with %d", got.Status, got.Approvals())
		}
		// Bob's second click (a double submit) changes nothing.
		requirePage(t, "bob again", get(t, nil, bob.Approve), http.StatusGone, "You already used this link")
		requirePage(t, "carol approves", confirm(t, carolMail.Approve), http.StatusOK, "Your decision was recorded")
		got := h.proposal(p.ID)
		if got.Status != cstype.StatusApproved && got.Status != cstype.StatusExecuting && got.Status != cstype.StatusSucceeded {
			t.Fatalf("after two approvals: %s", got.Status)
		}
		if len(got.Decisions) != 2 || got.Decisions[0].Via != "email" || got.Decisions[1].Via != "email" {
			t.Fatalf("decisions %+v, want bob's and carol's via email", got.Decisions)
		}
	})
}

// TestOneOfAnApproversLinksWins: the approver opens both links and presses
// both buttons at once; one decision is recorded, the other link is spent.
func TestOneOfAnApproversLinksWins(t *testing.T) {
	t.Parallel()
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, bind(t, open), harnessOptions{})
		p := h.call("payments.bulk", 700)
		bob := h.mailFor("bob@acme.example", p, 1)
		forms := [2]form{openForm(t, bob.Approve), openForm(t, bob.Reject)}
		var wg sync.WaitGroup
		pages := make([]page, 2)
		errs := make([]error, 2)
		for i, l := range []string{bob.Approve, bob.Reject} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pages[i], errs[i] = press(forms[i].c, l, forms[i].csrf)
			}()
		}
		wg.Wait()
		won := 0
		for i, pg := range pages {
			if errs[i] != nil {
				t.Fatalf("press %d: %v", i, errs[i])
			}
			switch pg.status {
			case http.StatusOK:
				won++
			case http.StatusGone:
			default:
				t.Errorf("a concurrent press answered %d:\n%s", pg.status, pg.body)
			}
		}
		if got := h.proposal(p.ID); won != 1 || len(got.Decisions) != 1 {
			t.Fatalf("%d presses won, decisions %+v: want exactly one", won, got.Decisions)
		}
	})
}

// TestOtherLinkWinsBetweenReads: the other link's press lands after the
// page read this link as live and before it read the proposal. The page
// must say the message's other link was used (410), not that nothing is
// left to decide (409): that is the answer the concurrent presses of
// TestOneOfAnApproversLinksWins get whichever way they interleave.
func TestOtherLinkWinsBetweenReads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		action string // payments.bulk needs two approvals, so bob's leaves it pending
	}{{"still pending", "payments.bulk"}, {"decided", "payments.refund"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachDurable(t, func(t *testing.T, open teststores.Opener) {
				hook := &betweenReads{}
				h := newHarness(t, func(now func() time.Time) store.Store {
					hook.Store = open(t, now)
					return hook
				}, harnessOptions{})
				p := h.call(tc.action, 700)
				bob := h.mailFor("bob@acme.example", p, 1)
				forms := [2]form{openForm(t, bob.Approve), openForm(t, bob.Reject)}
				var approved page
				var approveErr error
				hook.arm(func() { approved, approveErr = press(forms[0].c, bob.Approve, forms[0].csrf) })
				rejected := post(t, forms[1].c, bob.Reject, url.Values{"csrf": {forms[1].csrf}}, nil)
				if !hook.fired() {
					t.Fatal("the approve press never ran between the reject press's reads")
				}
				if approveErr != nil {
					t.Fatalf("the approve press: %v", approveErr)
				}
				requirePage(t, "bob approves", approved, http.StatusOK, "Your decision was recorded")
				requirePage(t, "bob's reject, pressed meanwhile", rejected, http.StatusGone,
					"You already used another link of this message, to approve")
				if got := h.proposal(p.ID); len(got.Decisions) != 1 || got.Decisions[0].Decision != cstype.VerdictApproved {
					t.Fatalf("decisions %+v, want bob's approval alone", got.Decisions)
				}
			})
		})
	}
}

// betweenReads runs its armed function once, in the next HTTP request
// that reads an email link and then a proposal, between those two reads.
// The hook is disarmed while the function runs, so the function's own
// requests pass straight through; the worker's reads, which carry no
// server in their context, never fire it.
type betweenReads struct {
	store.Store
	mu       sync.Mutex
	next     func()
	linkRead bool
	done     bool
}

func (s *betweenReads) Unwrap() store.Store { return s.Store }

func (s *betweenReads) arm(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next, s.linkRead = f, false
}

func (s *betweenReads) fired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

func inRequest(ctx context.Context) bool { return ctx.Value(http.ServerContextKey) != nil }

func (s *betweenReads) GetEmailLink(ctx context.Context, params *store.GetEmailLinkParams) (*store.EmailLink, error) {
	if inRequest(ctx) {
		s.mu.Lock()
		s.linkRead = s.linkRead || s.next != nil
		s.mu.Unlock()
	}
	return s.Store.GetEmailLink(ctx, params)
}

func (s *betweenReads) GetProposal(ctx context.Context, params *store.GetProposalParams) (*cstype.Proposal, error) {
	var f func()
	if inRequest(ctx) {
		s.mu.Lock()
		if s.linkRead {
			f, s.next, s.linkRead, s.done = s.next, nil, false, true
		}
		s.mu.Unlock()
	}
	if f != nil {
		f()
	}
	return s.Store.GetProposal(ctx, params)
}

func TestExpiredAndForeignLinks(t *testing.T) {
	t.Parallel()
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, bind(t, open), harnessOptions{linkTTL: time.Hour})
		p := h.call("payments.refund", 80)
		bob := h.mailFor("bob@acme.example", p, 1)

		// Foreign: unknown, malformed, and paths that are no link.
		for _, l := range []string{h.url + "/d/" + newToken(), h.url + "/d/abc", h.url + "/d/" + strings.Repeat("A", 44),
			h.url + "/d/", h.url + "/d/x/y", bob.Approve + "%00"} {
			requirePage(t, "GET "+l, get(t, nil, l), http.StatusNotFound, "This link is not valid")
			requirePage(t, "POST "+l, post(t, nil, l, url.Values{"csrf": {newToken()}}, nil), http.StatusNotFound, "not valid")
		}
		// Another tenant's link is foreign too, and decides nothing there.
		eve := countersign.Identity{Tenant: "globex", Actor: "bob", Roles: []string{"finance"}, Kind: countersign.KindHuman}
		res, err := h.engine.Call(t.Context(), &countersign.Call{Identity: countersign.Identity{Tenant: "globex", Actor: "gina", Kind: countersign.KindAgent},
			ThreadID: "t1", ToolCallID: "call_g", Action: "payments.quiet", Input: []byte(`{"amount": 1, "customer": "c_g"}`)})
		if err != nil {
			t.Fatal(err)
		}
		issued, err := h.engine.IssueEmailLinks(t.Context(), &countersign.EmailLinkIssue{Tenant: "globex", ProposalID: res.Proposal.ID,
			Approver: eve, NotificationID: "ntf_globex", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		globexLink := h.url + "/d/" + issued.Tokens[countersign.Approve]
		requirePage(t, "another tenant's link", get(t, nil, globexLink), http.StatusNotFound, "This link is not valid")
		requirePage(t, "another tenant's link, posted", post(t, nil, globexLink, url.Values{"csrf": {"x"}}, &http.Cookie{Name: "countersign_email_csrf", Value: "x"}),
			http.StatusNotFound, "This link is not valid")
		if got, err := h.engine.Proposal(t.Context(), eve, res.Proposal.ID); err != nil || len(got.Decisions) != 0 {
			t.Fatalf("globex's proposal: %v %+v", err, got)
		}

		// Expired: the link lives an hour (link_ttl), the proposal a day.
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		pg := get(t, c, bob.Approve)
		csrf := csrfRE.FindStringSubmatch(pg.body)[1]
		h.clock.Advance(time.Hour)
		requirePage(t, "expired link", get(t, nil, bob.Approve), http.StatusGone, "This link expired")
		requirePage(t, "expired link, posted from its page", post(t, c, bob.Approve, url.Values{"csrf": {csrf}}, nil), http.StatusGone, "This link expired")
		h.requireUndecided("an expired link", p)
	})
}

func TestStepUpLinks(t *testing.T) {
	t.Parallel()
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		h := newHarness(t, bind(t, open), harnessOptions{})
		p := h.call("payments.wire", 20000)
		bob := h.mailFor("bob@acme.example", p, 1)
		if !strings.Contains(bob.Text, "approving needs your passkey, in the inbox: "+h.url+"/proposals/"+p.ID) {
			t.Errorf("the message does not send the approver to the inbox for the passkey:\n%s", bob.Text)
		}
		pg := get(t, nil, bob.Approve)
		requirePage(t, "step-up approve link", pg, http.StatusForbidden, "Approving needs your passkey")
		if !strings.Contains(pg.body, `href="`+h.url+"/proposals/"+p.ID+`"`) || strings.Contains(pg.body, `id="confirm"`) {
			t.Fatalf("the page should link to the inbox and offer no button:\n%s", pg.body)
		}
		v := newToken()
		requirePage(t, "step-up approve, posted", post(t, nil, bob.Approve, url.Values{"csrf": {v}}, &http.Cookie{Name: "countersign_email_csrf", Value: v}),
			http.StatusForbidden, "Approving needs your passkey")
		h.requireUndecided("an approve link of a step-up proposal", p)
		// Rejections need no passkey.
		requirePage(t, "step-up reject link", confirm(t, bob.Reject), http.StatusOK, "Your decision was recorded")
		if got := h.proposal(p.ID); got.Status != cstype.StatusRejected {
			t.Fatalf("after the reject link: %s", got.Status)
		}
	})
}

func TestSMTPFailureIsRetried(t *testing.T) {
	t.Parallel()
	eachDurable(t, func(t *testing.T, open teststores.Opener) {
		box := &emailtest.Mailbox{}
		box.Refuse(1) // bob is mailed first: his message fails once
		h := newHarness(t, bind(t, open), harnessOptions{box: box})
		p := h.call("payments.refund", 90)
		bob := h.mailFor("bob@acme.example", p, 1)
		ntf := h.awaitDelivered(1)
		if ntf[0].Attempts != 2 {
			t.Errorf("delivered after %d attempts, want 2", ntf[0].Attempts)
		}
		// The retry mailed bob, whose message had failed, and not carol,
		// whose message had gone out.
		for _, addr := range []string{"bob@acme.example", "carol@acme.example"} {
			if got := h.about(h.box.Messages(), addr, p); len(got) != 1 {
				t.Errorf("%s got %d messages, want 1", addr, len(got))
			}
		}
		requirePage(t, "the retry's link", confirm(t, bob.Approve), http.StatusOK, "Your decision was recorded")
	})
}

func TestStartTLSWithAuth(t *testing.T) {
	t.Parallel()
	tlsSrv := newTLSConfig(t)
	box := &emailtest.Mailbox{User: "mailer", Pass: "s3cret"}
	h := newHarness(t, bind(t, teststores.SQLite), harnessOptions{
		box:       box,
		configure: func(s *smtp.Server) { s.TLSConfig = tlsSrv.server },
		smtp: func(s *email.SMTP) {
			s.TLS, s.Username, s.Password = email.TLSStartTLS, "mailer", "s3cret"
			s.TLSConfig = tlsSrv.client
		},
	})
	p := h.call("payments.refund", 10)
	h.mailFor("bob@acme.example", p, 1)
	authed := box.Authed()
	if len(authed) == 0 || authed[0] != "mailer" {
		t.Fatalf("authenticated as %q, want mailer", authed)
	}
}

// newToken is a well-formed token no link has.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tlsPair is a server's TLS configuration and a client's that trusts it.
type tlsPair struct{ server, client *tls.Config }

// newTLSConfig borrows httptest's certificate (for 127.0.0.1) for the SMTP
// server, and a client configuration that trusts it.
func newTLSConfig(t *testing.T) tlsPair {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	return tlsPair{
		server: &tls.Config{Certificates: ts.TLS.Certificates, MinVersion: tls.VersionTLS12},
		client: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
	}
}
