package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// inbox is an SMTP server's backend that keeps every message.
type inbox struct {
	mu   sync.Mutex
	msgs []string
}

func (b *inbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &inboxSession{b: b}, nil }

func (b *inbox) all() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.msgs...)
}

type inboxSession struct {
	b  *inbox
	to []string
}

func (s *inboxSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *inboxSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *inboxSession) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.msgs = append(s.b.msgs, "To: "+strings.Join(s.to, ",")+"\n"+string(raw))
	return nil
}
func (s *inboxSession) Reset()        { s.to = nil }
func (s *inboxSession) Logout() error { return nil }

// docsEmailConfig is the email set-up of docs/channels.md, as written,
// with only its two ports moved to free ones.
func docsEmailConfig(t *testing.T, publicPort, smtpPort int) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/channels.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Email\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/channels.md has no yaml block under ## Email")
	}
	if !strings.Contains(block, "127.0.0.1:8080") || !strings.Contains(block, "port: 2525") {
		t.Fatalf("the documented set-up changed; adjust this test:\n%s", block)
	}
	block = strings.Replace(block, "127.0.0.1:8080", fmt.Sprintf("127.0.0.1:%d", publicPort), 1)
	return strings.Replace(block, "port: 2525", fmt.Sprintf("port: %d", smtpPort), 1)
}

// TestEmailChannelAsDocumented: serve, configured with docs/channels.md's
// email set-up, mails the approvers (never the requester) of a refund
// through the outbox, and serves the link's confirmation page under
// public_url; without channels.email, /d/ is the inbox's 404. Not
// parallel: it sets an environment variable.
func TestEmailChannelAsDocumented(t *testing.T) {
	box := &inbox{}
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(sl) }()
	t.Cleanup(func() { _ = srv.Close() })
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"receipt":{"id":"rf_1"}}`)
	}))
	t.Cleanup(backend.Close)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`store: sqlite:%s
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, kind: agent}
    - {key: key_bob, tenant: acme, actor: bob, roles: [finance], kind: human}
webhook_secret_env: E2E_EMAIL_WEBHOOK_SECRET
worker: {poll_interval: 50ms}
actions:
  - name: payments.refund
    input_schema: {type: object, properties: {amount: {type: number}, customer: {type: string}}}
    execute: {url: %s/execute}
`, filepath.Join(dir, "c.db"), backend.URL) + docsEmailConfig(t, hl.Addr().(*net.TCPAddr).Port, sl.Addr().(*net.TCPAddr).Port)
	path := filepath.Join(dir, "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_EMAIL_WEBHOOK_SECRET", "webhook-secret-of-the-email-e2e-test")
	a, _ := composeRunning(t, path)
	ts := httptest.NewUnstartedServer(a.handler)
	ts.Listener.Close()
	ts.Listener = hl
	ts.Start()
	t.Cleanup(ts.Close)

	req, _ := http.NewRequest("POST", ts.URL+"/v1/calls", strings.NewReader(
		`{"thread_id":"t1","tool_call_id":"c1","action":"payments.refund","input":{"amount":5,"customer":"c_1"}}`))
	req.Header.Set("Authorization", "Bearer key_alice")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var msgs []string
	for deadline := time.Now().Add(30 * time.Second); len(msgs) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the approvers were not mailed: %d messages", len(msgs))
		}
		msgs = box.all()
	}
	for _, m := range msgs {
		if strings.Contains(m, "alice@acme.example") {
			t.Fatalf("the requester was mailed:\n%s", m)
		}
	}
	link := regexp.MustCompile(`Approve: (http://[^\s]+)`).FindStringSubmatch(strings.ReplaceAll(msgs[0], "=\r\n", ""))
	if link == nil || !strings.HasPrefix(link[1], ts.URL+"/d/") {
		t.Fatalf("no approve link under %s in:\n%s", ts.URL, msgs[0])
	}
	page, err := http.Get(link[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(string(body), "Nothing is decided until you press") {
		t.Fatalf("the link's page: %d\n%s", page.StatusCode, body)
	}

	// Without channels.email, /d/ is nobody's: the inbox answers 404.
	plain, _ := composeRunningWith(t, &setupFlags{store: "sqlite:" + filepath.Join(t.TempDir(), "d.db")})
	rec := httptest.NewRecorder()
	plain.handler.ServeHTTP(rec, httptest.NewRequest("GET", "/d/"+strings.Repeat("A", 43), nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("GET /d/… without the channel: %d, want 404", rec.Code)
	}
}
