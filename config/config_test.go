package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// exampleConfig is what testdata/example.yaml (docs/api.md's example) holds.
func exampleConfig() *Config {
	c := &Config{
		Listen:      "127.0.0.1:8080",
		Store:       "sqlite:countersign.db",
		AutoMigrate: true,
		Auth: Auth{
			APIKeys: []APIKey{
				{Key: "ck_dev_alice", Tenant: "acme", Actor: "alice", Roles: []string{"agent"}},
				{Key: "ck_dev_bob", Tenant: "acme", Actor: "bob", Roles: []string{"finance", "operator"}},
			},
			JWT: &JWT{
				Issuer: "https://auth.example.com/", Audience: "countersign",
				HS256SecretEnv: "COUNTERSIGN_JWT_SECRET",
				Claims:         Claims{Tenant: "tid", Actor: "sub", Roles: "roles", Kind: "ck_kind"},
			},
		},
		CORS:                CORS{AllowedOrigins: []string{}},
		WebhookSecretEnv:    "COUNTERSIGN_WEBHOOK_SECRET",
		Worker:              Worker{PollInterval: time.Second, Lease: 30 * time.Second, MaxConcurrency: 4, MaxAttempts: 5},
		Postgres:            Postgres{MaxConns: DefaultPostgresMaxConns},
		StoreConnectTimeout: DefaultStoreConnectTimeout,
		PolicySpec: PolicySpec{
			DefaultTTL: 10 * time.Minute,
			Rules: []Rule{{
				Match:              "payments.*",
				Effect:             countersign.EffectAsk,
				Approvers:          []string{"role:finance"},
				Quorum:             1,
				ForbidSelfApproval: true,
				TTL:                10 * time.Minute,
				Mode:               countersign.ModeIndependent,
				Channels:           []string{"api", "web", "cli", "text"},
				Remember:           []countersign.Scope{countersign.ScopeRun, countersign.ScopeThread},
			}},
		},
		Actions: []Action{{
			Name:        "payments.refund",
			Version:     "1",
			Kind:        "write",
			Description: "Refund a payment",
			InputSchema: json.RawMessage(`{"additionalProperties":false,"properties":{"amount":{"exclusiveMinimum":0,"type":"number"},"customer":{"type":"string"}},"required":["amount","customer"],"type":"object"}`),
			Confirmation: struct{ Title, Verb string }{
				Title: "Refund {amount} to {customer}", Verb: "Refund",
			},
			ReplacementKey: "{customer}",
			Prepare:        &Endpoint{URL: "http://127.0.0.1:9100/prepare", Timeout: 5 * time.Second},
			Execute:        &Endpoint{URL: "http://127.0.0.1:9100/execute", Timeout: 10 * time.Second},
			Reconcile:      &Endpoint{URL: "http://127.0.0.1:9100/reconcile", Timeout: 5 * time.Second},
		}},
		Metrics: Metrics{ProposalCountsEvery: 30 * time.Second},
		Events:  Events{MaxStreamsPerActor: 8},
		Web:     Web{SecureCookies: "auto"},
		Log:     Log{Level: "info", Format: "text", Requests: true},
		MCP:     MCP{Path: "/mcp", Hold: 50 * time.Second},
		Audit:   Audit{CheckpointEvery: time.Minute},
	}
	return c
}

// public drops what Parse records for error messages, to compare the rest.
func public(c *Config) *Config {
	d := *c
	d.file, d.lines = "", nil
	return &d
}

func parseOK(t *testing.T, yaml string) *Config {
	t.Helper()
	c, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("testdata/example.yaml", data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := public(c), exampleConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("example parsed to\n%+v\nwant\n%+v", got, want)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after Parse: %v", err)
	}
	if err := exampleConfig().Validate(); err != nil {
		t.Errorf("Validate of the example built in code: %v", err)
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	want := &Config{
		Listen:              "127.0.0.1:8080",
		Store:               "sqlite:countersign.db",
		AutoMigrate:         true,
		WebhookSecretEnv:    "COUNTERSIGN_WEBHOOK_SECRET",
		Worker:              Worker{PollInterval: time.Second, Lease: 30 * time.Second, MaxConcurrency: 4, MaxAttempts: 5},
		Postgres:            Postgres{MaxConns: DefaultPostgresMaxConns},
		StoreConnectTimeout: DefaultStoreConnectTimeout,
		PolicySpec:          PolicySpec{DefaultTTL: 10 * time.Minute},
		Metrics:             Metrics{ProposalCountsEvery: 30 * time.Second},
		Events:              Events{MaxStreamsPerActor: 8},
		Web:                 Web{SecureCookies: "auto"},
		Log:                 Log{Level: "info", Format: "text", Requests: true},
		MCP:                 MCP{Path: "/mcp", Hold: 50 * time.Second},
		Audit:               Audit{CheckpointEvery: time.Minute},
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() = %+v, want %+v", got, want)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	for _, empty := range []string{"", "\n", "# nothing yet\n", "---\n", "~\n", "{}\n"} {
		c := parseOK(t, empty)
		if got := public(c); !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %+v, want the defaults", empty, got)
		}
	}
	// A key with no value keeps its default, as an absent one does.
	c := parseOK(t, "listen:\nworker:\n  lease:\nauth:\npolicy: {rules: }\n")
	if got := public(c); !reflect.DeepEqual(got, want) {
		t.Errorf("null values: %+v, want the defaults", got)
	}
}

// TestFieldDefaults checks the defaults inside list items and sections.
func TestFieldDefaults(t *testing.T) {
	t.Parallel()
	c := parseOK(t, `
auth:
  jwt: {issuer: i, audience: a, jwks_file: keys.json}
policy:
  rules:
    - match: payments.refund
actions:
  - name: x
    execute: {url: "https://hooks.example.com/x"}
`)
	if got, want := c.Auth.JWT.Claims, (Claims{"tid", "sub", "roles", "ck_kind"}); got != want {
		t.Errorf("claims = %+v, want %+v", got, want)
	}
	wantRule := Rule{Match: "payments.refund", Effect: "ask", Approvers: []string{"requester"}, Quorum: 1, Mode: "wait"}
	if got := c.PolicySpec.Rules[0]; !reflect.DeepEqual(got, wantRule) {
		t.Errorf("rule = %+v, want %+v", got, wantRule)
	}
	a := c.Actions[0]
	if a.Version != "1" || a.Kind != "write" || string(a.InputSchema) != `{"type":"object"}` ||
		a.Prepare != nil || a.Reconcile != nil || *a.Execute != (Endpoint{URL: "https://hooks.example.com/x", Timeout: 10 * time.Second}) {
		t.Errorf("action defaults: %+v", a)
	}
	if p := c.Policy(); p.Rules[0].TTL != 0 || p.DefaultTTL != 10*time.Minute {
		t.Errorf("a rule without ttl takes the policy's: %+v", p)
	}
}

