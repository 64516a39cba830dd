package config

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
)

// Who may sign what. A webhook backend verifies its requests with its
// action's secret, and a notification receiver with its target's: whoever
// holds a secret can sign any request its other holders accept. A receiver
// holding the webhook secret could send execute requests every backend
// obeys; a backend holding the JWT secret could mint bearer tokens. So each
// notification target has a secret no one else holds, and a webhook secret
// is shared only by the actions that name the same variable for it.

// secretKind says what a secret signs, and so what it must differ from.
type secretKind int

const (
	// secretNotify signs one notification target's requests: it must
	// differ from every other secret.
	secretNotify secretKind = iota
	// secretWebhook signs webhook requests: the actions that name one
	// variable share it, and it must differ from the other kinds and from
	// the webhook secrets of other variables.
	secretWebhook
	// secretOther authenticates something else (JWTs, API keys, a model's
	// API key, an MCP upstream's headers): signing secrets must differ
	// from it; whether two of these differ is not this file's concern.
	secretOther
	// secretState signs the MCP gateway's request states: like a
	// notification target's, it must differ from every other secret, or
	// whoever holds the other could forge a state that decides.
	secretState
)

// secretUse is one secret the configuration names.
type secretUse struct {
	path string // its field ("notifications[0].secret_env")
	env  string // the variable holding it; "" for an API key in the file
	kind secretKind
	// required: the server reads it at start, and fails without it.
	required bool
}

// secretUses lists the secrets the configuration names, signing ones
// first, each with the field that names it.
func (c *Config) secretUses() []secretUse {
	var out []secretUse
	for i := range c.Notifications {
		out = append(out, secretUse{path: item("notifications", i) + ".secret_env", env: c.Notifications[i].SecretEnv, kind: secretNotify, required: true})
	}
	// The top-level webhook secret comes before the actions' own, so that
	// an action's equal to it is the one blamed. It is required by the
	// actions that call a backend without a variable of their own;
	// otherwise it is only compared, when set.
	usesTop := false
	for i := range c.Actions {
		usesTop = usesTop || (c.Actions[i].callsBackend() && c.Actions[i].WebhookSecretEnv == "")
	}
	out = append(out, secretUse{path: "webhook_secret_env", env: c.WebhookSecretEnv, kind: secretWebhook, required: usesTop})
	for i := range c.Actions {
		if a := &c.Actions[i]; a.callsBackend() && a.WebhookSecretEnv != "" {
			out = append(out, secretUse{path: item("actions", i) + ".webhook_secret_env", env: a.WebhookSecretEnv, kind: secretWebhook, required: true})
		}
	}
	if j := c.Auth.JWT; j != nil && j.HS256SecretEnv != "" {
		out = append(out, secretUse{path: "auth.jwt.hs256_secret_env", env: j.HS256SecretEnv, kind: secretOther, required: true})
	}
	for i := range c.Agents {
		if env := c.Agents[i].Model.APIKeyEnv; env != "" {
			out = append(out, secretUse{path: item("agents", i) + ".model.api_key_env", env: env, kind: secretOther})
		}
	}
	if c.MCP.StateSecretEnv != "" {
		out = append(out, secretUse{path: "mcp.state_secret_env", env: c.MCP.StateSecretEnv, kind: secretState, required: true})
	}
	for i := range c.MCP.Servers {
		s := &c.MCP.Servers[i]
		for _, h := range sortedKeys(s.HeadersEnv) {
			out = append(out, secretUse{path: child(item("mcp.servers", i)+".headers_env", h), env: s.HeadersEnv[h], kind: secretOther})
		}
	}
	return out
}

// mustDiffer reports whether a secret of kind a and one of kind b must
// have different values, given whether they are named by the same
// variable.
func mustDiffer(a, b secretKind, sameVariable bool) bool {
	switch {
	case a == secretNotify || b == secretNotify, a == secretState || b == secretState:
		return true
	case a == secretWebhook && b == secretWebhook:
		// One variable named by several actions is one secret they share;
		// two variables are two secrets, meant to be different.
		return !sameVariable
	}
	return a == secretWebhook || b == secretWebhook
}

// blame picks which of two conflicting secrets, earlier and later in
// secretUses' order, an error names: the notification target's, else the
// webhook's, else the later one.
func blame(earlier, later secretUse) (named, other secretUse) {
	switch {
	case earlier.kind == secretState:
		return earlier, later
	case later.kind == secretState:
		return later, earlier
	}
	if later.kind <= earlier.kind {
		return later, earlier
	}
	return earlier, later
}

