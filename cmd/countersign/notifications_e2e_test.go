package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/webhook"
)

// notifyReceiver answers notifications as its mode says: "fail" (503),
// "hang" (holds the request until the sender gives up) or "accept" (204),
// and records each request's Idempotency-Key, body and answer.
type notifyReceiver struct {
	t      *testing.T
	secret []byte

	mu     sync.Mutex
	mode   string
	got    []notifyRequest
	change chan struct{} // closed and replaced on every request
}

type notifyRequest struct {
	key, mode string
	body      map[string]any
}

func (rc *notifyReceiver) setMode(m string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.mode = m
}

func (rc *notifyReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/notify" {
		w.WriteHeader(http.StatusNotFound) // the refund's execute is not what this test is about
		return
	}
	b, _ := io.ReadAll(r.Body)
	if err := webhook.Verify(rc.secret, r.Header.Get(webhook.SignatureHeader), b, time.Now(), 0); err != nil {
		rc.t.Errorf("notification signature: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		rc.t.Errorf("notification body %s: %v", b, err)
	}
	rc.mu.Lock()
	mode := rc.mode
	rc.got = append(rc.got, notifyRequest{key: r.Header.Get("Idempotency-Key"), mode: mode, body: body})
	close(rc.change)
	rc.change = make(chan struct{})
	rc.mu.Unlock()
	switch mode {
	case "fail":
		w.WriteHeader(http.StatusServiceUnavailable)
	case "hang":
		<-r.Context().Done()
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// waitFor returns once cond holds of the requests received, re-checking
// after each new one. The bound is only against a hang.
func (rc *notifyReceiver) waitFor(t *testing.T, what string, cond func([]notifyRequest) bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		rc.mu.Lock()
		ok, ch := cond(rc.got), rc.change
		rc.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("gave up waiting for %s; received %+v", what, rc.got)
		}
	}
}

func countKey(rs []notifyRequest, key, mode string) int {
	n := 0
	for _, r := range rs {
		if r.key == key && (mode == "" || r.mode == mode) {
			n++
		}
	}
	return n
}

// testNotificationsSurviveKill runs the outbox end to end on the real
// binary: a notification whose attempts are spent is failed and listed by
// the CLI for an operator only; a process is killed with SIGKILL while a
// delivery is in flight; the next process delivers it again, with the same
// Idempotency-Key, and the operator's retry (CLI) delivers the failed one.
func testNotificationsSurviveKill(t *testing.T, storeURL string) {
	secret := "s3cret-for-the-notifications-e2e-test"
	rc := &notifyReceiver{t: t, secret: []byte(secret), mode: "fail", change: make(chan struct{})}
	ts := httptest.NewServer(rc)
	defer ts.Close()
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key: key_bob, tenant: acme, actor: bob, roles: [finance]}
    - {key: key_olga, tenant: acme, actor: olga, roles: [operator]}
webhook_secret_env: E2E_WEBHOOK_SECRET
worker: {poll_interval: 50ms, lease: 5s}
policy:
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance"], mode: independent}
actions:
  - name: payments.refund
    input_schema: {type: object, required: [amount, customer], additionalProperties: false,
                   properties: {amount: {type: number, exclusiveMinimum: 0}, customer: {type: string}}}
    execute: {url: %s/execute, timeout: 5s}
notifications:
  - url: %s/notify
    events: [proposal.created]
    secret_env: E2E_NOTIFY_SECRET
    timeout: 1s
    max_attempts: 2
    backoff: {initial: 50ms, max: 50ms}
