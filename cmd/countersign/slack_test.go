package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// slackConfig is the Slack part of docs/channels.md's working
// configuration, on a store of the test's own.
const slackConfig = `store: sqlite:%s
public_url: https://countersign.acme.example
auth:
  api_keys:
    - {key: ck_dev_bob, tenant: acme, actor: bob, roles: [finance], kind: human}
channels:
  slack:
    tenant: acme
    team_id: T0ACME
    bot_token_env: SLACK_BOT_TOKEN
    signing_secret_env: SLACK_SIGNING_SECRET
    api_url: http://127.0.0.1:9/api/
    users: {bob: {slack_id: U0BOB, roles: [finance]}, carol: {slack_id: U0CAROL, roles: [finance]}}
    post: dm
policy:
  rules:
    - match: "payments.*"
      approvers: ["role:finance"]
      notify: [slack]
`

// TestSlackRouteMounted: with channels.slack, serve mounts POST
// /v1/slack/interactions (an unsigned request is 401 there) and builds the
// channel from the environment; without it the route is the API's JSON 404.
func TestSlackRouteMounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	cfg := strings.Replace(slackConfig, "%s", filepath.Join(t.TempDir(), "c.db"), 1)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-test")
	t.Setenv("SLACK_SIGNING_SECRET", "signing-secret")
	a, _ := composeRunningWith(t, &setupFlags{config: path})
	if a.rt.slack == nil {
		t.Fatal("channels.slack configured, no channel built")
	}
	demo, _ := composeRunningWith(t, &setupFlags{store: "sqlite:" + filepath.Join(t.TempDir(), "d.db")})
	for _, c := range []struct {
		name    string
		handler http.Handler
		method  string
		status  int
		holds   string
	}{
		{"configured, unsigned", a.handler, http.MethodPost, http.StatusUnauthorized, "X-Slack-Request-Timestamp"},
		{"configured, GET", a.handler, http.MethodGet, http.StatusNotFound, `"error"`},
		{"not configured", demo.handler, http.MethodPost, http.StatusNotFound, `"error"`},
	} {
		rec := httptest.NewRecorder()
		c.handler.ServeHTTP(rec, httptest.NewRequest(c.method, "/v1/slack/interactions", strings.NewReader("payload=%7B%7D")))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != c.status || !strings.Contains(string(body), c.holds) || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Errorf("%s: %d %s %s; want %d, JSON holding %q", c.name, rec.Code, rec.Header().Get("Content-Type"), body, c.status, c.holds)
		}
	}
}
