package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// apiNotifications is docs/api.md's notifications section.
const apiNotifications = `notifications:
  - url: https://hooks.internal/countersign
    events: [proposal.created, proposal.decided, proposal.settled, proposal.expired, proposal.escalated, proposal.reminder]
    secret_env: NOTIFY_SECRET       # signed like webhooks: Countersign-Signature
    timeout: 5s
    max_attempts: 10
    backoff: {initial: 1s, max: 10m}   # doubling between attempts
  - url: http://127.0.0.1:9300/n?team=ops
    events: [proposal.settled]
    secret_env: NOTIFY_OPS_SECRET
`

func TestNotifications(t *testing.T) {
	t.Parallel()
	c := parseOK(t, apiNotifications)
	want := []Notification{
		{URL: "https://hooks.internal/countersign",
			Events:    []string{"proposal.created", "proposal.decided", "proposal.settled", "proposal.expired", "proposal.escalated", "proposal.reminder"},
			SecretEnv: "NOTIFY_SECRET", Timeout: 5 * time.Second, MaxAttempts: 10, BackoffInitial: time.Second, BackoffMax: 10 * time.Minute},
		// Everything but url, events and secret_env has a default.
		{URL: "http://127.0.0.1:9300/n?team=ops", Events: []string{"proposal.settled"}, SecretEnv: "NOTIFY_OPS_SECRET",
			Timeout: DefaultNotificationTimeout, MaxAttempts: DefaultNotificationMaxAttempts,
			BackoffInitial: DefaultNotificationBackoff, BackoffMax: DefaultNotificationBackoffMax},
	}
	if !reflect.DeepEqual(c.Notifications, want) {
		t.Fatalf("notifications parsed to\n%+v\nwant\n%+v", c.Notifications, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate after Parse: %v", err)
	}
	if c := parseOK(t, ""); len(c.Notifications) != 0 {
		t.Fatalf("no section: %+v", c.Notifications)
	}
}

func TestNotificationSecret(t *testing.T) {
	c := parseOK(t, apiNotifications)
	t.Setenv("NOTIFY_SECRET", "n-secret")
	t.Setenv("NOTIFY_OPS_SECRET", "")
	t.Setenv(c.WebhookSecretEnv, "w-secret")
	if s, err := c.NotificationSecret(0); err != nil || string(s) != "n-secret" {
		t.Fatalf("secret_env: %q, %v", s, err)
	}
	// Never the webhook secret, even when set: an unset variable is an error.
	if s, err := c.NotificationSecret(1); !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "NOTIFY_OPS_SECRET (named by notifications[1].secret_env)") {
		t.Fatalf("unset: %q, %v", s, err)
	}
	// A configuration built in code without a secret_env has no secret.
	c.Notifications[0].SecretEnv = ""
	if s, err := c.NotificationSecret(0); !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "notifications[0].secret_env is empty") {
		t.Fatalf("no secret_env: %q, %v", s, err)
	}
}