// secretNames checks, without reading the environment, that no two
// secrets that must differ are named by the same variable.
func (v *validator) secretNames(c *Config) {
	uses := c.secretUses()
	for i, a := range uses {
		for _, b := range uses[:i] {
			if a.env == "" || a.env != b.env || !mustDiffer(a.kind, b.kind, true) {
				continue
			}
			named, other := blame(b, a)
			v.fail(named.path, "%s is also %s%s: %s", named.env, other.path, v.at(other.path), why(named, other))
		}
	}
}

// at says where path is in the file, " (line N)", or that it is not there,
// for a field left to its default.
func (v *validator) at(path string) string {
	if l := v.line(path); l > 0 {
		return fmt.Sprintf(" (line %d)", l)
	}
	return " (its default)"
}

// why says why two secrets must differ.
func why(named, other secretUse) string {
	switch {
	case named.kind == secretNotify:
		return "each notification target needs a secret no one else holds, or its receiver could sign what the other's verifiers accept"
	case named.kind == secretState:
		return "the MCP request states' secret must be held by no one else, or its other holder could forge a state that decides a proposal"
	case other.kind == secretWebhook:
		return "an action's own webhook_secret_env must hold a secret of its own, or its backend could sign the other backends' requests"
	}
	return "a webhook backend holding it could sign what that secret authenticates"
}

// CheckSecrets reads, through getenv (os.Getenv when nil), the secrets the
// configuration names, as serve does at start, and reports each problem
// as an *Error naming the field (several are joined; see Errors):
//
//   - a secret serve needs whose variable is empty or unset (wrapping
//     ErrSecretUnset): each notification target's secret_env, the webhook
//     secret of each action that calls a backend (its own
//     webhook_secret_env, or the top-level one), auth.jwt.hs256_secret_env
//     when set;
//   - a notification target's secret equal to any other secret the file
//     names (another target's, a webhook secret, the JWT secret, an API
//     key, an agent's model API key, an MCP upstream's header value);
//   - a webhook secret equal to the JWT secret, an API key, a model's API
//     key or a header value, or to the webhook secret of another variable.
//
// No error repeats a secret. Serve and `countersign config validate` call
// it after Load.
func (c *Config) CheckSecrets(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	v := &validator{file: c.file, lines: c.lines}
	type read struct {
		secretUse
		digest [sha256.Size]byte
	}
	var have []read
	for _, u := range c.secretUses() {
		if u.env == "" {
			continue // no variable named: the file's own validation says so
		}
		val := getenv(u.env)
		if val == "" {
			if u.required {
				v.wrap(ErrSecretUnset, u.path, "environment variable %s is empty or unset", u.env)
			}
			continue
		}
		have = append(have, read{u, sha256.Sum256([]byte(val))})
	}
	for i, k := range c.Auth.APIKeys {
		if k.Key == "" && !sha256Hex.MatchString(k.KeySHA256) {
			continue
		}
		have = append(have, read{secretUse{path: item("auth.api_keys", i), kind: secretOther}, k.Digest()})
	}
	for i, a := range have {
		for _, b := range have[:i] {
			// The same variable twice is reported by Validate, not here.
			if (a.env != "" && a.env == b.env) || !mustDiffer(a.kind, b.kind, false) {
				continue
			}
			if subtle.ConstantTimeCompare(a.digest[:], b.digest[:]) == 1 {
				named, other := blame(b.secretUse, a.secretUse)
				v.fail(named.path, "%s holds the same value as %s%s: %s", describeSecret(named), describeSecret(other), v.at(other.path), why(named, other))
			}
		}
	}
	return join(v.errs)
}

// describeSecret names a secret by its variable, or by its field for an
// API key written in the file.
func describeSecret(u secretUse) string {
	if u.env == "" {
		return u.path
	}
	return fmt.Sprintf("environment variable %s (%s)", u.env, u.path)
}

// ActionWebhookSecretEnv names the variable whose secret signs the requests
// of c.Actions[i]: its own webhook_secret_env, or the top-level one.
func (c *Config) ActionWebhookSecretEnv(i int) string {
	if env := c.Actions[i].WebhookSecretEnv; env != "" {
		return env
	}
	return c.WebhookSecretEnv
}

// ActionWebhookSecret returns the raw value of the variable
// ActionWebhookSecretEnv names. It fails, wrapping ErrSecretUnset, when the
// variable is empty or unset.
func (c *Config) ActionWebhookSecret(i int) ([]byte, error) {
	if c.Actions[i].WebhookSecretEnv != "" {
		return secret(item("actions", i)+".webhook_secret_env", c.Actions[i].WebhookSecretEnv)
	}
	return secret("webhook_secret_env", c.WebhookSecretEnv)
}

// callsBackend reports whether the action makes webhook requests, and so
// needs a secret to sign them: every action but one its caller executes
// with no prepare or reconcile.
func (a *Action) callsBackend() bool {
	return !a.ExecutedByCaller() || a.Prepare != nil || a.Reconcile != nil
}
