package config

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/condition"
	"github.com/countersign/countersign/internal/redact"
	"github.com/countersign/countersign/internal/schema"
)

// Validate checks a configuration, such as one built in code or changed
// after Parse, the way Parse does. Problems in a parsed configuration carry
// the lines of the file it was parsed from.
func (c *Config) Validate() error {
	v := &validator{file: c.file, lines: c.lines}
	v.config(c)
	return join(v.errs)
}

// validator checks values, naming each problem by its field's path and the
// line the decoder recorded for that path or its nearest ancestor.
type validator struct {
	file  string
	lines map[string]int
	skip  map[string]bool // paths the decoder already reported
	errs  []*Error
}

func (v *validator) fail(path, format string, args ...any) {
	if v.skipped(path) {
		return
	}
	v.errs = append(v.errs, &Error{File: v.file, Line: v.line(path), Reason: path + ": " + fmt.Sprintf(format, args...)})
}

// line finds the line of path, or of its nearest recorded ancestor: a
// missing field is reported where its mapping is.
func (v *validator) line(path string) int {
	for {
		if l, ok := v.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
}

// skipped reports whether the decoder already reported path, one of its
// ancestors or descendants: a value it could not decode is not judged again.
func (v *validator) skipped(path string) bool {
	for p := range v.skip {
		if related(p, path) {
			return true
		}
	}
	return false
}

// related reports whether path a is b, or one is below the other.
func related(a, b string) bool {
	within := func(a, b string) bool { // a is b or below it
		return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(a, b+"[")
	}
	return within(a, b) || within(b, a)
}

func (v *validator) config(c *Config) {
	if err := checkListen(c.Listen); err != nil {
		v.fail("listen", "%v", err)
	}
	if _, _, err := ParseStore(c.Store); err != nil {
		path := "store"
		if _, ok := v.lines["store.url"]; ok {
			path = "store.url"
		}
		v.fail(path, "%v", err)
	}
	if t := c.StoreConnectTimeout; t <= 0 {
		v.fail("store.connect_timeout", "%v: must be positive", t)
	}
	v.auth(&c.Auth)
	for i, o := range c.CORS.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			v.fail(item("cors.allowed_origins", i), "%v", err)
		}
	}
	if err := checkEnvName(c.WebhookSecretEnv); err != nil {
		v.fail("webhook_secret_env", "%v", err)
	}
	v.worker(&c.Worker)
	// 0 is the default (a file's 0 is resolved to it by Parse; one built in
	// code is resolved by pgstore).
	switch n := c.Postgres.MaxConns; {
	case n < 0:
		v.fail("postgres.max_conns", "%d: must be positive, or 0 for the default (%d)", n, DefaultPostgresMaxConns)
	case n > MaxPostgresMaxConns:
		v.fail("postgres.max_conns", "%d: more connections than PostgreSQL accepts (max_connections is at most %d)", n, MaxPostgresMaxConns)
	}
	v.policy(c)
	v.actions(c.Actions)
	if r := c.Metrics.RequireRole; r != "" && !isToken(r) {
		v.fail("metrics.require_role", "%q: a role has no spaces or control characters", r)
	}
	if e := c.Metrics.ProposalCountsEvery; e <= 0 {
		v.fail("metrics.proposal_counts_every", "%v: must be positive", e)
	}
	if n := c.Events.MaxStreamsPerActor; n <= 0 {
		v.fail("events.max_streams_per_actor", "%d: must be positive", n)
	}
	v.web(&c.Web)
	v.log(&c.Log)
	v.tracing(c.Tracing)
	v.textDecisions(c.TextDecisions)
	v.agents(c)
	v.mcp(&c.MCP)
	v.notifications(c)
	v.channels(c)
	v.secretNames(c)
	v.audit(&c.Audit)
}