// TestErrors covers every check: each bad file yields one problem, with its
// line and a reason.
func TestErrors(t *testing.T) {
	t.Parallel()
	const execute = "    execute: {url: \"http://127.0.0.1:9100/execute\"}\n"
	action := func(lines string) string { return "actions:\n  - name: a\n" + execute + lines }
	rule := func(fields string) string { return "policy:\n  rules:\n    - " + fields + "\n" }
	const scripted = "    model: {provider: scripted, rules: [{match: x, say: y}]}\n"
	agentWith := func(lines string) string { return "agents:\n  - name: a\n" + lines }
	openai := func(fields string) string {
		return agentWith("    model: {provider: openai, name: m, api_key_env: K" + fields + "}\n")
	}
	openaiKey := func(env string) string {
		return agentWith("    model: {provider: openai, name: m, api_key_env: " + env + "}\n")
	}
	rules := func(rule string) string {
		return agentWith("    model:\n      provider: scripted\n      rules:\n        - " + rule + "\n")
	}
	tests := []struct {
		name, yaml string
		line       int
		reason     string
	}{
		// YAML itself
		{"syntax", "listen: a\nstore: [x\n", 2, "invalid YAML: did not find expected ',' or ']'"},
		{"syntax key", "listen: a\nstore: b\n- c\n", 3, "invalid YAML: did not find expected key"},
		{"syntax indent", "auth:\n  api_keys:\n    - key: k\n   tenant: t\n", 2, "invalid YAML"},
		{"syntax on line 1", "a: b: c\n", 1, "invalid YAML: mapping values are not allowed"},
		{"unknown anchor", "listen: a\n\nstore: *nowhere\n", 3, "unknown anchor"},
		{"tab", "listen: a\n\tstore: b\n", 2, "invalid YAML"},
		{"control character", "listen: a\nstore: \x01\n", 2, "invalid YAML: control characters are not allowed"},
		{"two documents", "listen: a\n---\nlisten: b\n", 2, "a second YAML document"},
		{"not a mapping", "- listen\n", 1, "a configuration is a mapping"},
		{"unknown key", "listen: :80\nlisten_addr: x\n", 2, `unknown key "listen_addr" at the top level`},
		{"unknown nested key", "worker:\n  poll: 1s\n", 2, `unknown key "poll" in worker (want poll_interval, lease`},
		{"repeated key", "listen: :80\nstore: sqlite:a\nlisten: :81\n", 3, `key "listen" repeats the one on line 1`},
		{"non-string key", "1: a\n", 1, "keys must be strings"},
		{"bad merge", "worker:\n  <<: 5\n", 2, "a merge key (<<) takes a mapping"},
		// types
		{"string wanted", "listen: 8080\n", 1, `listen: want a string, not the integer 8080`},
		{"string not list", "store: [a]\n", 1, "store: want a string, not a list"},
		{"bool wanted", "auto_migrate: yes\n", 1, `auto_migrate: want true or false, not the string "yes"`},
		{"int wanted", "worker:\n  max_concurrency: four\n", 2, "worker.max_concurrency: want an integer"},
		{"int range", "worker:\n  max_attempts: 99999999999\n", 2, "out of range"},
		{"duration type", "worker:\n  lease: 30\n", 2, "worker.lease: want a duration such as 10s"},
		{"duration syntax", "worker:\n  lease: 30 seconds\n", 2, `"30 seconds" is not a duration`},
		{"duration sign", "policy:\n  default_ttl: -1m\n", 2, "policy.default_ttl: -1m: must be positive"},
		{"zero duration", rule("{match: a, ttl: 0s}"), 3, "policy.rules[0].ttl: 0s: must be positive"},
		{"escalate_after alone", rule("{match: a, escalate_after: 5m}"), 3, "policy.rules[0].escalate_to: is required: whom to add as approvers once the escalation is due"},
		{"escalate_to alone", rule("{match: a, escalate_to: [\"role:manager\"]}"), 3, "policy.rules[0].escalate_after: is required: when to add the escalation's approvers"},
		{"escalate_to empty", rule("{match: a, escalate_to: []}"), 3, "policy.rules[0].escalate_to: is empty: list whom to add, or leave escalation out"},
		{"escalate_after past the default ttl", "policy:\n  default_ttl: 5m\n  rules:\n    - {match: a, escalate_after: 5m, escalate_to: [\"role:m\"]}\n", 4,
			"policy.rules[0].escalate_after: 5m0s is not before the proposal expires (ttl 5m0s): it would never escalate"},
		{"escalate_after past ttl", rule("{match: a, ttl: 10m, escalate_after: 10m, escalate_to: [\"role:manager\"]}"), 3,
			"policy.rules[0].escalate_after: 10m0s is not before the proposal expires (ttl 10m0s): it would never escalate"},
		{"escalate_to not an approver", rule("{match: a, escalate_after: 1m, escalate_to: [manager]}"), 3,
			`policy.rules[0].escalate_to[0]: "manager": want requester, role:NAME or actor:ID`},
		{"escalate_to twice", rule("{match: a, escalate_after: 1m, escalate_to: [\"role:m\", \"role:m\"]}"), 3,
			`policy.rules[0].escalate_to[1]: "role:m" is listed twice`},
		{"remind_every past the default ttl", rule("{match: a, remind_every: 1h}"), 3,
			"policy.rules[0].remind_every: 1h0m0s is not before the proposal expires (ttl 10m0s): no reminder would be sent"},
		{"remind_every zero", rule("{match: a, remind_every: 0s}"), 3, "policy.rules[0].remind_every: 0s: must be positive"},
		{"list wanted", "cors:\n  allowed_origins: https://a.example\n", 2, "cors.allowed_origins: want a list"},
		// audit
		{"audit checkpoint_every short", "audit:\n  checkpoint_every: 500ms\n", 2, "audit.checkpoint_every: 500ms: at least 1s, the sealer's interval"},
		{"audit checkpoint_every zero", "audit: {checkpoint_every: 0s}\n", 1, "audit.checkpoint_every: 0s: must be positive"},
		{"audit checkpoint_every word", "audit:\n  checkpoint_every: hourly\n", 2, `audit.checkpoint_every: "hourly" is not a duration`},
		{"audit empty key file", "audit:\n  signing_key_file: \"\"\n", 2, "audit.signing_key_file: is empty: name the key's file"},
		{"audit key file type", "audit:\n  signing_key_file: [a]\n", 2, "audit.signing_key_file: want a string, not a list"},
		{"audit key file NUL", "audit:\n  signing_key_file: \"a\\0b\"\n", 2, "audit.signing_key_file: the path holds a NUL byte"},
		{"audit unknown key", "audit:\n  key: a.pem\n", 2, `unknown key "key" in audit (want signing_key_file, checkpoint_every)`},
		{"mapping wanted", "auth: [a]\n", 1, "auth: want a mapping"},
		{"list item type", "cors:\n  allowed_origins:\n    - [x]\n", 3, "cors.allowed_origins[0]: want a string"},
		{"secret type", "auth:\n  api_keys:\n    - {key: 12345, tenant: t, actor: a}\n", 3, "auth.api_keys[0].key: want a string (quote it)"},
		// listen, store
		{"listen", "listen: localhost\n", 1, `listen: "localhost": want host:port`},
		{"listen port", "listen: localhost:http8\n", 1, "the port must be a number"},
		{"store scheme", "store: mysql://x\n", 1, `store: unknown store "mysql:…"`},
		{"store sqlite empty", "store: \"sqlite:\"\n", 1, `names no file`},
		{"store sqlite slashes", "store: sqlite://db\n", 1, "without //"},
		{"store postgres", "store: \"postgres://u:pw@h:5432:x/db\"\n", 1, "invalid PostgreSQL URL"},
		{"store mapping bad url", "store:\n  url: mysql://x\n", 2, `store.url: unknown store "mysql:…"`},
		{"store connect_timeout zero", "store:\n  connect_timeout: 0s\n", 2, "store.connect_timeout: 0s: must be positive"},
		{"store connect_timeout negative", "store: {url: sqlite:a.db, connect_timeout: -5s}\n", 1, "store.connect_timeout: -5s: must be positive"},
		{"store connect_timeout word", "store:\n  connect_timeout: soon\n", 2, `store.connect_timeout: "soon" is not a duration`},
		{"store unknown key", "store:\n  url: sqlite:a.db\n  timeout: 5s\n", 3, `unknown key "timeout" in store`},
		// auth
		{"key and hash", "auth:\n  api_keys:\n    - {key: k, key_sha256: " + strings.Repeat("a", 64) + ", tenant: t, actor: a}\n", 3, "set key or key_sha256, not both"},
		{"no key", "auth:\n  api_keys:\n    - tenant: t\n      actor: a\n", 3, "auth.api_keys[0]: needs key or key_sha256"},
		{"hash form", "auth:\n  api_keys:\n    - {key_sha256: " + strings.Repeat("A", 64) + ", tenant: t, actor: a}\n", 3, "want 64 lowercase hex digits"},
		{"key spaces", "auth:\n  api_keys:\n    - {key: \"a b\", tenant: t, actor: a}\n", 3, "a key has no spaces"},
		{"tenant spaces", "auth:\n  api_keys:\n    - {key: k, tenant: \"ac me\", actor: a}\n", 3, "auth.api_keys[0].tenant: \"ac me\": a tenant has no spaces"},
		{"no tenant", "auth:\n  api_keys:\n    - {key: k, actor: a}\n", 3, "auth.api_keys[0].tenant: is required"},
		{"no actor", "auth:\n  api_keys:\n    - key: k\n      tenant: t\n      actor: \"\"\n", 5, "auth.api_keys[0].actor: is required"},
		{"empty role", "auth:\n  api_keys:\n    - key: k\n      tenant: t\n      actor: a\n      roles:\n        - ok\n        - \"\"\n", 8, "auth.api_keys[0].roles[1]: is required"},
		{"duplicate key", "auth:\n  api_keys:\n    - {key: k, tenant: t, actor: a}\n    - {key: k, tenant: t, actor: b}\n", 4, "auth.api_keys[1]: the same key as auth.api_keys[0] (line 3)"},
		{"duplicate key by hash", "auth:\n  api_keys:\n    - {key: k, tenant: t, actor: a}\n    - {key_sha256: 8254c329a92850f6d539dd376f4816ee2764517da5e0235514af433164480d7a, tenant: t, actor: b}\n", 4, "the same key as auth.api_keys[0]"},
		{"jwt issuer", "auth:\n  jwt:\n    audience: a\n    jwks_file: k.json\n", 3, "auth.jwt.issuer: is required"},
		{"jwt audience", "auth:\n  jwt: {issuer: i, jwks_file: k.json}\n", 2, "auth.jwt.audience: is required"},
		{"jwt no key", "auth:\n  jwt: {issuer: i, audience: a}\n", 2, "auth.jwt: needs jwks_file"},
		{"jwt both keys", "auth:\n  jwt: {issuer: i, audience: a, jwks_file: k, hs256_secret_env: S}\n", 2, "set jwks_file or hs256_secret_env, not both"},
		{"jwt env name", "auth:\n  jwt:\n    issuer: i\n    audience: a\n    hs256_secret_env: my-secret\n", 5, "auth.jwt.hs256_secret_env: \"my-secret\": want an environment variable name"},
		{"jwt claim", "auth:\n  jwt:\n    issuer: i\n    audience: a\n    jwks_file: k\n    claims:\n      actor: \"\"\n", 7, "auth.jwt.claims.actor: is required"},
		{"jwt unknown", "auth:\n  jwt: {issuer: i, audience: a, jwks_file: k, algorithm: RS256}\n", 2, `unknown key "algorithm" in auth.jwt`},
		// cors, secrets' names, metrics
		{"origin path", "cors:\n  allowed_origins: [\"https://a.example/inbox\"]\n", 2, "cors.allowed_origins[0]: \"https://a.example/inbox\": want an origin"},
		{"origin scheme", "cors:\n  allowed_origins:\n    - a.example\n", 3, "want an origin"},
		{"webhook env", "webhook_secret_env: \"\"\n", 1, "webhook_secret_env: \"\": want an environment variable name"},
		{"metrics role", "metrics:\n  require_role: \"ops team\"\n", 2, "metrics.require_role"},
		{"metrics counts every", "metrics:\n  proposal_counts_every: 0s\n", 2, "metrics.proposal_counts_every: 0s: must be positive"},
		{"metrics counts every type", "metrics:\n  proposal_counts_every: often\n", 2, "metrics.proposal_counts_every"},
		// events
		{"streams zero", "events:\n  max_streams_per_actor: 0\n", 2, "events.max_streams_per_actor: 0: must be positive"},
		{"streams negative", "events: {max_streams_per_actor: -3}\n", 1, "events.max_streams_per_actor: -3: must be positive"},
		{"streams type", "events:\n  max_streams_per_actor: many\n", 2, "events.max_streams_per_actor"},
		{"events unknown key", "events:\n  max_streams: 4\n", 2, "max_streams"},
		// web
		{"secure cookies", "web:\n  secure_cookies: sometimes\n", 2, "web.secure_cookies: \"sometimes\": want auto, always or never"},
		{"secure cookies bool", "web:\n  secure_cookies: true\n", 2, "web.secure_cookies"},
		{"proxy address", "web:\n  trusted_proxies:\n    - 10.0.0.0/8\n    - 10.1.2.3\n", 4, "web.trusted_proxies[1]: \"10.1.2.3\": want a CIDR prefix; for this one address write 10.1.2.3/32"},
		{"proxy host bits", "web:\n  trusted_proxies: [\"10.1.2.3/8\"]\n", 2, "web.trusted_proxies[0]: \"10.1.2.3/8\": has host bits set; the prefix is 10.0.0.0/8"},
		{"proxy garbage", "web:\n  trusted_proxies:\n    - proxy.internal\n", 3, "want a CIDR prefix such as 10.0.0.0/8"},
		{"proxy not a list", "web:\n  trusted_proxies: 10.0.0.0/8\n", 2, "web.trusted_proxies"},
		{"web unknown key", "web:\n  cookies: always\n", 2, "cookies"},
		// log
		{"log level", "listen: :80\nlog:\n  level: verbose\n", 3, `log.level: "verbose": want debug, info, warn or error`},
		{"log level empty", "log: {level: \"\"}\n", 1, `log.level: "": want debug`},
		{"log format", "log:\n  format: logfmt\n", 2, `log.format: "logfmt": want text or json`},
		{"log requests", "log:\n  requests: quiet\n", 2, "log.requests: want true or false"},
		{"log unknown key", "log:\n  levels: debug\n", 2, `unknown key "levels" in log`},
		// worker
		{"poll vs lease", "worker:\n  poll_interval: 10s\n  lease: 30s\n", 2, "worker.poll_interval: 10s must be less than a third of worker.lease (30s)"},
		{"poll vs default lease", "worker:\n  poll_interval: 15s\n", 2, "less than a third of worker.lease (30s)"},
		{"concurrency", "worker:\n  max_concurrency: 0\n", 2, "worker.max_concurrency: 0: must be positive"},
		{"attempts", "worker: {max_attempts: -1}\n", 1, "worker.max_attempts: -1: must be positive"},
		// postgres
		{"max_conns negative", "postgres:\n  max_conns: -1\n", 2, "postgres.max_conns: -1: must be positive, or 0 for the default (" + fmt.Sprint(DefaultPostgresMaxConns) + ")"},
		{"max_conns very negative", "postgres: {max_conns: -2147483648}\n", 1, "postgres.max_conns: -2147483648: must be positive"},
		{"max_conns above PostgreSQL's limit", "postgres:\n  max_conns: 262144\n", 2, "postgres.max_conns: 262144: more connections than PostgreSQL accepts (max_connections is at most 262143)"},
		{"max_conns out of range", "postgres:\n  max_conns: 9999999999\n", 2, "postgres.max_conns: integer 9999999999 out of range"},
		{"max_conns beyond 64 bits", "postgres:\n  max_conns: 99999999999999999999\n", 2, "postgres.max_conns: want an integer, not the number 99999999999999999999"},
		{"max_conns a word", "postgres:\n  max_conns: many\n", 2, `postgres.max_conns: want an integer, not the string "many"`},
		{"max_conns quoted", "postgres:\n  max_conns: \"8\"\n", 2, `postgres.max_conns: want an integer, not the string "8"`},
		{"max_conns fraction", "postgres:\n  max_conns: 1.5\n", 2, "postgres.max_conns: want an integer, not the number 1.5"},
		{"max_conns infinite", "postgres:\n  max_conns: .inf\n", 2, "postgres.max_conns: want an integer"},
		{"max_conns bool", "postgres:\n  max_conns: true\n", 2, "postgres.max_conns: want an integer, not the boolean true"},
		{"max_conns list", "postgres:\n  max_conns: [8]\n", 2, "postgres.max_conns: want an integer, not a list"},
		{"postgres not mapping", "postgres: 8\n", 1, "postgres: want a mapping, not the integer 8"},
		{"postgres unknown key", "postgres:\n  pool_size: 8\n", 2, `unknown key "pool_size" in postgres (want max_conns)`},
		// policy
		{"rule not mapping", "policy:\n  rules:\n    - payments.*\n", 3, "policy.rules[0]: want a mapping"},
		{"rule unknown key", rule("{match: a, approver: requester}"), 3, `unknown key "approver" in policy.rules[0]`},
		{"match required", rule("{effect: ask}"), 3, "policy.rules[0].match: is required"},
		{"match chars", rule("{match: \"pay ments\"}"), 3, "policy.rules[0].match: \"pay ments\": want an action name or a glob"},
		{"match repeated", "policy:\n  rules:\n    - {match: a}\n    - {match: b}\n    - {match: a}\n", 5, "policy.rules[2].match: \"a\" repeats policy.rules[0] (line 3)"},
		{"match repeated after a when", "policy:\n  rules:\n    - {match: a, when: \"tenant == 'x'\"}\n    - {match: a}\n    - {match: a, when: \"true\"}\n", 5,
			"policy.rules[2].match: \"a\" repeats policy.rules[1] (line 4), which has no when"},
		// conditions: line of the when, and the reason
		{"when syntax", rule("{match: a, when: \"input.amount >\"}"), 3, `policy.rules[0].when: "input.amount >": column 15: Syntax error`},
		{"when not boolean", rule("{match: a, when: \"tenant\"}"), 3, `policy.rules[0].when: "tenant": the expression is string, not a boolean`},
		{"when unknown variable", rule("{match: a, when: \"user == 'x'\"}"), 3, `undeclared reference to 'user'`},
		{"when unknown field",
			"actions:\n  - name: pay.refund\n" + execute + "    input_schema: {type: object, additionalProperties: false, properties: {amount: {type: number}}}\n" +
				"policy:\n  rules:\n    - match: \"pay.*\"\n      when: input.amout > 1000\n", 8,
			`policy.rules[0].when: "input.amout > 1000", for action pay.refund (actions[0], line 2): column 6: undefined field 'amout'`},
		{"when type error",
			"actions:\n  - name: pay.refund\n" + execute + "    input_schema: {type: object, properties: {customer: {type: string}}}\n" +
				"policy:\n  rules:\n    - match: pay.refund\n      when: input.customer > 1000\n", 8,
			`for action pay.refund (actions[0], line 2): column 16: found no matching overload for '_>_' applied to '(string, int)'`},
		{"effect", rule("{match: a, effect: maybe}"), 3, "policy.rules[0].effect: \"maybe\": want allow, ask or deny"},
		{"effect empty", rule("{match: a, effect: \"\"}"), 3, "policy.rules[0].effect: \"\""},
		{"approver form", "policy:\n  rules:\n    - match: a\n      approvers:\n        - requester\n        - finance\n", 6, "policy.rules[0].approvers[1]: \"finance\": want requester, role:NAME or actor:ID"},
		{"approver empty name", rule("{match: a, approvers: [\"role:\"]}"), 3, "want requester, role:NAME or actor:ID"},
		{"approver twice", rule("{match: a, approvers: [\"role:x\", \"role:x\"]}"), 3, "\"role:x\" is listed twice"},
		{"approvers empty", rule("{match: a, approvers: []}"), 3, "policy.rules[0].approvers: is empty"},
		{"quorum zero", rule("{match: a, quorum: 0}"), 3, "policy.rules[0].quorum: 0: must be at least 1"},
		{"quorum negative", rule("{match: a, quorum: -1}"), 3, "policy.rules[0].quorum: -1: must be at least 1"},
		{"approver name with a space", rule("{match: a, approvers: [\"role:fin ance\"]}"), 3, `policy.rules[0].approvers[0]: "role:fin ance": want requester, role:NAME or actor:ID`},
		{"quorum unreachable once escalated", rule("{match: a, approvers: [\"actor:a\"], quorum: 3, escalate_after: 1m, escalate_to: [\"actor:b\"]}"), 3,
			"policy.rules[0].quorum: 3 can never be met by the 2 people the approvers name"},
		{"quorum unreachable", rule("{match: a, approvers: [\"actor:bob\", requester], quorum: 3}"), 3, "policy.rules[0].quorum: 3 can never be met by the 2 people"},
		{"quorum without self", "policy:\n  rules:\n    - match: a\n      approvers: [\"actor:bob\", requester]\n      forbid_self_approval: true\n      quorum: 2\n", 6, "2 can never be met by the 1 people"},
		{"nobody approves", rule("{match: a, forbid_self_approval: true}"), 3, "policy.rules[0]: no one may approve"},
		{"mode", rule("{match: a, mode: async}"), 3, "policy.rules[0].mode: \"async\": want wait, two_phase or independent"},
		{"channel", rule("{match: a, channels: [api, fax]}"), 3, "policy.rules[0].channels[1]: \"fax\": want one of api, web, cli, text, agui, mcp, slack, email"},
		{"channel twice", rule("{match: a, channels: [api, api]}"), 3, "\"api\" is listed twice"},
		{"channels empty", rule("{match: a, channels: []}"), 3, "policy.rules[0].channels: is empty"},
		{"remember", rule("{match: a, remember: [forever]}"), 3, "policy.rules[0].remember[0]: \"forever\": want run or thread"},
		{"remember twice", rule("{match: a, remember: [run, run]}"), 3, "\"run\" is listed twice"},
		{"rule ttl type", rule("{match: a, ttl: 600}"), 3, "policy.rules[0].ttl: want a duration"},
		// actions
		{"action not mapping", "actions: [x]\n", 1, "actions[0]: want a mapping"},
		{"action unknown key", action("    url: http://x\n"), 4, `unknown key "url" in actions[0]`},
		{"action name", "actions:\n  - name: \"-x\"\n" + execute, 2, "actions[0].name: \"-x\": want 1-128 of"},
		{"action name required", "actions:\n  - description: d\n" + execute, 2, "actions[0].name: is required"},
		{"action name repeated", action("  - name: a\n" + execute), 4, "actions[1].name: \"a\" is already the name of actions[0] (line 2)"},
		{"version type", action("    version: 1\n"), 4, "actions[0].version: want a string, not the integer 1 (quote it: \"1\")"},
		{"version empty", action("    version: \"\"\n"), 4, "actions[0].version: is required"},
		{"kind", action("    kind: delete\n"), 4, "actions[0].kind: \"delete\": want read or write"},
		{"schema not mapping", action("    input_schema: object\n"), 4, "actions[0].input_schema: want a mapping (a JSON Schema)"},
		{"schema invalid", action("    input_schema: {type: thing}\n"), 4, "actions[0].input_schema: compile schema"},
		{"schema external ref", action("    input_schema: {$ref: \"https://example.com/s.json\"}\n"), 4, "actions[0].input_schema"},
		{"schema number", action("    input_schema: {type: number, maximum: .inf}\n"), 4, "the number .inf has no JSON form"},
		{"schema key", action("    input_schema: {properties: {1: {}}}\n"), 4, "keys must be strings"},
		{"schema binary", action("    input_schema: {const: !!binary aGk=}\n"), 4, "has no JSON form"},
		{"title placeholder", action("    confirmation: {title: \"Refund {amount\"}\n"), 4, "actions[0].confirmation.title: \"Refund {amount\": placeholders are {path}"},
		{"key placeholder", action("    replacement_key: \"{a b}\"\n"), 4, "actions[0].replacement_key"},
		{"placeholder names nothing", action("    input_schema: {type: object, additionalProperties: false, properties: {amount: {type: number}}}\n    confirmation: {title: \"Refund {amonut}\"}\n"), 5, "actions[0].confirmation.title: {amonut} names no property of input_schema"},
		{"nested placeholder", action("    input_schema:\n      type: object\n      additionalProperties: false\n      properties:\n        order: {type: object, additionalProperties: false, properties: {id: {type: string}}}\n    replacement_key: \"{order.key}\"\n"), 9, "{order.key} names no property"},
		{"confirmation unknown", action("    confirmation: {title: t, button: b}\n"), 4, `unknown key "button" in actions[0].confirmation`},
		{"execute required", "actions:\n  - name: a\n    prepare: {url: \"http://h/p\"}\n", 2, "actions[0].execute: is required"},
		{"execute null", "actions:\n  - name: a\n    execute:\n", 3, "actions[0].execute: is required"},
		{"url required", "actions:\n  - name: a\n    execute: {timeout: 5s}\n", 3, "actions[0].execute.url: is required"},
		{"url relative", "actions:\n  - name: a\n    execute: {url: /execute}\n", 3, "actions[0].execute.url: want an absolute http:// or https:// URL"},
		{"url scheme", "actions:\n  - name: a\n    execute: {url: \"ftp://h/x\"}\n", 3, "want an absolute http:// or https:// URL"},
		{"url credentials", "actions:\n  - name: a\n    execute: {url: \"https://u:p@h/x\"}\n", 3, "must not hold credentials"},
		{"timeout", action("    reconcile:\n      url: http://h/r\n      timeout: 0s\n"), 6, "actions[0].reconcile.timeout: 0s: must be positive"},
		{"endpoint unknown", action("    prepare: {url: \"http://h/p\", method: GET}\n"), 4, `unknown key "method" in actions[0].prepare`},
		{"idempotent type", action("    idempotent: 1\n"), 4, "actions[0].idempotent: want true or false"},
		// agents (line 2 is the first agent's name, line 3 its model)
		{"agents not a list", "agents: {name: a}\n", 1, "agents: want a list, not a mapping"},
		{"agent not mapping", "agents: [support]\n", 1, "agents[0]: want a mapping"},
		{"agent unknown key", agentWith(scripted + "    tools: [x]\n"), 4, `unknown key "tools" in agents[0] (want name, instructions, model, actions, max_steps)`},
		{"agent name required", "agents:\n  - instructions: i\n" + scripted, 2, "agents[0].name: is required"},
		{"agent name slash", "agents:\n  - name: a/b\n" + scripted, 2, `agents[0].name: "a/b": want 1-64 of [A-Za-z0-9_.-] (it is a URL path segment)`},
		{"agent name dot dot", "agents:\n  - name: \"..\"\n" + scripted, 2, `agents[0].name: "..": want`},
		{"agent name space", "agents:\n  - name: \"my agent\"\n" + scripted, 2, `agents[0].name: "my agent": want`},
		{"agent name too long", "agents:\n  - name: " + strings.Repeat("a", 65) + "\n" + scripted, 2, "want 1-64 of"},
		{"agent name type", "agents:\n  - name: 7\n" + scripted, 2, `agents[0].name: want a string, not the integer 7 (quote it: "7")`},
		{"agent name repeated", agentWith(scripted + "  - name: a\n" + scripted), 4, `agents[1].name: "a" is already the name of agents[0] (line 2)`},
		{"model required", "agents:\n  - name: a\n", 2, "agents[0].model: is required: {provider: openai | anthropic | scripted, …}"},
		{"model null", "agents:\n  - name: a\n    model:\n", 3, "agents[0].model: is required"},
		{"model not mapping", agentWith("    model: gpt-4.1-mini\n"), 3, `agents[0].model: want a mapping, not the string "gpt-4.1-mini"`},
		{"model unknown key", openai(", temperature: 0"), 3, `unknown key "temperature" in agents[0].model (want provider, name, base_url, api_key_env, rules, after_tool)`},
		{"provider required", agentWith("    model: {name: m, api_key_env: K}\n"), 3, "agents[0].model.provider: is required: openai, anthropic or scripted"},
		{"provider unknown", agentWith("    model:\n      provider: gemini\n"), 4, `agents[0].model.provider: "gemini": want openai, anthropic or scripted`},
		{"provider case", agentWith("    model: {provider: OpenAI, name: m, api_key_env: K}\n"), 3, `"OpenAI": want openai, anthropic or scripted`},
		{"model name required", agentWith("    model: {provider: openai, api_key_env: K}\n"), 3, "agents[0].model.name: is required: the provider's model name"},
		{"model name spaces", agentWith("    model:\n      provider: anthropic\n      name: \"claude sonnet\"\n      api_key_env: K\n"), 5, `agents[0].model.name: "claude sonnet": a model name has no spaces`},
		{"api_key_env required", agentWith("    model: {provider: openai, name: m}\n"), 3, "agents[0].model.api_key_env: is required: the environment variable that holds the API key"},
		{"api_key_env required anthropic", agentWith("    model:\n      provider: anthropic\n      name: m\n      api_key_env: \"\"\n"), 6, "agents[0].model.api_key_env: is required"},
		{"api_key_env a key", agentWith("    model:\n      provider: openai\n      name: m\n      api_key_env: sk-proj-0123456789abcdef\n"), 6, "agents[0].model.api_key_env: looks like an API key, not the name of an environment variable"},
		{"api_key_env a long key", openaiKey("Abcdefghijklmnopqrstuvwxyz0123456789"), 3, "looks like an API key"},
		{"api_key_env an underscore key", openaiKey("sk_live_0123"), 3, "looks like an API key"},
		{"api_key_env not a name", openaiKey("my-key"), 3, "agents[0].model.api_key_env: want an environment variable name (letters, digits and _)"},
		{"api_key_env type", openaiKey("12345"), 3, "agents[0].model.api_key_env: want a string (quote it)"},
		{"base_url scheme", openai(", base_url: \"ftp://h/v1\""), 3, "agents[0].model.base_url: want an absolute http:// or https:// URL"},
		{"base_url relative", agentWith("    model:\n      provider: openai\n      name: m\n      api_key_env: K\n      base_url: /v1\n"), 7, "agents[0].model.base_url: want an absolute"},
		{"base_url fragment", openai(", base_url: \"http://h/v1#x\""), 3, "without a #fragment"},
		{"base_url credentials", openai(", base_url: \"https://u:p@h/v1\""), 3, "agents[0].model.base_url: must not hold credentials"},
		{"rules on openai", openai(", rules: [{match: x, say: y}]"), 3, "agents[0].model.rules: only a scripted model has rules (this one's provider is openai)"},
		{"empty rules on openai", openai(", rules: []"), 3, "agents[0].model.rules: only a scripted model has rules"},
		{"after_tool on anthropic", agentWith("    model: {provider: anthropic, name: m, api_key_env: K, after_tool: x}\n"), 3, "agents[0].model.after_tool: only a scripted model has after_tool (this one's provider is anthropic)"},
		{"name on scripted", agentWith("    model: {provider: scripted, name: m, rules: [{match: x, say: y}]}\n"), 3, "agents[0].model.name: a scripted model has no name"},
		{"api_key_env on scripted", agentWith("    model:\n      provider: scripted\n      api_key_env: K\n      rules: [{match: x, say: y}]\n"), 5, "agents[0].model.api_key_env: a scripted model has no api_key_env"},
		{"scripted without rules", agentWith("    model: {provider: scripted}\n"), 3, "agents[0].model.rules: at least one rule is needed"},
		{"scripted empty rules", agentWith("    model:\n      provider: scripted\n      rules: []\n"), 5, "agents[0].model.rules: at least one rule is needed"},
		{"scripted rules not list", agentWith("    model:\n      provider: scripted\n      rules: {match: x}\n"), 5, "agents[0].model.rules: want a list"},
		{"scripted rule neither", rules("{match: x}"), 6, "agents[0].model.rules[0]: has neither say nor call"},
		{"scripted rule unknown key", rules("{match: x, say: y, reply: z}"), 6, `unknown key "reply" in agents[0].model.rules[0] (want match, say, call)`},
		{"scripted match missing", rules("{say: y}"), 6, "agents[0].model.rules[0].match: missing (use '.*' to match every message)"},
		{"scripted match regexp", rules("{match: '(?P<a>x', say: y}"), 6, "agents[0].model.rules[0].match: error parsing regexp: missing closing )"},
		{"scripted match type", rules("{match: [x], say: y}"), 6, "agents[0].model.rules[0].match: want a string, not a list"},
		{"scripted second rule", agentWith("    model:\n      provider: scripted\n      rules:\n        - {match: x, say: y}\n        - match: z\n          say: [w]\n"), 8, "agents[0].model.rules[1].say: want a string"},
		{"scripted call unknown key", rules("{match: x, call: {action: a, args: '{}'}}"), 6, `unknown key "args" in agents[0].model.rules[0].call (want action, client_tool, input)`},
		{"scripted call action missing", rules("{match: x, call: {input: '{}'}}"), 6, "agents[0].model.rules[0].call.action: missing"},
		{"scripted input group", agentWith("    model:\n      provider: scripted\n      rules:\n        - match: '(?P<amount>\\d+)'\n          call:\n            action: payments.refund\n            input: '{\"amount\": {amount}, \"to\": \"{customer}\"}'\n"), 9, "agents[0].model.rules[0].call.input: {customer} names no group of match"},
		{"scripted input not object", rules("{match: x, call: {action: a, input: '[1]'}}"), 6, "agents[0].model.rules[0].call.input: is not a JSON object"},
		{"scripted input mapping", rules("{match: x, call: {action: a, input: {amount: 1}}}"), 6, "agents[0].model.rules[0].call.input: want a string: the JSON text of the input, in single quotes"},
		{"scripted after_tool type", agentWith("    model:\n      provider: scripted\n      rules: [{match: x, say: y}]\n      after_tool: [x]\n"), 6, "agents[0].model.after_tool: want a string"},
		{"scripted client tool and action", rules("{match: x, call: {action: a, client_tool: b}}"), 6, "agents[0].model.rules[0].call: action and client_tool both set: a call is one or the other"},
		{"scripted call not offered", agentWith("    actions: [\"crm.*\"]\n    model:\n      provider: scripted\n      rules:\n        - {match: x, call: {action: payments.refund}}\n"), 7, `agents[0].model.rules[0].call.action: "payments.refund" is not among the agent's actions (crm.*): the model could never call it`},
		{"scripted call not configured", "actions:\n  - name: payments.refund\n" + execute + "agents:\n  - name: a\n    model:\n      provider: scripted\n      rules:\n        - {match: x, call: {action: payments.void}}\n", 9, `agents[0].model.rules[0].call.action: "payments.void" is none of the actions the file configures`},
		{"actions empty", agentWith(scripted + "    actions: []\n"), 4, "agents[0].actions: is empty: leave it out to offer every action"},
		{"actions not list", agentWith(scripted + "    actions: \"payments.*\"\n"), 4, "agents[0].actions: want a list"},
		{"actions glob empty", agentWith(scripted + "    actions:\n      - \"payments.*\"\n      - \"\"\n"), 6, "agents[0].actions[1]: is empty"},
		{"actions glob chars", agentWith(scripted + "    actions: [\"pay ments\"]\n"), 4, `agents[0].actions[0]: "pay ments": want an action name or a glob`},
		{"actions glob twice", agentWith(scripted + "    actions: [\"a.*\", \"a.*\"]\n"), 4, `agents[0].actions[1]: "a.*" is listed twice`},
		{"actions glob matches nothing", "actions:\n  - name: payments.refund\n" + execute + "agents:\n  - name: a\n" + scripted + "    actions:\n      - \"payments.*\"\n      - crm.lookup\n", 9, `agents[0].actions[1]: "crm.lookup" matches none of the actions the file configures`},
		{"max_steps negative", agentWith(scripted + "    max_steps: -1\n"), 4, "agents[0].max_steps: -1: must be positive, or 0 for the default (8)"},
		{"max_steps type", agentWith(scripted + "    max_steps: many\n"), 4, "agents[0].max_steps: want an integer"},
		{"instructions type", agentWith(scripted + "    instructions: [be nice]\n"), 4, "agents[0].instructions: want a string"},
		// default_agent
		{"default_agent without agents", "default_agent: support\n", 1, `default_agent: "support" names no agent: the file configures none`},
		{"default_agent unknown", "default_agent: support\n" + agentWith(scripted) + "  - name: b\n" + scripted, 1, `default_agent: "support" names no agent (want one of a, b)`},
		{"default_agent type", "default_agent: [a]\n", 1, "default_agent: want a string, not a list"},
		// text_decisions
		{"text_decisions not mapping", "text_decisions: pt-BR\n", 1, `text_decisions: want a mapping, not the string "pt-BR"`},
		{"text_decisions unknown key", "text_decisions:\n  lang: pt-BR\n", 2, `unknown key "lang" in text_decisions (want language, vocabulary, replies)`},
		{"language", "text_decisions:\n  language: fr\n", 2, `text_decisions.language: unknown language "fr" (want en or pt-BR)`},
		{"language type", "text_decisions: {language: 1}\n", 1, "text_decisions.language: want a string"},
		{"vocabulary unknown key", "text_decisions:\n  vocabulary:\n    accept: [ok]\n", 3, `unknown key "accept" in text_decisions.vocabulary (want approve, reject, remember)`},
		{"vocabulary empty list", "text_decisions:\n  vocabulary:\n    reject: []\n", 3, "text_decisions.vocabulary.reject: empty list: leave the field out to keep the preset's phrases"},
		{"vocabulary clash", "text_decisions:\n  vocabulary:\n    reject:\n      - nope\n      - \"yes\"\n", 5, `text_decisions.vocabulary.reject[1]: "yes" approves in the en preset`},
		{"vocabulary clash pt-BR", "text_decisions:\n  language: pt-BR\n  vocabulary: {approve: [ok, não]}\n", 3, `text_decisions.vocabulary.approve[1]: "não" rejects in the pt-BR preset`},
		{"vocabulary question", "text_decisions:\n  vocabulary:\n    approve: [\"ok?\"]\n", 3, `text_decisions.vocabulary.approve[0]: "ok?": ends with "?"`},
		{"vocabulary id", "text_decisions:\n  vocabulary:\n    approve:\n      - \"go #1\"\n", 4, `text_decisions.vocabulary.approve[0]: "go #1": contains "#"`},
		{"vocabulary type", "text_decisions:\n  vocabulary:\n    remember:\n      - 1\n", 4, "text_decisions.vocabulary.remember[0]: want a string"},
		{"replies unknown key", "text_decisions:\n  replies: {approve: ok}\n", 2, `unknown key "approve" in text_decisions.replies (want approved, approved_queued, rejected, unchanged, conflict, expired, ambiguous)`},
		{"replies ambiguous", "text_decisions:\n  replies:\n    approved: Done.\n    ambiguous: \"Which one?\"\n", 4, `text_decisions.replies.ambiguous: "Which one?" must contain {ids}`},
		{"replies type", "text_decisions:\n  replies:\n    expired: [x]\n", 3, "text_decisions.replies.expired: want a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\n%+v", tt.yaml, c)
			}
			errs := Errors(err)
			if len(errs) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(errs), err)
			}
			e := errs[0]
			if e.File != "bad.yaml" || e.Line != tt.line || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("got %q (file %q, line %d)\nwant line %d and a reason holding %q", e.Error(), e.File, e.Line, tt.line, tt.reason)
			}
			if want := fmt.Sprintf("bad.yaml:%d: %s", e.Line, e.Reason); e.Error() != want {
				t.Errorf("Error() = %q, want %q", e.Error(), want)
			}
		})
	}
}

