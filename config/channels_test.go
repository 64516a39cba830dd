package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// channelsYAML is docs/api.md's Part 3 configuration of both approver
// channels, as written there, with a rule that notifies on each and one
// that demands a passkey.
const channelsYAML = `public_url: https://countersign.acme.example
channels:
  slack:
    tenant: acme
    team_id: T0ACME
    bot_token_env: SLACK_BOT_TOKEN
    signing_secret_env: SLACK_SIGNING_SECRET
    api_url: https://slack.com/api/        # tests point it at a local fake
    users: {bob: {slack_id: U0BOB, roles: [finance]}, carol: {slack_id: U0CAROL, roles: [finance]}}
    post: dm                               # dm | a channel id
  email:
    tenant: acme
    smtp: {host: 127.0.0.1, port: 2525, username_env: SMTP_USER, password_env: SMTP_PASS, tls: starttls}   # none | starttls | tls
    from: approvals@acme.example
    addresses: {bob: {email: bob@acme.example, roles: [finance]}}
    link_ttl: 72h
policy:
  rules:
    - match: "payments.*"
      notify: [slack, email]
    - match: payments.refund
      when: "input.amount > 10000"
      step_up: passkey
`

func TestChannelsAsDocumented(t *testing.T) {
	c, err := Parse("countersign.yaml", []byte(channelsYAML))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if c.PublicURL != "https://countersign.acme.example" {
		t.Errorf("PublicURL %q", c.PublicURL)
	}
	s := c.Channels.Slack
	if s == nil || s.Tenant != "acme" || s.TeamID != "T0ACME" || s.BotTokenEnv != "SLACK_BOT_TOKEN" ||
		s.SigningSecretEnv != "SLACK_SIGNING_SECRET" || s.APIURL != "https://slack.com/api/" || s.Post != SlackPostDM {
		t.Fatalf("slack %+v", s)
	}
	if len(s.Users) != 2 || s.Users[0].Actor != "bob" || s.Users[1].Actor != "carol" {
		t.Fatalf("slack users %+v, want bob then carol (the file's order)", s.Users)
	}
	if a, ok := s.Actor("U0CAROL"); !ok || a.Actor != "carol" || !slices.Equal(a.Roles, []string{"finance"}) {
		t.Errorf("Actor(U0CAROL) = %+v, %v", a, ok)
	}
	if _, ok := s.Actor("U0MALLORY"); ok {
		t.Error("an unmapped Slack user maps to an actor")
	}
	e := c.Channels.Email
	if e == nil || e.Tenant != "acme" || e.From != "approvals@acme.example" || e.LinkTTL != 72*time.Hour ||
		e.SMTP != (SMTP{Host: "127.0.0.1", Port: 2525, UsernameEnv: "SMTP_USER", PasswordEnv: "SMTP_PASS", TLS: SMTPStartTLS}) {
		t.Fatalf("email %+v", e)
	}
	if a, ok := e.Actor("BOB@acme.example"); !ok || a.Actor != "bob" {
		t.Errorf("Actor(BOB@acme.example) = %+v, %v: addresses compare without case", a, ok)
	}
	p := c.Policy()
	if !slices.Equal(p.Rules[0].Notify, []string{"slack", "email"}) || p.Rules[1].StepUp != "passkey" {
		t.Errorf("rules %+v", p.Rules)
	}
}

