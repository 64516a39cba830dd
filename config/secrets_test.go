package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// secretsFile names one secret of every kind: two notification targets, the
// top-level webhook secret (used by crm.lookup), an action's own, the JWT
// secret, two API keys (one by digest), a model's API key and an MCP
// upstream's header.
func secretsFile(keyDigest string) string {
	return `auth:
  api_keys:
    - {key: ck_live_alice_0001, tenant: acme, actor: alice}
    - {key_sha256: ` + keyDigest + `, tenant: acme, actor: bob}
  jwt: {issuer: i, audience: a, hs256_secret_env: JWT_SECRET}
webhook_secret_env: HOOKS_SECRET
actions:
  - name: payments.refund
    webhook_secret_env: PAYMENTS_SECRET
    execute: {url: "https://payments.internal/execute"}
  - name: crm.lookup
    kind: read
    execute: {url: "https://crm.internal/execute"}
  - name: notes.write
    execute: {by: caller}
agents:
  - name: support
    model: {provider: openai, name: gpt-4.1-mini, api_key_env: MODEL_KEY}
mcp:
  servers:
    - {name: docs, url: "https://mcp.internal/mcp", headers_env: {Authorization: MCP_AUTH}}
notifications:
  - {url: "https://hooks.internal/a?token=qs", events: [proposal.created], secret_env: NOTIFY_A}
  - {url: "https://hooks.internal/b", events: [proposal.settled], secret_env: NOTIFY_B}
`
}