func TestErrorsAll(t *testing.T) {
	t.Parallel()
	_, err := Parse("c.yaml", []byte(`listen: nowhere
worker:
  poll_interval: 20s
  speed: 3
policy:
  rules:
    - {match: a, effect: sometimes}
actions:
  - name: a
`))
	errs := Errors(err)
	want := []struct {
		line   int
		reason string
	}{
		{1, "listen:"},
		{3, "worker.poll_interval:"},
		{4, `unknown key "speed"`},
		{7, "policy.rules[0].effect:"},
		{9, "actions[0].execute: is required"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if errs[i].Line != w.line || !strings.Contains(errs[i].Reason, w.reason) {
			t.Errorf("problem %d = %v, want line %d with %q", i, errs[i], w.line, w.reason)
		}
	}
	// One line per problem, each readable on its own.
	if got := strings.Count(err.Error(), "\n") + 1; got != len(want) {
		t.Errorf("message has %d lines, want %d:\n%v", got, len(want), err)
	}
	var e *Error
	if !errors.As(fmt.Errorf("start: %w", err), &e) || e.Line != 1 {
		t.Errorf("errors.As through wrapping found %v", e)
	}
}

// A value the decoder could not read is not judged again by the checks.
func TestErrorsNoCascade(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"auth:\n  api_keys:\n    - {key: [k], tenant: t, actor: a}\n",
		"worker:\n  lease: long\n  poll_interval: 20s\n",
		"actions:\n  - name: a\n    execute: {url: [x]}\n",
		"policy:\n  rules:\n    - {match: a, approvers: requester, forbid_self_approval: true}\n",
		// A field the file's own checks refuse, or its rule, is not also
		// refused by the engine's check: nor is no one left to approve.
		"policy:\n  rules:\n    - {match: a, approvers: [], forbid_self_approval: true}\n",
		"policy:\n  rules:\n    - {match: a, quorum: -1, approvers: [\"actor:b\"]}\n",
		// An agent whose name could not be read is not also missing, nor
		// the one default_agent names.
		"default_agent: a\nagents:\n  - name: [a]\n    model: {provider: scripted, rules: [{match: x, say: y}]}\n",
		// A rule whose say could not be read does not also lack one.
		"agents:\n  - name: a\n    model: {provider: scripted, rules: [{match: x, say: {a: b}}]}\n",
		// A model that is not a mapping is not also missing.
		"agents:\n  - name: a\n    model: [openai]\n",
		"text_decisions:\n  vocabulary: {approve: [[ok]]}\n",
	} {
		_, err := Parse("c.yaml", []byte(in))
		if n := len(Errors(err)); n != 1 {
			t.Errorf("Parse(%q): %d problems, want 1:\n%v", in, n, err)
		}
	}
}

