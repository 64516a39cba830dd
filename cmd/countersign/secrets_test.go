package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testlog"
	"github.com/countersign/countersign/webhook"
)

// The secrets of the tests below, each in its own variable.
var testSecrets = map[string]string{
	"CS_T_HOOKS_SECRET":   "hooks-secret-top-0001",  // webhook_secret_env
	"CS_T_PAY_SECRET":     "pay-secret-own-0002",    // the payments actions' own
	"CS_T_NOTIFY_SECRET":  "notify-secret-one-0003", // the receiver's
	"CS_T_NOTIFY2_SECRET": "notify-secret-two-0004", // the unreachable receiver's
}

func setTestSecrets(t *testing.T) {
	for k, v := range testSecrets {
		t.Setenv(k, v)
	}
}

// signedBackend answers a webhook execute with 200 when its signature
// verifies with secret, and 401 otherwise; it records what it refused.
type signedBackend struct {
	secret []byte

	mu       sync.Mutex
	accepted []string // paths
	refused  []string
}

func (b *signedBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	err := webhook.Verify(b.secret, r.Header.Get(webhook.SignatureHeader), body, time.Now(), time.Minute)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.refused = append(b.refused, r.URL.Path)
		http.Error(w, `{"reason":"bad signature"}`, http.StatusUnauthorized)
		return
	}
	b.accepted = append(b.accepted, r.URL.Path)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"receipt":"rc_%v"}`, m["operation_id"])
}

func (b *signedBackend) seen() (accepted, refused []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.accepted...), append([]string(nil), b.refused...)
}

// notifyCapture records the notifications a receiver gets.
type notifyCapture struct {
	mu     sync.Mutex
	got    []notifyCall
	change chan struct{}
}

type notifyCall struct {
	header http.Header
	body   []byte
}

func (c *notifyCapture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.got = append(c.got, notifyCall{r.Header.Clone(), body})
	close(c.change)
	c.change = make(chan struct{})
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// first waits for the first notification. The bound is only against a hang.
func (c *notifyCapture) first(t *testing.T) notifyCall {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		n, ch := len(c.got), c.change
		c.mu.Unlock()
		if n > 0 {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.got[0]
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("no notification came")
		}
	}
}

// syncBuffer is a log destination the workers write to while the test reads.
type syncBuffer = testlog.Buffer

// secretsSetup is serve's process composed from a configuration with two
// webhook backends, a notification receiver and an unreachable one whose
// URL carries a token, running its workers, with its log captured.
type secretsSetup struct {
	base     string
	top, pay *signedBackend // verify with webhook_secret_env's secret, with the payments actions' own
	receiver *notifyCapture
	log      *syncBuffer
}

// urlToken is the token in the unreachable receiver's URL.
const urlToken = "url-t0ken-5e6f7a8b"

func newSecretsSetup(t *testing.T) *secretsSetup {
	t.Helper()
	setTestSecrets(t)
	s := &secretsSetup{
		top:      &signedBackend{secret: []byte(testSecrets["CS_T_HOOKS_SECRET"])},
		pay:      &signedBackend{secret: []byte(testSecrets["CS_T_PAY_SECRET"])},
		receiver: &notifyCapture{change: make(chan struct{})},
		log:      &syncBuffer{},
	}
	topSrv, paySrv, rcvSrv := httptest.NewServer(s.top), httptest.NewServer(s.pay), httptest.NewServer(s.receiver)
	t.Cleanup(topSrv.Close)
	t.Cleanup(paySrv.Close)
	t.Cleanup(rcvSrv.Close)
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close() // nothing listens there: every attempt is refused
	dir := t.TempDir()
	yaml := fmt.Sprintf(`store: sqlite:%s
auth:
  api_keys:
    - {key: k_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key: k_olga, tenant: acme, actor: olga, roles: [operator]}
webhook_secret_env: CS_T_HOOKS_SECRET
worker: {poll_interval: 50ms, lease: 5s}
policy:
  rules:
    - {match: "*", effect: allow}
