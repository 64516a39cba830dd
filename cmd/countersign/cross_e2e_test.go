package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/channels/email/emailtest"
	"github.com/countersign/countersign/channels/slack/slacktest"
	"github.com/countersign/countersign/cstype"
)

// docsBothConfig is docs/channels.md's "Both channels on one rule" set-up,
// as written, with its three ports moved to the test's fakes and server.
func docsBothConfig(t *testing.T, publicURL, slackAPI string, smtpPort int) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/channels.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Both channels on one rule\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/channels.md has no yaml block under ## Both channels on one rule")
	}
	for _, s := range []string{"http://127.0.0.1:8080", "http://127.0.0.1:9090/api/", "port: 2525"} {
		if !strings.Contains(block, s) {
			t.Fatalf("the documented set-up no longer holds %q; adjust this test:\n%s", s, block)
		}
	}
	block = strings.Replace(block, "http://127.0.0.1:8080", publicURL, 1)
	block = strings.Replace(block, "http://127.0.0.1:9090/api/", slackAPI, 1)
	return strings.Replace(block, "port: 2525", fmt.Sprintf("port: %d", smtpPort), 1)
}

// TestQuorumAcrossSlackAndEmail: serve, configured with docs/channels.md's
// set-up of both channels on one rule of quorum 2, reaches the quorum with
// one Slack click (bob) and one email link (carol), on SQLite and
// PostgreSQL. The click leaves the proposal pending with one approval and
// every Slack message showing the progress; opening carol's link decides
// nothing; pressing its button approves the proposal, which executes once,
// and every Slack message is updated with no button left. The decisions
// record via "slack" and via "email", and the requester, mapped on both
// channels, got neither a direct message nor a mail. Not parallel: it sets
// environment variables.
func TestQuorumAcrossSlackAndEmail(t *testing.T) {
	for _, s := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "c.db") }},
		{"postgres", pgStoreURL},
	} {
		t.Run(s.name, func(t *testing.T) { quorumAcrossSlackAndEmail(t, s.store(t)) })
	}
}