func TestSecretsNotEchoed(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"auth:\n  api_keys:\n    - {key: \"s3cr3t value\", tenant: t, actor: a}\n",
		"auth:\n  api_keys:\n    - {key: s3cr3t, tenant: t, actor: a}\n    - {key: s3cr3t, tenant: t, actor: b}\n",
		"store: \"postgres://u:s3cr3t@h:5432:x/db\"\n",
		"actions:\n  - name: a\n    execute: {url: \"ftp://u:s3cr3t@h/x\"}\n",
		"agents:\n  - name: a\n    model: {provider: openai, name: m, api_key_env: sk-proj-s3cr3t}\n",
		"agents:\n  - name: a\n    model: {provider: openai, name: m, api_key_env: \"s3cr3t key\"}\n",
		"agents:\n  - name: a\n    model: {provider: openai, name: m, api_key_env: 0s3cr3t}\n",
		"agents:\n  - name: a\n    model: {provider: openai, name: m, api_key_env: K, base_url: \"ftp://u:s3cr3t@h/v1\"}\n",
		"agents:\n  - name: a\n    model: {provider: openai, name: m, api_key_env: K, base_url: \"https://u:s3cr3t@h/v1\"}\n",
		"agents:\n  - name: a\n    model: {provider: scripted, api_key_env: s3cr3t, rules: [{match: x, say: y}]}\n",
	} {
		_, err := Parse("c.yaml", []byte(in))
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Parse(%q) = %v: want an error that does not repeat the secret", in, err)
		}
	}
}