actions:
  - name: payments.refund               # its own secret; its backend verifies with it
    webhook_secret_env: CS_T_PAY_SECRET
    execute: {url: "%s/pay/refund", timeout: 5s}
  - name: payments.void                 # its own secret; this backend verifies with the top-level one
    webhook_secret_env: CS_T_PAY_SECRET
    execute: {url: "%s/pay/void", timeout: 5s}
  - name: crm.note                      # the top-level secret
    execute: {url: "%s/crm/note", timeout: 5s}
notifications:
  - url: "%s/notify"
    events: [proposal.created, proposal.settled]
    secret_env: CS_T_NOTIFY_SECRET
  - url: "http://%s/notify?team=ops&token=%s"
    events: [proposal.created]
    secret_env: CS_T_NOTIFY2_SECRET
    timeout: 1s
    max_attempts: 1
`, filepath.Join(dir, "c.db"), paySrv.URL, topSrv.URL, topSrv.URL, rcvSrv.URL, refusedAddr, urlToken)
	path := filepath.Join(dir, "countersign.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt, err := build(context.Background(), &setupFlags{config: path}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.store.Close() })
	a, err := compose(rt, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.run(ctx, log) }()
	t.Cleanup(func() { cancel(); <-done })
	srv := httptest.NewServer(a.handler)
	t.Cleanup(srv.Close)
	s.base = srv.URL
	return s
}

// do sends an API request and decodes the JSON answer.
func (s *secretsSetup) do(t *testing.T, method, token, path, body string) (int, map[string]any, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, s.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s answered %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m, string(raw)
}

func (s *secretsSetup) call(t *testing.T, tool, action string) map[string]any {
	t.Helper()
	code, m, raw := s.do(t, "POST", "k_alice", "/v1/calls",
		`{"thread_id":"t_secrets","tool_call_id":"`+tool+`","action":"`+action+`","input":{},"wait_seconds":10}`)
	if code != http.StatusOK {
		t.Fatalf("call %s: %d %s", action, code, raw)
	}
	return m
}

// TestActionsSignWithTheirOwnSecret: an action that names its own
// webhook_secret_env signs its requests with that secret: a backend
// verifying with it accepts them, one verifying with the top-level secret
// refuses them; an action that names none signs with the top-level one.
func TestActionsSignWithTheirOwnSecret(t *testing.T) {
	s := newSecretsSetup(t)
	if got := s.call(t, "c1", "payments.refund"); got["status"] != "succeeded" {
		t.Errorf("payments.refund, verified with its own secret: %v", got)
	}
	if got := s.call(t, "c2", "payments.void"); got["status"] != "failed" || !strings.Contains(fmt.Sprint(got["error"]), "401") {
		t.Errorf("payments.void, verified with the top-level secret: %v; want failed with the backend's 401", got)
	}
	if got := s.call(t, "c3", "crm.note"); got["status"] != "succeeded" {
		t.Errorf("crm.note, verified with the top-level secret: %v", got)
	}
	if acc, ref := s.pay.seen(); len(acc) != 1 || acc[0] != "/pay/refund" || len(ref) != 0 {
		t.Errorf("the payments backend accepted %v and refused %v; want /pay/refund accepted", acc, ref)
	}
	if acc, ref := s.top.seen(); len(acc) != 1 || acc[0] != "/crm/note" || len(ref) != 1 || ref[0] != "/pay/void" {
		t.Errorf("the top-level backend accepted %v and refused %v; want /crm/note accepted, /pay/void refused", acc, ref)
	}
}

// TestNotificationSignatureIsNotTheWebhooks: a notification is signed with
// its target's own secret. Verified with a webhook secret, its signature
// fails, and what its receiver signs with the secret it holds is refused by
// every backend: a receiver cannot forge an execute request.
func TestNotificationSignatureIsNotTheWebhooks(t *testing.T) {
	s := newSecretsSetup(t)
	s.call(t, "c1", "crm.note")
	n := s.receiver.first(t)
	sig := n.header.Get(webhook.SignatureHeader)
	if err := webhook.Verify([]byte(testSecrets["CS_T_NOTIFY_SECRET"]), sig, n.body, time.Now(), 0); err != nil {
		t.Fatalf("the notification's signature does not verify with its target's secret: %v", err)
	}
	for _, env := range []string{"CS_T_HOOKS_SECRET", "CS_T_PAY_SECRET", "CS_T_NOTIFY2_SECRET"} {
		if err := webhook.Verify([]byte(testSecrets[env]), sig, n.body, time.Now(), 0); err == nil {
			t.Errorf("the notification's signature verifies with %s", env)
		}
	}
	// The receiver turned forger: an execute body signed with its secret,
	// sent to each backend.
	forged := []byte(`{"operation_id":"op_forged","proposal_id":"","action":"crm.note","action_version":"1","input":{},"state_version":"","tenant":"acme","actor":"alice","attempt":1}`)
	for _, b := range []*signedBackend{s.top, s.pay} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/crm/note", bytes.NewReader(forged))
		req.Header.Set(webhook.SignatureHeader, webhook.Sign([]byte(testSecrets["CS_T_NOTIFY_SECRET"]), time.Now(), forged))
		b.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("a backend accepted an execute signed with the receiver's secret: %d", rec.Code)
		}
	}
}

// TestURLTokensHiddenFromOperatorsAndLogs: a receiver whose URL carries a
// token fails; GET /v1/notifications shows why, with the URL's query values
// redacted, and the log never holds the token.
func TestURLTokensHiddenFromOperatorsAndLogs(t *testing.T) {
	s := newSecretsSetup(t)
	s.call(t, "c1", "crm.note")
	var failed []any
	var raw string
	for deadline := time.Now().Add(60 * time.Second); len(failed) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no failed notification; log:\n%s", s.log.String())
		}
		var m map[string]any
		_, m, raw = s.do(t, "GET", "k_olga", "/v1/notifications?status=failed", "")
		failed, _ = m["notifications"].([]any)
		time.Sleep(20 * time.Millisecond)
	}
	lastError, _ := failed[0].(map[string]any)["last_error"].(string)
	if !strings.Contains(lastError, "connection refused") {
		t.Errorf("last_error %q does not say what went wrong", lastError)
	}
	if strings.Contains(raw, urlToken) {
		t.Errorf("the notifications answer holds the URL's token: %s", raw)
	}
	logs := s.log.String()
	if !strings.Contains(logs, "attempt failed") {
		t.Fatalf("the failure was not logged:\n%s", logs)
	}
	if strings.Contains(logs, urlToken) {
		t.Errorf("the log holds the URL's token:\n%s", logs)
	}
}

// cliEnv runs the command with extra environment variables (NAME=value)
// and returns its output and exit code.
func cliEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return string(out), 0
}

// TestSecretsRefusedAtStart: `config validate` and `serve` refuse, naming
// the field and its line, a notification target without its own secret —
// no secret_env, an unset variable, a value another secret holds — and an
// action's own secret that is the top-level one's; --no-env checks the file
// alone. No message holds a secret.
func TestSecretsRefusedAtStart(t *testing.T) {
	t.Parallel()
	const head = `auth:
  api_keys:
    - {key: ck_live_alice_77, tenant: acme, actor: alice}