// audit checks the audit section. The key file is read by serve and
// worker, which run where it is, not by validate.
func (v *validator) audit(a *Audit) {
	if _, set := v.lines["audit.signing_key_file"]; set && a.SigningKeyFile == "" {
		v.fail("audit.signing_key_file", `is empty: name the key's file, or leave the key out`)
	}
	if strings.ContainsRune(a.SigningKeyFile, 0) {
		v.fail("audit.signing_key_file", "the path holds a NUL byte")
	}
	if e := a.CheckpointEvery; e < MinCheckpointEvery {
		v.fail("audit.checkpoint_every", "%v: at least %v, the sealer's interval: checkpoints are signed between its seals", e, MinCheckpointEvery)
	}
}

func (v *validator) web(w *Web) {
	switch w.SecureCookies {
	case SecureCookiesAuto, SecureCookiesAlways, SecureCookiesNever:
	default:
		v.fail("web.secure_cookies", "%q: want auto, always or never", w.SecureCookies)
	}
	for i, s := range w.TrustedProxies {
		if err := checkProxy(s); err != nil {
			v.fail(item("web.trusted_proxies", i), "%v", err)
		}
	}
}

// checkProxy checks a trusted proxy's prefix: a CIDR, without host bits, so
// that what the file says is what is trusted.
func checkProxy(s string) error {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		if a, aerr := netip.ParseAddr(s); aerr == nil {
			return fmt.Errorf("%q: want a CIDR prefix; for this one address write %s", s, netip.PrefixFrom(a, a.BitLen()))
		}
		return fmt.Errorf("%q: want a CIDR prefix such as 10.0.0.0/8 or fd00::/8", s)
	}
	if m := p.Masked(); m != p {
		return fmt.Errorf("%q: has host bits set; the prefix is %s", s, m)
	}
	return nil
}

func checkListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port, such as 127.0.0.1:8080 or :8080", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: the port must be a number from 0 to 65535", addr)
	}
	if strings.ContainsFunc(host, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '/' }) {
		return fmt.Errorf("%q: the host is not a host name or an IP address", addr)
	}
	return nil
}

// The store drivers ParseStore names.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// ParseStore splits a store setting into its driver and location:
// "sqlite:PATH" gives StoreSQLite and PATH (relative to the working
// directory); a postgres:// or postgresql:// URL gives StorePostgres and the
// URL. Its errors never repeat a URL, which may hold a password.
func ParseStore(s string) (driver, location string, err error) {
	switch {
	case strings.HasPrefix(s, "sqlite:"):
		path := strings.TrimPrefix(s, "sqlite:")
		switch {
		case path == "":
			return "", "", errors.New(`"sqlite:" names no file: want sqlite:PATH, such as sqlite:countersign.db`)
		case strings.HasPrefix(path, "//"):
			// sqlite://x reads as a URL in some tools and as a path in others.
			return "", "", fmt.Errorf("%q: want sqlite:PATH without //, such as sqlite:countersign.db or sqlite:/var/lib/countersign.db", s)
		case strings.ContainsRune(path, 0):
			return "", "", errors.New("the sqlite path holds a NUL byte")
		}
		return StoreSQLite, path, nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		if _, err := url.Parse(s); err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return "", "", fmt.Errorf("invalid PostgreSQL URL: %v", err)
		}
		return StorePostgres, s, nil
	}
	scheme, _, _ := strings.Cut(s, ":")
	if len(scheme) > 20 || strings.ContainsAny(scheme, "/@") {
		scheme = ""
	}
	return "", "", fmt.Errorf("unknown store %q: want sqlite:PATH or a postgres:// URL", scheme+":…")
}

func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return fmt.Errorf("%q: want an origin such as https://inbox.example.com (scheme and host, no path), or *", o)
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkEnvName(name string) error {
	if !envName.MatchString(name) {
		return fmt.Errorf("%q: want an environment variable name (letters, digits and _)", name)
	}
	return nil
}