`, storeURL, ts.URL, ts.URL)
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("E2E_NOTIFY_SECRET", secret)
	// The refund's backend is not what this test is about; its secret
	// must differ from the receiver's all the same.
	t.Setenv("E2E_WEBHOOK_SECRET", "webhook-secret-of-the-notifications-e2e-test")

	first := startServer(t, "--config", path)
	as := func(s *running, key string, args ...string) []string {
		return append(args, "--token", key, "--server", s.base)
	}
	refund := func(s *running, call string) string {
		t.Helper()
		ans := post(t, s.base, "key_alice", "/v1/calls",
			`{"thread_id":"t_n","tool_call_id":"`+call+`","action":"payments.refund","input":{"amount":5,"customer":"c_1"}}`)
		pid, _ := ans["proposal_id"].(string)
		if pid == "" {
			t.Fatalf("no proposal id in %v", ans)
		}
		return pid
	}

	// The first proposal's notification fails twice and is failed.
	p1 := refund(first, "c1")
	var n1 string
	rc.waitFor(t, "two failed attempts", func(rs []notifyRequest) bool {
		if len(rs) > 0 {
			n1 = rs[0].key
		}
		return len(rs) == 2
	})
	if !strings.HasPrefix(n1, "ntf_") || countKey(rc.got, n1, "fail") != 2 {
		t.Fatalf("attempts: %+v", rc.got)
	}
	if p, _ := rc.got[0].body["proposal"].(map[string]any); rc.got[0].body["id"] != n1 || rc.got[0].body["type"] != "proposal.created" || p["id"] != p1 {
		t.Fatalf("body %v does not announce %s", rc.got[0].body, p1)
	}
	var listed string
	for !strings.Contains(listed, n1) { // the second attempt's record may not have committed yet
		out, code := cli(t, as(first, "key_olga", "notifications", "list", "--status", "failed")...)
		if code != 0 {
			t.Fatalf("notifications list: exit %d\n%s", code, out)
		}
		listed = out
	}
	if !strings.Contains(listed, "failed") || !strings.Contains(listed, p1) || !strings.Contains(listed, "proposal.created") {
		t.Fatalf("notifications list:\n%s", listed)
	}
	for _, key := range []string{"key_alice", "key_bob"} {
		if out, code := cli(t, as(first, key, "notifications", "list")...); code != exitForbidden {
			t.Errorf("%s lists notifications: exit %d\n%s", key, code, out)
		}
		if out, code := cli(t, as(first, key, "notifications", "retry", n1)...); code != exitForbidden {
			t.Errorf("%s retries a notification: exit %d\n%s", key, code, out)
		}
	}
	if out, code := cli(t, as(first, "key_olga", "notifications", "retry", "ntf_0_nope")...); code != exitNotFound {
		t.Errorf("retry an unknown notification: exit %d\n%s", code, out)
	}

	// The second proposal's notification is in flight when the process dies.
	rc.setMode("hang")
	refund(first, "c2")
	var n2 string
	rc.waitFor(t, "the second notification in flight", func(rs []notifyRequest) bool {
		for _, r := range rs {
			if r.mode == "hang" {
				n2 = r.key
			}
		}
		return n2 != ""
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.read

	// The next process delivers it once its lease runs out, with the same
	// key; the operator's retry sends the failed one again.
	rc.setMode("accept")
	second := startServer(t, "--config", path)
	if out, code := cli(t, as(second, "key_olga", "notifications", "retry", n1)...); code != 0 || !strings.Contains(out, n1) {
		t.Fatalf("notifications retry: exit %d\n%s", code, out)
	}
	if out, code := cli(t, as(second, "key_olga", "notifications", "retry", n1)...); code != exitRefused {
		t.Errorf("a second retry: exit %d\n%s", code, out)
	}
	rc.waitFor(t, "both notifications accepted", func(rs []notifyRequest) bool {
		return countKey(rs, n1, "accept") == 1 && countKey(rs, n2, "accept") == 1
	})
	for {
		out, code := cli(t, as(second, "key_olga", "notifications", "list", "--status", "delivered", "--json")...)
		var page struct {
			Notifications []struct {
				ID string `json:"id"`
			} `json:"notifications"`
		}
		if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil {
			t.Fatalf("notifications list --json: exit %d, %v\n%s", code, err, out)
		}
		if len(page.Notifications) == 2 {
			break
		}
	}
}

func TestNotificationsSurviveKillOnSQLite(t *testing.T) {
	testNotificationsSurviveKill(t, "sqlite:"+filepath.Join(t.TempDir(), "notify.db"))
}

func TestNotificationsSurviveKillOnPostgreSQL(t *testing.T) {
	testNotificationsSurviveKill(t, pgStoreURL(t))
}