webhook_secret_env: CS_V_HOOKS
actions:
  - name: payments.refund
    webhook_secret_env: CS_V_PAY
    execute: {url: "http://127.0.0.1:9100/pay"}
  - name: crm.note
    execute: {url: "http://127.0.0.1:9100/crm"}
notifications:
`
	const target = "  - {url: \"https://hooks.internal/n?token=qs-9c8b\", events: [proposal.created]"
	good := []string{"CS_V_HOOKS=hooks-v-1", "CS_V_PAY=pay-v-2", "CS_V_NOTIFY=notify-v-3"}
	tests := []struct {
		name   string
		entry  string
		env    []string
		want   string // "" for valid
		noEnv  string // what --no-env says: "" for valid
		secret string // a value no message may hold
	}{
		{"own secret", target + ", secret_env: CS_V_NOTIFY}\n", good, "", "", ""},
		{"no secret_env", target + "}\n", good,
			"countersign.yaml:13: notifications[0].secret_env: is required", "notifications[0].secret_env: is required", ""},
		{"the webhook secret's variable", target + ", secret_env: CS_V_HOOKS}\n", good,
			"countersign.yaml:13: notifications[0].secret_env: CS_V_HOOKS is also webhook_secret_env (line 5)", "is also webhook_secret_env", ""},
		{"variable unset", target + ", secret_env: CS_V_NOTIFY}\n", []string{"CS_V_HOOKS=hooks-v-1", "CS_V_PAY=pay-v-2", "CS_V_NOTIFY="},
			"countersign.yaml:13: notifications[0].secret_env: environment variable CS_V_NOTIFY is empty or unset", "", ""},
		{"the webhook secret's value", target + ", secret_env: CS_V_NOTIFY}\n", []string{"CS_V_HOOKS=same-4", "CS_V_PAY=pay-v-2", "CS_V_NOTIFY=same-4"},
			"countersign.yaml:13: notifications[0].secret_env: environment variable CS_V_NOTIFY (notifications[0].secret_env) holds the same value as environment variable CS_V_HOOKS (webhook_secret_env) (line 5)", "", "same-4"},
		{"an action's value", target + ", secret_env: CS_V_NOTIFY}\n", []string{"CS_V_HOOKS=hooks-v-1", "CS_V_PAY=same-5", "CS_V_NOTIFY=same-5"},
			"holds the same value as environment variable CS_V_PAY (actions[0].webhook_secret_env) (line 8)", "", "same-5"},
		{"an API key", target + ", secret_env: CS_V_NOTIFY}\n", []string{"CS_V_HOOKS=hooks-v-1", "CS_V_PAY=pay-v-2", "CS_V_NOTIFY=ck_live_alice_77"},
			"holds the same value as auth.api_keys[0] (line 4)", "", "ck_live_alice_77"},
		{"an action's own secret is the top-level one", target + ", secret_env: CS_V_NOTIFY}\n", []string{"CS_V_HOOKS=same-6", "CS_V_PAY=same-6", "CS_V_NOTIFY=notify-v-3"},
			"countersign.yaml:8: actions[0].webhook_secret_env: environment variable CS_V_PAY (actions[0].webhook_secret_env) holds the same value as environment variable CS_V_HOOKS (webhook_secret_env) (line 5)", "", "same-6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "countersign.yaml")
			// The store is line 1: the lines the cases name count it.
			yaml := "store: sqlite:" + filepath.Join(dir, "c.db") + "\n" + head + tt.entry
			if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			check := func(what, out string, code int, want string) {
				t.Helper()
				if want == "" {
					if code != 0 {
						t.Errorf("%s: exit %d\n%s", what, code, out)
					}
					return
				}
				if code != exitUsage || !strings.Contains(out, want) {
					t.Errorf("%s: exit %d, %q\nwant exit %d and %q", what, code, out, exitUsage, want)
				}
				if tt.secret != "" && strings.Contains(out, tt.secret) {
					t.Errorf("%s repeats a secret: %s", what, out)
				}
				if strings.Contains(out, "qs-9c8b") {
					t.Errorf("%s repeats the URL's token: %s", what, out)
				}
			}
			out, code := cliEnv(t, tt.env, "config", "validate", path)
			check("config validate", out, code, tt.want)
			if tt.want != "" {
				// serve stops before it opens the store or listens.
				out, code = cliEnv(t, tt.env, "serve", "--config", path, "--listen", "127.0.0.1:0")
				check("serve", out, code, tt.want)
			}
			out, code = cliEnv(t, tt.env, "config", "validate", "--no-env", path)
			check("config validate --no-env", out, code, tt.noEnv)
		})
	}
}