// TestCheckSecrets: each notification target's secret and each webhook
// secret must be set and differ from the secrets others hold; the errors
// name the field and its line, wrap ErrSecretUnset when a variable is
// unset, and never hold a secret.
func TestCheckSecrets(t *testing.T) {
	t.Parallel()
	bobKey := "ck_live_bob_0002"
	d := sha256.Sum256([]byte(bobKey))
	c := parseOK(t, secretsFile(hex.EncodeToString(d[:])))
	distinct := map[string]string{
		"NOTIFY_A": "nA-7f3a91", "NOTIFY_B": "nB-2c84d0", "HOOKS_SECRET": "wh-top-55aa", "PAYMENTS_SECRET": "wh-pay-66bb",
		"JWT_SECRET": "jwt-0123456789abcdef0123456789abcdef", "MODEL_KEY": "sk-model-77cc", "MCP_AUTH": "Bearer mcp-88dd",
	}
	with := func(changes map[string]string) func(string) string {
		return func(name string) string {
			if v, ok := changes[name]; ok {
				return v
			}
			return distinct[name]
		}
	}
	tests := []struct {
		name   string
		env    map[string]string
		unset  bool   // the error wraps ErrSecretUnset
		reason string // "" for no error
		line   int
	}{
		{"all distinct", nil, false, "", 0},
		{"a target's variable unset", map[string]string{"NOTIFY_B": ""}, true,
			"notifications[1].secret_env: environment variable NOTIFY_B is empty or unset", 24},
		{"a target holds the webhook secret", map[string]string{"NOTIFY_A": distinct["HOOKS_SECRET"]}, false,
			"notifications[0].secret_env: environment variable NOTIFY_A (notifications[0].secret_env) holds the same value as environment variable HOOKS_SECRET (webhook_secret_env) (line 6): each notification target needs a secret no one else holds", 23},
		{"a target holds an action's own secret", map[string]string{"NOTIFY_B": distinct["PAYMENTS_SECRET"]}, false,
			"notifications[1].secret_env: environment variable NOTIFY_B (notifications[1].secret_env) holds the same value as environment variable PAYMENTS_SECRET (actions[0].webhook_secret_env) (line 9)", 24},
		{"two targets share a secret", map[string]string{"NOTIFY_B": distinct["NOTIFY_A"]}, false,
			"notifications[1].secret_env: environment variable NOTIFY_B (notifications[1].secret_env) holds the same value as environment variable NOTIFY_A (notifications[0].secret_env) (line 23)", 24},
		{"a target holds an API key", map[string]string{"NOTIFY_A": "ck_live_alice_0001"}, false,
			"notifications[0].secret_env: environment variable NOTIFY_A (notifications[0].secret_env) holds the same value as auth.api_keys[0] (line 3)", 23},
		{"a target holds an API key given by digest", map[string]string{"NOTIFY_A": bobKey}, false,
			"holds the same value as auth.api_keys[1] (line 4)", 23},
		{"a target holds the JWT secret", map[string]string{"NOTIFY_B": distinct["JWT_SECRET"]}, false,
			"holds the same value as environment variable JWT_SECRET (auth.jwt.hs256_secret_env) (line 5)", 24},
		{"a target holds a model's key", map[string]string{"NOTIFY_A": distinct["MODEL_KEY"]}, false,
			"holds the same value as environment variable MODEL_KEY (agents[0].model.api_key_env)", 23},
		{"a target holds an MCP header", map[string]string{"NOTIFY_A": distinct["MCP_AUTH"]}, false,
			"holds the same value as environment variable MCP_AUTH (mcp.servers[0].headers_env.Authorization)", 23},
		{"an action's own secret is the top-level one's value", map[string]string{"PAYMENTS_SECRET": distinct["HOOKS_SECRET"]}, false,
			"actions[0].webhook_secret_env: environment variable PAYMENTS_SECRET (actions[0].webhook_secret_env) holds the same value as environment variable HOOKS_SECRET (webhook_secret_env) (line 6): an action's own webhook_secret_env must hold a secret of its own", 9},
		{"a webhook secret is the JWT secret", map[string]string{"HOOKS_SECRET": distinct["JWT_SECRET"]}, false,
			"webhook_secret_env: environment variable HOOKS_SECRET (webhook_secret_env) holds the same value as environment variable JWT_SECRET (auth.jwt.hs256_secret_env) (line 5): a webhook backend holding it could sign what that secret authenticates", 6},
		{"a webhook secret is an API key", map[string]string{"PAYMENTS_SECRET": "ck_live_alice_0001"}, false,
			"actions[0].webhook_secret_env: environment variable PAYMENTS_SECRET (actions[0].webhook_secret_env) holds the same value as auth.api_keys[0]", 9},
		{"the top-level webhook secret unset", map[string]string{"HOOKS_SECRET": ""}, true,
			"webhook_secret_env: environment variable HOOKS_SECRET is empty or unset", 6},
		{"an action's own secret unset", map[string]string{"PAYMENTS_SECRET": ""}, true,
			"actions[0].webhook_secret_env: environment variable PAYMENTS_SECRET is empty or unset", 9},
		{"the JWT secret unset", map[string]string{"JWT_SECRET": ""}, true,
			"auth.jwt.hs256_secret_env: environment variable JWT_SECRET is empty or unset", 5},
		// Not the server's to read at start, nor to require: the agents and
		// the gateway report their own.
		{"a model's key and a header unset", map[string]string{"MODEL_KEY": "", "MCP_AUTH": ""}, false, "", 0},
		// Only signing secrets are compared.
		{"a model's key is a header's value", map[string]string{"MODEL_KEY": distinct["MCP_AUTH"]}, false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := c.CheckSecrets(with(tt.env))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("CheckSecrets: %v", err)
				}
				return
			}
			errs := Errors(err)
			if len(errs) != 1 {
				t.Fatalf("want one problem, got %d: %v", len(errs), err)
			}
			if e := errs[0]; e.File != "test.yaml" || e.Line != tt.line || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("got %q (line %d)\nwant line %d and a reason holding %q", e.Error(), e.Line, tt.line, tt.reason)
			}
			if got := errors.Is(err, ErrSecretUnset); got != tt.unset {
				t.Errorf("errors.Is(err, ErrSecretUnset) = %v, want %v", got, tt.unset)
			}
			for name := range distinct {
				if v := with(tt.env)(name); v != "" && strings.Contains(err.Error(), v) {
					t.Errorf("the error holds the value of %s: %v", name, err)
				}
			}
			for _, key := range []string{"ck_live_alice_0001", bobKey} {
				if strings.Contains(err.Error(), key) {
					t.Errorf("the error holds an API key: %v", err)
				}
			}
		})
	}
}