func TestMergeKeys(t *testing.T) {
	t.Parallel()
	c := parseOK(t, `
policy:
  rules:
    - &finance {match: "payments.*", approvers: ["role:finance"], mode: independent}
    - {<<: *finance, match: "invoices.*", mode: wait}
actions:
  - &hook
    name: a
    execute: {url: "http://h/a", timeout: 3s}
  - <<: *hook
    name: b
`)
	r := c.PolicySpec.Rules[1]
	if r.Match != "invoices.*" || r.Mode != countersign.ModeWait || !reflect.DeepEqual(r.Approvers, []string{"role:finance"}) {
		t.Errorf("merged rule = %+v", r)
	}
	if b := c.Actions[1]; b.Name != "b" || b.Execute == nil || b.Execute.Timeout != 3*time.Second {
		t.Errorf("merged action = %+v", b)
	}
	// Aliases that refer to themselves, or multiply, are bounded.
	for _, in := range []string{
		"policy: &p {rules: [*p]}\n",
		"worker: &w {<<: *w}\n",
		"actions: [{name: a, execute: {url: \"http://h\"}, input_schema: &s {type: object, properties: {x: *s}}}]\n",
		"worker: &w {<<: [*w, *w]}\n",
		"x: &a {<<: &b {<<: *a}}\n",
	} {
		if _, err := Parse("c.yaml", []byte(in)); err == nil || len(Errors(err)) == 0 {
			t.Errorf("Parse(%.60q) = %v, want *Error", in, err)
		}
	}
	_, err := Parse("c.yaml", []byte(bomb()))
	if errs := Errors(err); len(errs) != 1 || !strings.Contains(errs[0].Reason, "actions[0].input_schema: too large") {
		t.Errorf("alias bomb: %v", err)
	}
	// Merges of merges are bounded too, even when each adds nothing.
	var b strings.Builder
	b.WriteString("policy:\n  rules:\n    - &r0 {match: a}\n")
	for i := 1; i < 60; i++ {
		fmt.Fprintf(&b, "    - &r%d {<<: [*r%d, *r%d]}\n", i, i-1, i-1)
	}
	if _, err := Parse("c.yaml", []byte(b.String())); !strings.Contains(fmt.Sprint(err), "too large") {
		t.Errorf("merge bomb: %v", err)
	}
}