func quorumAcrossSlackAndEmail(t *testing.T, storeURL string) {
	const (
		botToken = "xoxb-cross-test"
		secret   = "cross-test-signing-secret"
	)
	t.Setenv("SLACK_BOT_TOKEN", botToken)
	t.Setenv("SLACK_SIGNING_SECRET", secret)
	t.Setenv("E2E_CROSS_WEBHOOK_SECRET", "webhook-secret-of-the-cross-test")
	fake := slacktest.NewServer(t, botToken)
	box := &emailtest.Mailbox{}
	smtpPort := emailtest.Serve(t, box, nil)
	var executed atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		executed.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"receipt":"rf_1"}`)
	}))
	t.Cleanup(backend.Close)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + hl.Addr().String()

	dir := t.TempDir()
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, kind: agent}
webhook_secret_env: E2E_CROSS_WEBHOOK_SECRET
worker: {poll_interval: 50ms}
actions:
  - name: payments.refund
    input_schema: {type: object, properties: {amount: {type: number}, customer: {type: string}}}
    execute: {url: %s/execute}
`, storeURL, backend.URL) + docsBothConfig(t, public, fake.APIURL(), smtpPort)
	path := filepath.Join(dir, "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ := composeRunning(t, path)
	ts := httptest.NewUnstartedServer(a.handler)
	ts.Listener.Close()
	ts.Listener = hl
	ts.Start()
	t.Cleanup(ts.Close)

	// alice's agent asks for a refund (the rule's mode is wait: its call
	// again runs the approved refund); it waits a second, not the default
	// 25, for a decision.
	call := func() string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/calls", strings.NewReader(
			`{"thread_id":"t1","tool_call_id":"c1","action":"payments.refund","input":{"amount":5,"customer":"c_1"},"wait_seconds":1}`))
		req.Header.Set("Authorization", "Bearer key_alice")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/calls: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	call()
	engine := a.rt.engine
	carol := countersign.Identity{Tenant: "acme", Actor: "carol", Roles: []string{"finance"}, Kind: countersign.KindHuman}
	var pid string
	await(t, "the call's proposal", func() bool {
		page, err := engine.List(t.Context(), carol, countersign.ListParams{Statuses: []cstype.Status{cstype.StatusPending}})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Proposals) == 1 {
			pid = page.Proposals[0].ID
		}
		return pid != ""
	})
	proposal := func() *cstype.Proposal {
		p, err := engine.Proposal(t.Context(), carol, pid)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Both approvers get a direct message with buttons and a mail.
	dm := func(user string, cond func(slacktest.Message) bool) slacktest.Message {
		t.Helper()
		var got slacktest.Message
		await(t, "the direct message to "+user, func() bool {
			msgs := fake.Sent(user)
			if len(msgs) > 1 {
				t.Fatalf("%d messages to %s, want one", len(msgs), user)
			}
			if len(msgs) == 1 && cond(msgs[0]) {
				got = msgs[0]
				return true
			}
			return false
		})
		return got
	}
	live := func(m slacktest.Message) bool {
		b := m.Buttons()
		_, approve := b["countersign_approve"]
		_, reject := b["countersign_reject"]
		return approve || reject
	}
	bobDM := dm("U0BOB", live)
	dm("U0CAROL", live)
	box.Await(t, "a mail to bob and to carol", func(msgs []emailtest.Message) bool {
		return len(box.To("bob@acme.example")) == 1 && len(box.To("carol@acme.example")) == 1
	})

	// bob approves in Slack: one approval of two, and the messages say so.
	body := slacktest.FormBody(slacktest.Payload("T0ACME", "A0COUNTER", "U0BOB", fake.ResponseURL("bob"), bobDM.Buttons()["countersign_approve"]))
	click, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/slack/interactions", strings.NewReader(body))
	click.Header = slacktest.Sign(body, time.Now(), []byte(secret))
	resp, err := http.DefaultClient.Do(click)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's click: %d, want 200", resp.StatusCode)
	}
	if p := proposal(); p.Status != cstype.StatusPending || p.Approvals() != 1 {
		t.Fatalf("after bob's click: %s with %d approvals, want pending with 1", p.Status, p.Approvals())
	}
	for _, user := range []string{"U0BOB", "U0CAROL"} {
		dm(user, func(m slacktest.Message) bool { return strings.Contains(m.Shown(), "Waiting for approval: 1 of 2") })
	}

	// carol's mail: opening the link decides nothing; its button does.
	mail := emailtest.Parse(t, box.To("carol@acme.example")[0])
	if !strings.HasPrefix(mail.Approve, ts.URL+"/d/") {
		t.Fatalf("carol's approve link %q is not under public_url %s", mail.Approve, ts.URL)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	human := &http.Client{Jar: jar}
	page := fetch(t, human, http.MethodGet, mail.Approve, nil)
	if p := proposal(); p.Status != cstype.StatusPending || p.Approvals() != 1 {
		t.Fatalf("after opening carol's link: %s with %d approvals; a GET must decide nothing", p.Status, p.Approvals())
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form on carol's link's page:\n%s", page)
	}
	if page := fetch(t, human, http.MethodPost, mail.Approve, url.Values{"csrf": {m[1]}}); !strings.Contains(page, "Your decision was recorded") {
		t.Fatalf("carol's confirmation:\n%s", page)
	}

	// Approved by one click and one link; the agent's call again runs it,
	// once.
	if p := proposal(); p.Status != cstype.StatusApproved {
		t.Fatalf("after carol's confirmation: %s, want approved", p.Status)
	}
	if n := executed.Load(); n != 0 {
		t.Fatalf("the refund ran %d times before the agent called again", n)
	}
	again := call()
	await(t, "the refund to succeed after the call again answered "+again, func() bool { return proposal().Status == cstype.StatusSucceeded })
	call() // a repeat replays the outcome
	p := proposal()
	var via []string
	for _, d := range p.Decisions {
		via = append(via, d.Actor+" "+string(d.Decision)+" via "+d.Via)
	}
	slices.Sort(via)
	if want := []string{"bob approved via slack", "carol approved via email"}; !slices.Equal(via, want) {
		t.Fatalf("decisions %q, want %q", via, want)
	}
	if n := executed.Load(); n != 1 {
		t.Fatalf("the refund ran %d times, want once", n)
	}
	// Every Slack message shows the outcome, with no button left.
	for _, user := range []string{"U0BOB", "U0CAROL"} {
		dm(user, func(m slacktest.Message) bool { return !live(m) && strings.Contains(m.Shown(), "succeeded") })
	}
	// The requester, mapped on both channels, got neither.
	if got := fake.Sent("U0ALICE"); len(got) != 0 {
		t.Fatalf("the requester got %d Slack messages", len(got))
	}
	if got := box.To("alice@acme.example"); len(got) != 0 {
		t.Fatalf("the requester got %d mails", len(got))
	}
	if n := executed.Load(); n != 1 {
		t.Fatalf("the refund ran %d times, want once", n)
	}
}

// fetch sends a GET, or a POST of form, with c and returns the page; a
// status other than 200 fails t.
func fetch(t *testing.T, c *http.Client, method, link string, form url.Values) string {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, link, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d\n%s", method, link, resp.StatusCode, b)
	}
	return string(b)
}

// await polls cond every 10 ms until it holds, failing t after 30 s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