// TestCheckSecretsNeedsNoTopLevelSecretUnlessUsed: actions that all name
// their own secret, or call no backend, need no top-level webhook secret;
// it is still compared when it is set.
func TestCheckSecretsNeedsNoTopLevelSecretUnlessUsed(t *testing.T) {
	t.Parallel()
	c := parseOK(t, `actions:
  - {name: a, webhook_secret_env: A_SECRET, execute: {url: "https://a.internal/x"}}
  - {name: b, execute: {by: caller}}
notifications:
  - {url: "https://hooks.internal/n", events: [proposal.created], secret_env: NOTIFY}
`)
	env := map[string]string{"A_SECRET": "a-1", "NOTIFY": "n-1"}
	if err := c.CheckSecrets(func(k string) string { return env[k] }); err != nil {
		t.Fatalf("no top-level secret: %v", err)
	}
	env[DefaultWebhookSecretEnv] = "n-1"
	if err := c.CheckSecrets(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "notifications[0].secret_env") {
		t.Fatalf("a target holding the unused top-level secret: %v", err)
	}
}

func TestActionWebhookSecret(t *testing.T) {
	c := parseOK(t, `webhook_secret_env: CS_TEST_HOOKS
actions:
  - {name: a, webhook_secret_env: CS_TEST_A, execute: {url: "https://a.internal/x"}}
  - {name: b, execute: {url: "https://b.internal/x"}}
`)
	if c.Actions[0].WebhookSecretEnv != "CS_TEST_A" || c.ActionWebhookSecretEnv(0) != "CS_TEST_A" || c.ActionWebhookSecretEnv(1) != "CS_TEST_HOOKS" {
		t.Fatalf("webhook_secret_env: %q, %q, %q", c.Actions[0].WebhookSecretEnv, c.ActionWebhookSecretEnv(0), c.ActionWebhookSecretEnv(1))
	}
	t.Setenv("CS_TEST_A", "a-secret")
	t.Setenv("CS_TEST_HOOKS", "")
	if s, err := c.ActionWebhookSecret(0); err != nil || string(s) != "a-secret" {
		t.Fatalf("own secret: %q, %v", s, err)
	}
	if _, err := c.ActionWebhookSecret(1); !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "CS_TEST_HOOKS (named by webhook_secret_env)") {
		t.Fatalf("top-level secret unset: %v", err)
	}
}

func TestActionWebhookSecretInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		line       int
		reason     string
	}{
		{"not a name", "actions:\n  - {name: a, webhook_secret_env: \"a b\", execute: {url: \"https://a/x\"}}\n", 2,
			`actions[0].webhook_secret_env: "a b": want an environment variable name`},
		{"not a string", "actions:\n  - {name: a, webhook_secret_env: [A], execute: {url: \"https://a/x\"}}\n", 2,
			"actions[0].webhook_secret_env: want a string, not a list"},
		{"signs nothing", "actions:\n  - {name: a, webhook_secret_env: A_SECRET, execute: {by: caller}}\n", 2,
			"actions[0].webhook_secret_env: an action executed by its caller with no prepare or reconcile calls no backend"},
		{"the JWT's variable", "auth:\n  jwt: {issuer: i, audience: a, hs256_secret_env: JWT}\nactions:\n  - {name: a, webhook_secret_env: JWT, execute: {url: \"https://a/x\"}}\n", 4,
			"actions[0].webhook_secret_env: JWT is also auth.jwt.hs256_secret_env (line 2): a webhook backend holding it could sign what that secret authenticates"},
		{"the top-level's variable on JWT", "webhook_secret_env: JWT\nauth:\n  jwt: {issuer: i, audience: a, hs256_secret_env: JWT}\n", 1,
			"webhook_secret_env: JWT is also auth.jwt.hs256_secret_env (line 3)"},
		{"endpoint url with a space", "actions:\n  - {name: a, execute: {url: \"https://a/x?t=a b\"}}\n", 2,
			"actions[0].execute.url: byte 16 is ' '"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\n%+v", tt.yaml, c.Actions)
			}
			errs := Errors(err)
			if len(errs) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(errs), err)
			}
			if e := errs[0]; e.Line != tt.line || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("got %q (line %d)\nwant line %d and a reason holding %q", e.Error(), e.Line, tt.line, tt.reason)
			}
		})
	}
	// The same variable for several actions, and the top-level one named
	// again, is one shared secret.
	parseOK(t, "webhook_secret_env: HOOKS\nactions:\n  - {name: a, webhook_secret_env: HOOKS, execute: {url: \"https://a/x\"}}\n  - {name: b, webhook_secret_env: P, execute: {url: \"https://b/x\"}}\n  - {name: c, webhook_secret_env: P, execute: {url: \"https://c/x\"}}\n")
}