// bomb is a schema whose aliases expand to 10^9 nodes.
func bomb() string {
	var b strings.Builder
	b.WriteString("actions:\n  - name: a\n    execute: {url: \"http://h\"}\n    input_schema:\n      $defs:\n")
	b.WriteString("        a0: &a0 [1,1,1,1,1,1,1,1,1,1]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "        a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("      enum: *a8\n")
	return b.String()
}

func TestParseStore(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, driver, location string }{
		{"sqlite:countersign.db", StoreSQLite, "countersign.db"},
		{"sqlite:/var/lib/countersign/cs.db", StoreSQLite, "/var/lib/countersign/cs.db"},
		{"postgres://user@db:5432/countersign", StorePostgres, "postgres://user@db:5432/countersign"},
		{"postgresql://db/cs?sslmode=require", StorePostgres, "postgresql://db/cs?sslmode=require"},
	} {
		d, l, err := ParseStore(tt.in)
		if err != nil || d != tt.driver || l != tt.location {
			t.Errorf("ParseStore(%q) = %q, %q, %v; want %q, %q", tt.in, d, l, err, tt.driver, tt.location)
		}
	}
	for _, bad := range []string{"", "countersign.db", "sqlite:", "sqlite://x.db", "mysql://h/db", "postgres://h:port/db"} {
		if _, _, err := ParseStore(bad); err == nil {
			t.Errorf("ParseStore(%q) succeeded", bad)
		}
	}
}