// isToken reports whether s is non-empty and free of spaces and control
// characters: what tenants, actors, roles and keys must be.
func isToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (v *validator) auth(a *Auth) {
	first := map[[sha256.Size]byte]string{} // key digest → path of its first holder
	for i := range a.APIKeys {
		k := &a.APIKeys[i]
		p := item("auth.api_keys", i)
		valid := false
		switch {
		case k.Key != "" && k.KeySHA256 != "":
			v.fail(p, "set key or key_sha256, not both")
		case k.Key == "" && k.KeySHA256 == "":
			v.fail(p, "needs key or key_sha256")
		case k.Key != "" && !isToken(k.Key):
			// The key is a secret: never repeat it.
			v.fail(p+".key", "a key has no spaces or control characters")
		case k.Key == "" && !sha256Hex.MatchString(k.KeySHA256):
			v.fail(p+".key_sha256", "want 64 lowercase hex digits: the SHA-256 of the key")
		default:
			valid = true
		}
		if valid {
			d := k.Digest()
			if f, dup := first[d]; dup {
				v.fail(p, "the same key as %s (line %d): each key stands for one identity", f, v.line(f))
			} else {
				first[d] = p
			}
		}
		v.token(p+".tenant", k.Tenant, "tenant")
		v.token(p+".actor", k.Actor, "actor")
		for j, r := range k.Roles {
			v.token(item(p+".roles", j), r, "role")
		}
		if k.Kind != "" && k.Kind != kindHuman && k.Kind != kindAgent {
			v.fail(p+".kind", "%q: want human or agent", k.Kind)
		}
	}
	if j := a.JWT; j != nil {
		const p = "auth.jwt"
		if j.Issuer == "" {
			v.fail(p+".issuer", "is required: the iss a token must carry")
		}
		if j.Audience == "" {
			v.fail(p+".audience", "is required: the aud a token must carry")
		}
		switch {
		case j.JWKSFile != "" && j.HS256SecretEnv != "":
			v.fail(p, "set jwks_file or hs256_secret_env, not both")
		case j.JWKSFile == "" && j.HS256SecretEnv == "":
			v.fail(p, "needs jwks_file (a JSON Web Key Set) or hs256_secret_env (an HS256 secret's environment variable)")
		case j.HS256SecretEnv != "":
			if err := checkEnvName(j.HS256SecretEnv); err != nil {
				v.fail(p+".hs256_secret_env", "%v", err)
			}
		}
		v.token(p+".claims.tenant", j.Claims.Tenant, "claim name")
		v.token(p+".claims.actor", j.Claims.Actor, "claim name")
		v.token(p+".claims.roles", j.Claims.Roles, "claim name")
		if j.Claims.Kind != "" { // empty in a Config built in Go: the default
			v.token(p+".claims.kind", j.Claims.Kind, "claim name")
		}
		if j.DefaultKind != "" && j.DefaultKind != kindHuman && j.DefaultKind != kindAgent {
			v.fail(p+".default_kind", "%q: want human or agent", j.DefaultKind)
		}
	}
}

func (v *validator) token(path, s, what string) {
	switch {
	case s == "":
		v.fail(path, "is required")
	case !isToken(s):
		v.fail(path, "%q: a %s has no spaces or control characters", s, what)
	}
}

func (v *validator) worker(w *Worker) {
	const p = "worker."
	if w.PollInterval <= 0 {
		v.fail(p+"poll_interval", "%v: must be positive", w.PollInterval)
	}
	if w.Lease <= 0 {
		v.fail(p+"lease", "%v: must be positive", w.Lease)
	}
	if w.MaxConcurrency <= 0 {
		v.fail(p+"max_concurrency", "%d: must be positive", w.MaxConcurrency)
	}
	if w.MaxAttempts <= 0 {
		v.fail(p+"max_attempts", "%d: must be positive", w.MaxAttempts)
	}
	// A lease must survive a missed renewal or two: renewals follow the poll.
	if w.PollInterval > 0 && w.Lease > 0 && w.PollInterval >= w.Lease/3 && !v.skipped(p+"lease") {
		v.fail(p+"poll_interval", "%v must be less than a third of worker.lease (%v)", w.PollInterval, w.Lease)
	}
}