// TestCheckSecretsMCPState: the MCP request states' secret is required once
// named, and differs from every other secret, whatever its kind; the error
// blames it and never holds it.
func TestCheckSecretsMCPState(t *testing.T) {
	t.Parallel()
	c := parseOK(t, `auth:
  api_keys:
    - {key: ck_live_alice_0001, tenant: acme, actor: alice}
  jwt: {issuer: i, audience: a, hs256_secret_env: JWT_SECRET}
mcp:
  state_secret_env: MCP_STATE
  servers:
    - {name: docs, url: "https://mcp.internal/mcp", headers_env: {Authorization: MCP_AUTH}}
notifications:
  - {url: "https://hooks.internal/a", events: [proposal.created], secret_env: NOTIFY_A}
`)
	distinct := map[string]string{"MCP_STATE": "state-1f2e3d4c5b6a", "JWT_SECRET": "jwt-0123456789abcdef0123456789abcdef",
		"MCP_AUTH": "Bearer mcp-88dd", "NOTIFY_A": "nA-7f3a91"}
	for _, tt := range []struct {
		name   string
		env    map[string]string
		unset  bool
		reason string
	}{
		{"all distinct", nil, false, ""},
		{"unset", map[string]string{"MCP_STATE": ""}, true, "mcp.state_secret_env: environment variable MCP_STATE is empty or unset"},
		{"the JWT secret", map[string]string{"MCP_STATE": distinct["JWT_SECRET"]}, false,
			"mcp.state_secret_env: environment variable MCP_STATE (mcp.state_secret_env) holds the same value as environment variable JWT_SECRET (auth.jwt.hs256_secret_env) (line 4): the MCP request states' secret must be held by no one else"},
		{"an API key", map[string]string{"MCP_STATE": "ck_live_alice_0001"}, false,
			"mcp.state_secret_env: environment variable MCP_STATE (mcp.state_secret_env) holds the same value as auth.api_keys[0] (line 3)"},
		{"an upstream's header", map[string]string{"MCP_AUTH": distinct["MCP_STATE"]}, false,
			"mcp.state_secret_env: environment variable MCP_STATE (mcp.state_secret_env) holds the same value as environment variable MCP_AUTH"},
		{"a notification target's", map[string]string{"NOTIFY_A": distinct["MCP_STATE"]}, false,
			"mcp.state_secret_env: environment variable MCP_STATE (mcp.state_secret_env) holds the same value as environment variable NOTIFY_A"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(name string) string {
				if v, ok := tt.env[name]; ok {
					return v
				}
				return distinct[name]
			}
			err := c.CheckSecrets(getenv)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("CheckSecrets: %v", err)
				}
				return
			}
			errs := Errors(err)
			if len(errs) != 1 || !strings.Contains(errs[0].Reason, tt.reason) {
				t.Fatalf("got %v, want one problem holding %q", err, tt.reason)
			}
			if errors.Is(err, ErrSecretUnset) != tt.unset {
				t.Errorf("errors.Is(err, ErrSecretUnset) = %v, want %v", !tt.unset, tt.unset)
			}
			if strings.Contains(err.Error(), distinct["MCP_STATE"]) {
				t.Errorf("the error holds the secret: %v", err)
			}
		})
	}
	// One variable named for the states and for a notification target.
	_, err := Parse("test.yaml", []byte("mcp:\n  state_secret_env: SHARED\nnotifications:\n  - {url: \"https://hooks.internal/a\", events: [proposal.created], secret_env: SHARED}\n"))
	if err == nil || !strings.Contains(err.Error(), "mcp.state_secret_env: SHARED is also notifications[0].secret_env") {
		t.Fatalf("one variable for both: %v", err)
	}
}