func TestChannelDefaults(t *testing.T) {
	c, err := Parse("c.yaml", []byte(`public_url: http://127.0.0.1:8080
channels:
  slack: {tenant: acme, team_id: T0ACME, bot_token_env: B, signing_secret_env: S, users: {bob: {slack_id: U0BOB}}}
  email: {tenant: acme, smtp: {host: mail.acme.example}, from: a@acme.example, addresses: {bob: {email: bob@acme.example}}}
`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s := c.Channels.Slack; s.APIURL != DefaultSlackAPIURL || s.Post != DefaultSlackPost {
		t.Errorf("slack defaults %+v", s)
	}
	if e := c.Channels.Email; e.SMTP.Port != DefaultSMTPPort || e.SMTP.TLS != DefaultSMTPTLS || e.LinkTTL != DefaultLinkTTL {
		t.Errorf("email defaults %+v", e)
	}
	if c, err := Parse("c.yaml", nil); err != nil || c.Channels.Slack != nil || c.Channels.Email != nil || c.PublicURL != "" {
		t.Errorf("an empty file configures channels: %+v, %v", c.Channels, err)
	}
}

// TestChannelErrors shows each mistake in a channel's configuration
// reported once, at its line.
func TestChannelErrors(t *testing.T) {
	base := func(slack, email string) string {
		return "public_url: https://c.acme.example\nchannels:\n" +
			"  slack:\n    tenant: acme\n    team_id: T0ACME\n    bot_token_env: SLACK_BOT_TOKEN\n    signing_secret_env: SLACK_SIGNING_SECRET\n" + slack +
			"  email:\n    tenant: acme\n    smtp: {host: 127.0.0.1, port: 2525}\n    from: approvals@acme.example\n" + email
	}
	users := "    users: {bob: {slack_id: U0BOB}}\n"
	addrs := "    addresses: {bob: {email: bob@acme.example}}\n"
	tests := []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"duplicate slack id", base("    users:\n      bob: {slack_id: U0BOB}\n      carol: {slack_id: U0BOB}\n", addrs), 10,
			`channels.slack.users.carol.slack_id: "U0BOB" is also bob's (line 9): a click or a link must name one actor`},
		{"duplicate address", base(users, "    addresses:\n      bob: {email: bob@acme.example}\n      carol: {email: BOB@acme.example}\n"), 15,
			`channels.email.addresses.carol.email: "BOB@acme.example" is also bob's (line 14)`},
		{"slack tenant", strings.Replace(base(users, addrs), "    tenant: acme\n    team_id", "    team_id", 1), 4, "channels.slack.tenant: is required"},
		{"slack team", strings.Replace(base(users, addrs), "T0ACME", "acme", 1), 5, `channels.slack.team_id: "acme": want a Slack team id`},
		{"slack user id", base("    users: {bob: {slack_id: bob}}\n", addrs), 8, `channels.slack.users.bob.slack_id: "bob": want a Slack user id`},
		{"slack no users", base("", addrs), 4, "channels.slack.users: name at least one actor"},
		{"slack token in file", strings.Replace(base(users, addrs), "bot_token_env: SLACK_BOT_TOKEN", "bot_token_env: xoxb-123-456-abc", 1), 6,
			"channels.slack.bot_token_env: looks like a secret, not the name of an environment variable"},
		{"slack post", base(users+"    post: approvals\n", addrs), 9, `channels.slack.post: "approvals": want dm or a Slack channel id`},
		{"slack api url", base(users+"    api_url: slack.com\n", addrs), 9, "channels.slack.api_url: want an absolute http:// or https:// URL"},
		{"slack unknown key", base(users+"    channel: C0X\n", addrs), 9, `unknown key "channel" in channels.slack`},
		{"email from", strings.Replace(base(users, addrs), "from: approvals@acme.example", "from: Approvals <approvals@acme.example>", 1), 12, "channels.email.from: \"Approvals <approvals@acme.example>\": want one plain address"},
		{"email tls", strings.Replace(base(users, addrs), "port: 2525}", "port: 2525, tls: ssl}", 1), 11, `channels.email.smtp.tls: "ssl": want none, starttls or tls`},
		{"email port", strings.Replace(base(users, addrs), "port: 2525", "port: 0", 1), 11, "channels.email.smtp.port: 0: want a port"},
		{"email credentials half", strings.Replace(base(users, addrs), "port: 2525}", "port: 2525, username_env: SMTP_USER}", 1), 11, "channels.email.smtp: username_env and password_env go together"},
		{"email ttl", base(users, addrs+"    link_ttl: 0s\n"), 14, "channels.email.link_ttl: 0s: must be positive"},
		{"email address", base(users, "    addresses: {bob: {email: bob}}\n"), 13, `channels.email.addresses.bob.email: "bob": want a plain address`},
		{"public_url required", "channels:\n  email: {tenant: acme, smtp: {host: h}, from: a@acme.example, addresses: {bob: {email: b@acme.example}}}\n", 0,
			"public_url: is required with channels"},
		{"public_url query", strings.Replace(base(users, addrs), "https://c.acme.example", "https://c.acme.example/?t=1", 1), 1, "public_url: want a URL without credentials, a query or a #fragment"},
		{"notify unconfigured", "policy:\n  rules:\n    - {match: a, notify: [slack]}\n", 3, `policy.rules[0].notify[0]: "slack": channels.slack is not configured`},
		{"notify unknown", "policy:\n  rules:\n    - {match: a, notify: [fax]}\n", 3, `policy.rules[0].notify[0]: "fax": want one of slack, email`},
		{"notify excluded", base(users, addrs) + "policy:\n  rules:\n    - {match: a, channels: [web], notify: [email]}\n", 16,
			`policy.rules[0].notify[0]: "email" is a channel the rule's channels exclude`},
		{"notify empty", "policy:\n  rules:\n    - {match: a, notify: []}\n", 3, "policy.rules[0].notify: is empty"},
		{"step_up value", "public_url: https://c.acme.example\npolicy:\n  rules:\n    - {match: a, step_up: totp}\n", 4, `policy.rules[0].step_up: "totp": want passkey`},
		{"step_up on an IP address", "public_url: http://127.0.0.1:8080\npolicy:\n  rules:\n    - {match: a, step_up: passkey}\n", 4, "policy.rules[0].step_up: needs a public_url whose host is a domain name"},
		{"step_up without public_url", "policy:\n  rules:\n    - {match: a, step_up: passkey}\n", 3, "policy.rules[0].step_up: needs public_url"},
		{"step_up with remember", "public_url: https://c.acme.example\npolicy:\n  rules:\n    - {match: a, step_up: passkey, remember: [thread]}\n", 4,
			"policy.rules[0].remember: a step_up rule makes and honours no grants"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tt.yaml)
			}
			errs := Errors(err)
			if len(errs) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(errs), err)
			}
			if e := errs[0]; e.Line != tt.line || !strings.Contains(e.Error(), tt.want) {
				t.Errorf("got line %d %q\nwant line %d containing %q", e.Line, e.Error(), tt.line, tt.want)
			}
		})
	}
}