// matchPattern is an action name where * may stand for any run of
// characters: what a rule's match and an agent's action glob may be (the
// engine's rule for a match, which Policy.Validate applies to rules).
var matchPattern = regexp.MustCompile(`^[A-Za-z0-9_.:/*-]{1,128}$`)

// ruleKeys maps the fields of countersign.Rule and countersign.Policy that
// a file sets to their keys, so that the engine's problems
// (*countersign.InvalidPolicyError, which name Go fields) are reported at
// the file's lines. Rule's fields are named as countersign.Rule's.
var ruleKeys = map[string]string{
	"DefaultTTL": "default_ttl",
	"Match":      "match", "When": "when", "Effect": "effect", "Approvers": "approvers", "Quorum": "quorum",
	"ForbidSelfApproval": "forbid_self_approval", "TTL": "ttl", "Mode": "mode", "Channels": "channels",
	"Notify": "notify", "StepUp": "step_up", "Remember": "remember", "EscalateAfter": "escalate_after", "EscalateTo": "escalate_to", "RemindEvery": "remind_every",
}

// policy checks the policy section with countersign.Policy.Validate, the
// engine's own check, placing each problem at its field's line. Before it
// come the checks of what only a file can write, since a file's fields
// hold their defaults resolved (a Go Rule's zero Quorum means 1, a file's
// quorum: 0 is a mistake; an empty Go list means the default, a file's
// explicit [] is a mistake), and after it the check that needs the file's
// actions: each when against the input schema of every action its match
// fits, which the engine makes when the action registers.
func (v *validator) policy(c *Config) {
	ps := &c.PolicySpec
	var reported []string // paths the file's own checks reported
	fail := func(path, format string, args ...any) {
		reported = append(reported, path)
		v.fail(path, format, args...)
	}
	if ps.DefaultTTL <= 0 {
		fail("policy.default_ttl", "%v: must be positive", ps.DefaultTTL)
	}
	for i := range ps.Rules {
		r := &ps.Rules[i]
		p := item("policy.rules", i)
		if r.Approvers != nil && len(r.Approvers) == 0 {
			fail(p+".approvers", "is empty: list at least one approver, or leave it out for requester")
		}
		if r.Quorum < 1 {
			fail(p+".quorum", "%d: must be at least 1", r.Quorum)
		}
		if r.Mode == "" {
			fail(p+".mode", "%q: want wait, two_phase or independent", r.Mode)
		}
		if r.Channels != nil && len(r.Channels) == 0 {
			fail(p+".channels", "is empty: no channel could decide; leave it out to accept every channel")
		}
		if r.EscalateTo != nil && len(r.EscalateTo) == 0 {
			fail(p+".escalate_to", "is empty: list whom to add, or leave escalation out")
		}
		if r.Notify != nil && len(r.Notify) == 0 {
			fail(p+".notify", "is empty: list the channels to announce on, or leave notify out")
		}
	}
	if err := c.Policy().Validate(); err != nil {
		for _, e := range unjoin(err) {
			pe, ok := e.(*countersign.InvalidPolicyError)
			if !ok { // Validate reports nothing else; should it, the file still fails
				v.fail("policy", "%v", e)
				continue
			}
			// A field the file's checks found wrong, or its rule, is not
			// judged again: quorum: 0 is not also unreachable.
			path, reason := v.policyProblem(pe)
			if !slices.ContainsFunc(reported, func(r string) bool { return related(r, path) }) {
				v.fail(path, "%s", reason)
			}
		}
	}
	for i := range ps.Rules {
		v.when(item("policy.rules", i), &ps.Rules[i], c.Actions)
	}
}