// TestEngineOptions: the file's policy, worker and engine settings become
// the engine's and the worker's options, and the policy passes the
// engine's own check.
func TestEngineOptions(t *testing.T) {
	t.Parallel()
	c := parseOK(t, `
worker: {poll_interval: 2s, lease: 1m, max_concurrency: 8, max_attempts: 3}
policy:
  default_ttl: 1h
  rules:
    - {match: "payments.*", effect: ask, approvers: ["role:finance", "actor:carol"], quorum: 2,
       forbid_self_approval: true, ttl: 5m, mode: two_phase, channels: [web, cli], remember: [thread]}
    - {match: "payments.refund", effect: allow}
    - {match: "*", effect: deny}
actions:
  - name: payments.refund
    execute: {url: "http://h/x"}
`)
	p := c.Policy()
	want := &countersign.Policy{DefaultTTL: time.Hour, Rules: []countersign.Rule{
		{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance", "actor:carol"}, Quorum: 2,
			ForbidSelfApproval: true, TTL: 5 * time.Minute, Mode: countersign.ModeTwoPhase,
			Channels: []string{"web", "cli"}, Remember: []countersign.Scope{countersign.ScopeThread}},
		{Match: "payments.refund", Effect: countersign.EffectAllow, Approvers: []string{"requester"}, Quorum: 1, Mode: countersign.ModeWait},
		{Match: "*", Effect: countersign.EffectDeny, Approvers: []string{"requester"}, Quorum: 1, Mode: countersign.ModeWait},
	}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Policy() = %+v\nwant %+v", p, want)
	}
	opts := c.EngineOptions()
	if opts.LeaseDuration != time.Minute || opts.MaxAttempts != 3 || !reflect.DeepEqual(opts.Policy, want) {
		t.Errorf("EngineOptions() = %+v", opts)
	}
	// The engine's own check passes; cmd/countersign builds the engine and
	// the worker from these options (TestEngineAcceptsWhatConfigAccepts).
	if err := p.Validate(); err != nil {
		t.Errorf("Policy().Validate: %v", err)
	}
	wo := c.WorkerOptions()
	if !reflect.DeepEqual(wo, countersign.WorkerOptions{PollInterval: 2 * time.Second, LeaseDuration: time.Minute, MaxConcurrency: 8,
		Sealer: countersign.SealerOptions{CheckpointEvery: time.Minute}}) {
		t.Errorf("WorkerOptions() = %+v", wo)
	}
	// Policy returns copies: changing them leaves the configuration alone.
	p.Rules[0].Approvers[0] = "role:changed"
	if c.PolicySpec.Rules[0].Approvers[0] != "role:finance" {
		t.Error("Policy() shares slices with the configuration")
	}
}

func TestAccessors(t *testing.T) {
	t.Parallel()
	c := parseOK(t, `
auth:
  api_keys:
    - {key: ck_dev_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key_sha256: 2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae, tenant: acme, actor: bob}
  jwt:
    issuer: https://auth.example.com/
    audience: countersign
    jwks_file: /etc/countersign/jwks.json
    claims: {tenant: org}
cors:
  allowed_origins: ["https://inbox.example.com", "*"]
metrics: {require_role: operator, proposal_counts_every: 5s}
events: {max_streams_per_actor: 2}
web:
  secure_cookies: always
  trusted_proxies: ["10.0.0.0/8", "fd00::/8", "192.0.2.7/32"]
`)
	keys := c.APIKeys()
	if sum := sha256.Sum256([]byte("ck_dev_alice")); len(keys) != 2 || keys[0].KeySHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("APIKeys() = %+v", keys)
	}
	if d := keys[0].Digest(); fmt.Sprintf("%x", d) != keys[0].KeySHA256 || keys[0].Key != "ck_dev_alice" {
		t.Errorf("API key 0: %+v", keys[0])
	}
	// "foo" hashes to 2c26…e7ae.
	if d := keys[1].Digest(); fmt.Sprintf("%x", d) != keys[1].KeySHA256 || keys[1].KeySHA256 != "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae" {
		t.Errorf("API key 1: %+v", keys[1])
	}
	if c.Auth.APIKeys[0].KeySHA256 != "" {
		t.Error("APIKeys() changed the configuration")
	}
	j := c.JWT()
	if j == nil || j.Issuer != "https://auth.example.com/" || j.JWKSFile != "/etc/countersign/jwks.json" ||
		j.Claims != (Claims{Tenant: "org", Actor: "sub", Roles: "roles", Kind: "ck_kind"}) {
		t.Errorf("JWT() = %+v", j)
	}
	if Default().JWT() != nil {
		t.Error("Default().JWT() is not nil")
	}
	if got := c.AllowedOrigins(); !reflect.DeepEqual(got, []string{"https://inbox.example.com", "*"}) {
		t.Errorf("AllowedOrigins() = %v", got)
	}
	if c.MetricsRole() != "operator" || Default().MetricsRole() != "" {
		t.Errorf("MetricsRole() = %q", c.MetricsRole())
	}
	if c.Metrics.ProposalCountsEvery != 5*time.Second || c.Events.MaxStreamsPerActor != 2 || c.Web.SecureCookies != SecureCookiesAlways {
		t.Errorf("metrics %+v, events %+v, web %+v", c.Metrics, c.Events, c.Web)
	}
	wantProxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("192.0.2.7/32")}
	if got := c.TrustedProxies(); !reflect.DeepEqual(got, wantProxies) {
		t.Errorf("TrustedProxies() = %v, want %v", got, wantProxies)
	}
	if got := Default().TrustedProxies(); len(got) != 0 {
		t.Errorf("Default().TrustedProxies() = %v", got)
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Worker.PollInterval = 20 * time.Second
	c.PolicySpec.Rules = []Rule{{Match: "a"}} // no effect, no mode
	err := c.Validate()
	errs := Errors(err)
	if len(errs) != 4 {
		t.Fatalf("Validate: %v", err)
	}
	for _, e := range errs {
		if e.File != "" || e.Line != 0 || e.Error() != e.Reason {
			t.Errorf("a problem of a configuration built in code names no file or line: %#v", e)
		}
	}
}

// Environment tests cannot run in parallel (t.Setenv).

func TestLoadEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:9000\nstore: sqlite:a.db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvListen, "")
	t.Setenv(EnvStore, "")
	c, err := Load(path)
	if err != nil || c.Listen != "127.0.0.1:9000" || c.Store != "sqlite:a.db" {
		t.Fatalf("Load = %+v, %v", c, err)
	}

	t.Setenv(EnvListen, ":8443")
	t.Setenv(EnvStore, "postgres://cs@db:5432/cs")
	c, err = Load(path)
	if err != nil || c.Listen != ":8443" || c.Store != "postgres://cs@db:5432/cs" {
		t.Fatalf("Load with overrides = %+v, %v", c, err)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after overrides: %v", err)
	}
	// Parse and Default read no environment.
	if c := parseOK(t, ""); c.Listen != DefaultListen || c.Store != DefaultStore {
		t.Errorf("Parse read the environment: %+v", c)
	}
	d := Default()
	if err := d.ApplyEnv(); err != nil || d.Listen != ":8443" {
		t.Errorf("Default().ApplyEnv() = %v, listen %q", err, d.Listen)
	}

	t.Setenv(EnvListen, "nowhere")
	t.Setenv(EnvStore, "mysql://x")
	_, err = Load(path)
	errs := Errors(err)
	if len(errs) != 2 ||
		!strings.Contains(errs[0].Error(), "environment variable COUNTERSIGN_LISTEN: listen: \"nowhere\": want host:port") ||
		!strings.Contains(errs[1].Error(), "environment variable COUNTERSIGN_STORE: store: unknown store") {
		t.Errorf("bad overrides: %v", err)
	}
}