func TestNotificationsInvalid(t *testing.T) {
	t.Parallel()
	// Each entry gets a secret_env unless it names one: the cases test
	// one problem each.
	entry := func(body string) string {
		if strings.HasPrefix(body, "{") && !strings.Contains(body, "secret_env") {
			body = "{secret_env: NOTIFY_A, " + body[1:]
		}
		return "notifications:\n  - " + body + "\n"
	}
	const ev = "events: [proposal.created]"
	tests := []struct {
		name   string
		yaml   string
		line   int
		reason string
	}{
		{"not a list", "notifications: {url: x}\n", 1, "notifications: want a list, not a mapping"},
		{"entry not mapping", entry("https://h/x"), 2, `notifications[0]: want a mapping, not the string "https://h/x"`},
		{"unknown key", entry("{url: \"https://h/x\", " + ev + ", retries: 3}"), 2, `unknown key "retries" in notifications[0] (want url, events, secret_env, timeout, max_attempts, backoff)`},
		{"url missing", entry("{" + ev + "}"), 2, "notifications[0].url: is required"},
		{"url relative", entry("{url: /x, " + ev + "}"), 2, "notifications[0].url: want an absolute http:// or https:// URL"},
		{"url scheme", entry("{url: \"file:///etc/passwd\", " + ev + "}"), 2, "want an absolute http:// or https:// URL"},
		{"url javascript", entry("{url: \"javascript:alert(1)\", " + ev + "}"), 2, "want an absolute http:// or https:// URL"},
		{"url fragment", entry("{url: \"https://h/x#y\", " + ev + "}"), 2, "without a #fragment"},
		{"url credentials", entry("{url: \"https://u:p@h/x\", " + ev + "}"), 2, "notifications[0].url: must not hold credentials"},
		{"url junk", entry("{url: \"http://[::1\", " + ev + "}"), 2, "notifications[0].url: want an absolute"},
		{"url number", entry("{url: 1, " + ev + "}"), 2, "notifications[0].url: want a string, not the integer 1"},
		{"url twice", "notifications:\n  - {url: \"https://h/x\", secret_env: N1, " + ev + "}\n  - {url: \"https://h/x\", secret_env: N2, " + ev + "}\n", 3,
			`notifications[1].url: "https://h/x" is already the url of notifications[0] (line 2)`},
		{"url twice with a token", "notifications:\n  - {url: \"https://h/x?token=s3cr3t\", secret_env: N1, " + ev + "}\n  - {url: \"https://h/x?token=s3cr3t\", secret_env: N2, " + ev + "}\n", 3,
			`notifications[1].url: "https://h/x?token=REDACTED" is already the url of notifications[0] (line 2)`},
		{"url with a space", entry("{url: \"https://h/x?token=a b\", " + ev + "}"), 2, `notifications[0].url: byte 20 is ' ', which a URL does not hold raw: escape it as %20`},
		{"url with a quote", entry("{url: 'https://h/x?t=\"', " + ev + "}"), 2, `notifications[0].url: byte 15 is '"'`},
		{"url with a bad escape", entry("{url: \"https://h/x?t=%zz\", " + ev + "}"), 2, `notifications[0].url: the % at byte 15 does not start an escape`},
		{"secret_env missing", "notifications:\n  - {url: \"https://h/x\", " + ev + "}\n", 2, "notifications[0].secret_env: is required: each receiver verifies its notifications with a secret of its own"},
		{"secret_env empty", entry("{url: \"https://h/x\", " + ev + ", secret_env: \"\"}"), 2, "notifications[0].secret_env: is required"},
		{"secret_env shared", "notifications:\n  - {url: \"https://h/x\", secret_env: N1, " + ev + "}\n  - {url: \"https://h/y\", secret_env: N1, " + ev + "}\n", 3,
			"notifications[1].secret_env: N1 is also notifications[0].secret_env (line 2): each notification target needs a secret no one else holds"},
		{"secret_env is the webhook's", "webhook_secret_env: HOOKS\nnotifications:\n  - {url: \"https://h/x\", secret_env: HOOKS, " + ev + "}\n", 3,
			"notifications[0].secret_env: HOOKS is also webhook_secret_env (line 1)"},
		{"secret_env is the default webhook's", entry("{url: \"https://h/x\", secret_env: COUNTERSIGN_WEBHOOK_SECRET, " + ev + "}"), 2,
			"notifications[0].secret_env: COUNTERSIGN_WEBHOOK_SECRET is also webhook_secret_env (its default)"},
		{"secret_env is an action's", "actions:\n  - {name: a, execute: {url: \"http://b/x\"}, webhook_secret_env: A_SECRET}\nnotifications:\n  - {url: \"https://h/x\", secret_env: A_SECRET, " + ev + "}\n", 4,
			"notifications[0].secret_env: A_SECRET is also actions[0].webhook_secret_env (line 2)"},
		{"secret_env is the JWT's", "auth:\n  jwt: {issuer: i, audience: a, hs256_secret_env: JWT_SECRET}\nnotifications:\n  - {url: \"https://h/x\", secret_env: JWT_SECRET, " + ev + "}\n", 4,
			"notifications[0].secret_env: JWT_SECRET is also auth.jwt.hs256_secret_env (line 2)"},
		{"events missing", entry("{url: \"https://h/x\"}"), 2, "notifications[0].events: name at least one of proposal.created"},
		{"events empty", entry("{url: \"https://h/x\", events: []}"), 2, "notifications[0].events: name at least one"},
		{"events not list", entry("{url: \"https://h/x\", events: proposal.created}"), 2, "notifications[0].events: want a list"},
		{"event unknown", entry("{url: \"https://h/x\", events: [proposal.created, proposal.claimed]}"), 2, `notifications[0].events[1]: "proposal.claimed": want one of`},
		{"event twice", entry("{url: \"https://h/x\", events: [proposal.created, proposal.created]}"), 2, `notifications[0].events[1]: "proposal.created" is named twice`},
		{"event number", entry("{url: \"https://h/x\", events: [1]}"), 2, "notifications[0].events[0]: want a string, not the integer 1"},
		{"secret_env name", entry("{url: \"https://h/x\", " + ev + ", secret_env: \"my secret\"}"), 2, `notifications[0].secret_env: "my secret": want an environment variable name`},
		{"timeout zero", entry("{url: \"https://h/x\", " + ev + ", timeout: 0s}"), 2, "notifications[0].timeout: 0s: must be positive"},
		{"timeout huge", entry("{url: \"https://h/x\", " + ev + ", timeout: 1h}"), 2, "notifications[0].timeout: 1h0m0s: at most 5m0s"},
		{"timeout number", entry("{url: \"https://h/x\", " + ev + ", timeout: 5}"), 2, "notifications[0].timeout: want a duration"},
		{"attempts zero", entry("{url: \"https://h/x\", " + ev + ", max_attempts: 0}"), 2, "notifications[0].max_attempts: 0: want 1..1000"},
		{"attempts negative", entry("{url: \"https://h/x\", " + ev + ", max_attempts: -1}"), 2, "notifications[0].max_attempts: -1: want 1..1000"},
		{"attempts huge", entry("{url: \"https://h/x\", " + ev + ", max_attempts: 99999999999}"), 2, "notifications[0].max_attempts: integer 99999999999 out of range"},
		{"attempts text", entry("{url: \"https://h/x\", " + ev + ", max_attempts: ten}"), 2, "notifications[0].max_attempts: want an integer"},
		{"backoff not mapping", entry("{url: \"https://h/x\", " + ev + ", backoff: 1s}"), 2, "notifications[0].backoff: want a mapping"},
		{"backoff unknown", entry("{url: \"https://h/x\", " + ev + ", backoff: {initial: 1s, factor: 3}}"), 2, `unknown key "factor" in notifications[0].backoff (want initial, max)`},
		{"backoff inverted", entry("{url: \"https://h/x\", " + ev + ", backoff: {initial: 1m, max: 1s}}"), 2, "notifications[0].backoff.max: 1s: must not be shorter than backoff.initial (1m0s)"},
		{"backoff huge", entry("{url: \"https://h/x\", " + ev + ", backoff: {max: 48h}}"), 2, "notifications[0].backoff.max: 48h0m0s: at most 24h0m0s"},
		{"backoff negative", entry("{url: \"https://h/x\", " + ev + ", backoff: {initial: -1s}}"), 2, "notifications[0].backoff.initial: -1s: must be positive"},
		{"on its own line", "listen: 127.0.0.1:8080\nnotifications:\n  - url: \"https://h/x\"\n    events: [proposal.created]\n    secret_env: N\n    max_attempts: 0\n", 6, "notifications[0].max_attempts: 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\n%+v", tt.yaml, c.Notifications)
			}
			errs := Errors(err)
			if len(errs) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(errs), err)
			}
			if e := errs[0]; e.File != "bad.yaml" || e.Line != tt.line || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("got %q (line %d)\nwant line %d and a reason holding %q", e.Error(), e.Line, tt.line, tt.reason)
			}
		})
	}
}