// policyProblem places one of the engine's problems in the file: its path
// ("policy.rules[2].approvers[1]") and its reason, the engine's, but for a
// repeated match, which names the earlier rule's path and line.
func (v *validator) policyProblem(e *countersign.InvalidPolicyError) (path, reason string) {
	path, reason = "policy", e.Reason
	if e.Rule >= 0 {
		path = item("policy.rules", e.Rule)
	}
	switch key, known := ruleKeys[e.Field]; {
	case known:
		path += "." + key
		if e.Item >= 0 {
			path = item(path, e.Item)
		}
	case e.Field != "": // a field no file sets: named as in Go
		reason = "field " + e.Field + ": " + reason
	}
	if e.Earlier >= 0 {
		f := item("policy.rules", e.Earlier)
		reason = fmt.Sprintf("%q repeats %s (line %d), which has no when and so always applies first: this rule never applies", e.Match, f, v.line(f))
	}
	return path, reason
}

// when compiles a rule's condition against the input schema of every
// configured action its match fits, as the engine will when it registers
// them, so that a type error or a field the schema cannot have fails here,
// at the when's line, rather than at start-up. A condition that does not
// compile alone is Policy.Validate's to report.
func (v *validator) when(p string, r *Rule, actions []Action) {
	if r.When == "" {
		return
	}
	if _, err := condition.Compile(r.When, nil); err != nil {
		return
	}
	for i := range actions {
		a := &actions[i]
		if a.Name == "" || !countersign.MatchGlob(r.Match, a.Name) || !json.Valid(a.InputSchema) {
			continue
		}
		if _, err := condition.Compile(r.When, a.InputSchema); err != nil {
			ap := item("actions", i)
			v.fail(p+".when", "%q, for action %s (%s, line %d): %v", r.When, a.Name, ap, v.line(ap), err)
		}
	}
}