func TestSetters(t *testing.T) {
	t.Parallel()
	c := parseOK(t, "listen: 127.0.0.1:1\n")
	if err := c.SetListen("0.0.0.0:80"); err != nil || c.Listen != "0.0.0.0:80" {
		t.Errorf("SetListen: %v", err)
	}
	if err := c.SetListen("0.0.0.0"); err == nil || c.Listen != "0.0.0.0:80" {
		t.Errorf("SetListen accepted a bad address: %v", err)
	}
	if err := c.SetStore("sqlite:/tmp/x.db"); err != nil || c.Store != "sqlite:/tmp/x.db" {
		t.Errorf("SetStore: %v", err)
	}
	var e *Error
	if err := c.SetStore("x"); !errors.As(err, &e) || !strings.HasPrefix(e.Reason, "store: ") {
		t.Errorf("SetStore(x) = %v", err)
	}
}

func TestLoadMissing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing.yaml")
	_, err := Load(path)
	var e *Error
	if !errors.As(err, &e) || e.File != path || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) = %v", err)
	}
	if want := path + ": read: no such file or directory"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestSecrets(t *testing.T) {
	c := parseOK(t, "webhook_secret_env: CS_TEST_WEBHOOK\nauth:\n  jwt: {issuer: i, audience: a, hs256_secret_env: CS_TEST_JWT}\n")
	t.Setenv("CS_TEST_WEBHOOK", "")
	t.Setenv("CS_TEST_JWT", "")
	if _, err := c.WebhookSecret(); !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "CS_TEST_WEBHOOK (named by webhook_secret_env) is empty") {
		t.Errorf("WebhookSecret unset: %v", err)
	}
	if _, err := c.HS256Secret(); !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "CS_TEST_JWT") {
		t.Errorf("HS256Secret unset: %v", err)
	}
	t.Setenv("CS_TEST_WEBHOOK", "whsec")
	t.Setenv("CS_TEST_JWT", "short")
	if s, err := c.WebhookSecret(); err != nil || string(s) != "whsec" {
		t.Errorf("WebhookSecret = %q, %v", s, err)
	}
	if _, err := c.HS256Secret(); err == nil || errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "at least 32") || strings.Contains(err.Error(), "short") {
		t.Errorf("HS256Secret short: %v", err)
	}
	long := strings.Repeat("k", 32)
	t.Setenv("CS_TEST_JWT", long)
	if s, err := c.HS256Secret(); err != nil || string(s) != long {
		t.Errorf("HS256Secret = %q, %v", s, err)
	}
	// Without HS256 there is no secret to read.
	for _, in := range []string{"", "auth:\n  jwt: {issuer: i, audience: a, jwks_file: k}\n"} {
		if _, err := parseOK(t, in).HS256Secret(); !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "not configured") {
			t.Errorf("HS256Secret without HS256: %v", err)
		}
	}
	t.Setenv(DefaultWebhookSecretEnv, "s")
	if s, err := Default().WebhookSecret(); err != nil || string(s) != "s" {
		t.Errorf("default WebhookSecret = %q, %v", s, err)
	}
}

// The log section: level and format pick the handler, and requests: false
// moves the per-request line down to debug.
func TestLogSection(t *testing.T) {
	t.Parallel()
	c := parseOK(t, "log:\n  level: warn\n  format: json\n  requests: false\n")
	if c.Log != (Log{Level: "warn", Format: "json", Requests: false}) {
		t.Fatalf("log = %+v", c.Log)
	}
	if c.Log.RequestLevel() != slog.LevelDebug || Default().Log.RequestLevel() != slog.LevelInfo {
		t.Errorf("request levels: %v with requests: false, %v by default", c.Log.RequestLevel(), Default().Log.RequestLevel())
	}
	var buf bytes.Buffer
	log := c.Log.Logger(&buf)
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "shown" || line["level"] != "WARN" {
		t.Fatalf("a warn-level JSON log wrote %q (%v)", buf.String(), err)
	}
	buf.Reset()
	text := parseOK(t, "log: {level: debug}\n").Log.Logger(&buf)
	text.Debug("detail", "k", 1)
	if got := buf.String(); !strings.Contains(got, "level=DEBUG msg=detail k=1") {
		t.Fatalf("a debug-level text log wrote %q", got)
	}
	for level, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError} {
		if got := (Log{Level: level}).SlogLevel(); got != want {
			t.Errorf("level %s = %v, want %v", level, got, want)
		}
	}
}

// TestPostgresSection checks postgres.max_conns: absent, null and 0 mean the
// default; a positive value is kept; a configuration built in code is
// validated as a file is.
func TestPostgresSection(t *testing.T) {
	t.Parallel()
	for yaml, want := range map[string]int{
		"":                                DefaultPostgresMaxConns,
		"postgres:\n":                     DefaultPostgresMaxConns,
		"postgres: {}\n":                  DefaultPostgresMaxConns,
		"postgres:\n  max_conns:\n":       DefaultPostgresMaxConns,
		"postgres: {max_conns: 0}\n":      DefaultPostgresMaxConns,
		"postgres: {max_conns: 1}\n":      1,
		"postgres: {max_conns: 64}\n":     64,
		"postgres:\n  max_conns: 0x10\n":  16,
		"postgres: {max_conns: 262143}\n": MaxPostgresMaxConns,
	} {
		if got := parseOK(t, yaml).Postgres.MaxConns; got != want {
			t.Errorf("%q: max_conns %d, want %d", yaml, got, want)
		}
	}
	for n, ok := range map[int]bool{0: true, 1: true, 100: true, -1: false, MaxPostgresMaxConns + 1: false, -1 << 40: false} {
		c := Default()
		c.Postgres.MaxConns = n
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("Validate with max_conns %d: %v", n, err)
		}
	}
}

// TestEscalationReachesThePolicy: a rule's escalate_after, escalate_to and
// remind_every become the engine rule's.
func TestEscalationReachesThePolicy(t *testing.T) {
	c, err := Parse("countersign.yaml", []byte("policy:\n  rules:\n    - {match: \"payments.*\", ttl: 2h, escalate_after: 30m, escalate_to: [\"role:manager\"], remind_every: 10m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := c.Policy().Rules[0]
	if r.EscalateAfter != 30*time.Minute || len(r.EscalateTo) != 1 || r.EscalateTo[0] != "role:manager" || r.RemindEvery != 10*time.Minute {
		t.Fatalf("rule %+v", r)
	}
}

// TestStoreSection: store is a URL, or a mapping of url and
// connect_timeout; connect_timeout defaults to 60s either way.
func TestStoreSection(t *testing.T) {
	t.Parallel()
	for yaml, want := range map[string]struct {
		store   string
		timeout time.Duration
	}{
		"":                                {DefaultStore, DefaultStoreConnectTimeout},
		"store: sqlite:x.db\n":            {"sqlite:x.db", DefaultStoreConnectTimeout},
		"store: {url: sqlite:y.db}\n":     {"sqlite:y.db", DefaultStoreConnectTimeout},
		"store:\n  connect_timeout: 5m\n": {DefaultStore, 5 * time.Minute},
		"store:\n  url: \"postgres://h/db\"\n  connect_timeout: 2s\n": {"postgres://h/db", 2 * time.Second},
	} {
		c := parseOK(t, yaml)
		if c.Store != want.store || c.StoreConnectTimeout != want.timeout {
			t.Errorf("%q: store %q, connect_timeout %v; want %q, %v", yaml, c.Store, c.StoreConnectTimeout, want.store, want.timeout)
		}
	}
	c := Default()
	c.StoreConnectTimeout = 0
	if err := c.Validate(); err == nil {
		t.Error("Validate accepted store.connect_timeout 0")
	}
}

// TestAuditSection: the audit section's fields, their defaults, and the
// sealer's options they give the worker.
func TestAuditSection(t *testing.T) {
	t.Parallel()
	c := parseOK(t, "audit:\n  signing_key_file: /etc/countersign/audit-ed25519.pem\n  checkpoint_every: 5m\n")
	if c.Audit != (Audit{SigningKeyFile: "/etc/countersign/audit-ed25519.pem", CheckpointEvery: 5 * time.Minute}) {
		t.Errorf("Audit = %+v", c.Audit)
	}
	if got := c.WorkerOptions().Sealer.CheckpointEvery; got != 5*time.Minute {
		t.Errorf("WorkerOptions().Sealer.CheckpointEvery = %v, want 5m", got)
	}
	if d := parseOK(t, "audit: {}\n").Audit; d != (Audit{CheckpointEvery: DefaultCheckpointEvery}) || DefaultCheckpointEvery != time.Minute {
		t.Errorf("an empty audit section = %+v, want no key, checkpoints every 1m", d)
	}
	built := Default()
	built.Audit.CheckpointEvery = 0
	if err := built.Validate(); err == nil || !strings.Contains(err.Error(), "audit.checkpoint_every: 0s: at least 1s") {
		t.Errorf("Validate of a configuration built with checkpoint_every 0: %v", err)
	}
}