// actionName is countersign's rule for action names.
var actionName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$`)

func (v *validator) actions(actions []Action) {
	first := map[string]string{} // name → path of the first action with it
	for i := range actions {
		a := &actions[i]
		p := item("actions", i)
		before := len(v.errs)
		switch {
		case a.Name == "":
			v.fail(p+".name", "is required")
		case !actionName.MatchString(a.Name):
			v.fail(p+".name", "%q: want 1-128 of [A-Za-z0-9_.:/-], not starting with . : / or -", a.Name)
		default:
			if f, dup := first[a.Name]; dup {
				v.fail(p+".name", "%q is already the name of %s (line %d)", a.Name, f, v.line(f))
			} else {
				first[a.Name] = p
			}
		}
		if a.Version == "" {
			v.fail(p+".version", "is required")
		}
		if a.Kind != string(countersign.KindRead) && a.Kind != string(countersign.KindWrite) {
			v.fail(p+".kind", "%q: want read or write", a.Kind)
		}
		var doc any
		if len(a.InputSchema) > 0 {
			if err := json.Unmarshal(a.InputSchema, &doc); err != nil {
				v.fail(p+".input_schema", "not JSON: %v", err)
			} else if _, isObj := doc.(map[string]any); !isObj {
				v.fail(p+".input_schema", "want a mapping (a JSON Schema)")
			} else if _, err := schema.Compile(a.InputSchema); err != nil {
				v.fail(p+".input_schema", "%v", err)
			}
		}
		v.template(p+".confirmation.title", a.Confirmation.Title, doc)
		v.template(p+".replacement_key", a.ReplacementKey, doc)
		execute := a.Execute
		switch {
		case execute == nil:
			v.fail(p+".execute", "is required: {url: …, timeout: …}, or {by: caller}")
		case execute.By != "" && execute.By != ExecuteByCaller:
			v.fail(p+".execute.by", "%q: want caller (or no by, and a url)", execute.By)
		case execute.By == ExecuteByCaller && execute.URL != "":
			v.fail(p+".execute.url", "an action executed by its caller has no execute url")
		case execute.By == ExecuteByCaller:
			execute = nil // nothing to call
		}
		switch {
		case a.WebhookSecretEnv == "":
		case !a.callsBackend():
			v.fail(p+".webhook_secret_env", "an action executed by its caller with no prepare or reconcile calls no backend: it signs nothing")
		default:
			if err := checkEnvName(a.WebhookSecretEnv); err != nil {
				v.fail(p+".webhook_secret_env", "%v", err)
			}
		}
		for _, e := range []struct {
			name string
			ep   *Endpoint
		}{{"prepare", a.Prepare}, {"execute", execute}, {"reconcile", a.Reconcile}} {
			if e.ep != nil {
				if e.ep.By != "" && e.name != "execute" {
					v.fail(p+"."+e.name+".by", "only execute takes by")
				}
				v.endpoint(p+"."+e.name, e.ep)
			}
		}
		if len(v.errs) > before || v.skipped(p) {
			continue
		}
		// The webhook package builds the action with NewRawAction: what
		// passed here must pass there.
		spec := countersign.RawActionSpec{
			Name: a.Name, Version: a.Version, Kind: countersign.Kind(a.Kind), Description: a.Description,
			InputSchema: a.InputSchema, Idempotent: a.Idempotent,
			Confirmation:   countersign.Confirmation{Title: a.Confirmation.Title, Verb: a.Confirmation.Verb},
			ReplacementKey: a.ReplacementKey,
		}
		if a.ExecutedByCaller() {
			spec.CallerExecuted = true
		} else {
			spec.Hooks.Execute = func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				return nil, countersign.ErrNotApplied
			}
		}
		_, err := countersign.NewRawAction(spec)
		if err != nil {
			v.fail(p, "%v", err)
		}
	}
}

var placeholder = regexp.MustCompile(`\{[A-Za-z0-9_.-]+\}`)

// template checks {path} placeholders: their syntax, as the engine does,
// and, where the input schema closes its objects, that each path names a
// declared property, so a misspelt placeholder does not render empty.
func (v *validator) template(path, t string, schemaDoc any) {
	ms := placeholder.FindAllString(t, -1)
	if strings.Count(t, "{") != len(ms) {
		v.fail(path, "%q: placeholders are {path}, a dot-separated path of letters, digits, _ and -", t)
		return
	}
	for _, m := range ms {
		if undeclared(schemaDoc, strings.Split(m[1:len(m)-1], ".")) {
			v.fail(path, "%s names no property of input_schema", m)
		}
	}
}

// undeclared reports whether a placeholder path certainly leaves the input
// schema: some step names no property of an object schema that declares its
// properties and allows no others. Schemas that compose or refer elsewhere
// are not judged.
func undeclared(doc any, path []string) bool {
	for _, step := range path {
		s, ok := doc.(map[string]any)
		if !ok {
			return false
		}
		for _, k := range []string{"$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "if", "patternProperties", "dependentSchemas", "unevaluatedProperties"} {
			if _, has := s[k]; has {
				return false
			}
		}
		props, ok := s["properties"].(map[string]any)
		if !ok || s["additionalProperties"] != false {
			return false
		}
		if doc, ok = props[step]; !ok {
			return true
		}
	}
	return false
}

func (v *validator) endpoint(path string, e *Endpoint) {
	u, err := url.Parse(e.URL)
	switch {
	case e.URL == "":
		v.fail(path+".url", "is required")
	case err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "":
		v.fail(path+".url", "want an absolute http:// or https:// URL without a #fragment")
	case u.User != nil:
		v.fail(path+".url", "must not hold credentials: requests are signed with webhook_secret_env's secret")
	default:
		if err := redact.CheckURL(e.URL); err != nil {
			v.fail(path+".url", "%v", err)
		}
	}
	if e.Timeout <= 0 {
		v.fail(path+".timeout", "%v: must be positive", e.Timeout)
	}
}
