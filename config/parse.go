package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Load reads and parses a configuration file, then applies the environment
// overrides (ApplyEnv). Every error is an *Error, or several joined.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Reason: "read: " + unwrapPath(err).Error(), err: err}
	}
	c, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if err := c.ApplyEnv(); err != nil {
		return nil, err
	}
	return c, nil
}

// unwrapPath drops the *fs.PathError wrapper, whose message repeats the path
// the *Error already names.
func unwrapPath(err error) error {
	var pe interface{ Unwrap() error }
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return pe.Unwrap()
	}
	return err
}

// Parse parses and validates a configuration file's contents; filename only
// labels errors. An empty file yields Default(). It is strict: an unknown
// key, a repeated key, a value of the wrong type or an invalid value is an
// error, and every problem found is reported, each as an *Error carrying the
// line of the offending node (several are joined with errors.Join). Parse
// does not read the environment.
func Parse(filename string, data []byte) (*Config, error) {
	root, err := parseYAML(data)
	if err != nil {
		return nil, yamlError(filename, data, err)
	}
	d := &decoder{file: filename, lines: map[string]int{}, bad: map[string]bool{}, budget: maxExpanded}
	c := Default()
	if root != nil && !isNull(resolve(root)) {
		d.config(c, root)
	}
	c.file, c.lines = filename, d.lines
	v := &validator{file: filename, lines: d.lines, skip: d.bad}
	v.config(c)
	if err := join(append(d.errs, v.errs...)); err != nil {
		return nil, err
	}
	return c, nil
}

// parseYAML returns the root node of the only document, or nil for an empty
// file.
func parseYAML(data []byte) (root *yaml.Node, err error) {
	defer func() {
		// The parser reports its errors by panicking internally and recovers
		// them itself; anything else escaping it is still a bad file, not a
		// reason to crash the process that reads it.
		if r := recover(); r != nil {
			root, err = nil, fmt.Errorf("yaml: unreadable file (%v)", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, &Error{Line: next.Line, Reason: "a second YAML document; a configuration file holds one"}
	}
	if doc.Kind != yaml.DocumentNode {
		return &doc, nil
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a parser error into an *Error with the line the parser
// names.
func yamlError(file string, data []byte, err error) error {
	var e *Error
	if errors.As(err, &e) {
		e.File = file
		return e
	}
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if parserProblems[m[2]] {
			line++ // the parser, unlike the scanner, reports a 0-based line
		}
		return &Error{File: file, Line: line, Reason: "invalid YAML: " + m[2], err: err}
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	return &Error{File: file, Line: guessLine(data, msg), Reason: "invalid YAML: " + msg, err: err}
}

// parserProblems are the parser's messages (the rest are the scanner's).
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

var unknownAnchor = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// guessLine finds the line of a parser error that names none. The parser
// leaves the line out when it is the first, when an alias names an unknown
// anchor, and when the reader meets a byte YAML forbids.
func guessLine(data []byte, msg string) int {
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		re := regexp.MustCompile(`\*` + regexp.QuoteMeta(m[1]) + `(?:[\s,\]}]|$)`)
		if loc := re.FindIndex(data); loc != nil {
			return 1 + bytes.Count(data[:loc[0]], []byte("\n"))
		}
		return 0
	}
	for i, r := range string(data) {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' && r != 0x85) {
			return 1 + bytes.Count(data[:i], []byte("\n"))
		}
	}
	return 1
}

// maxExpanded bounds the nodes converted into input schemas and the entries
// merge keys copy, so that aliases cannot expand a small file into a huge
// one.
const maxExpanded = 100_000

// maxDepth bounds nesting in input schemas and merge keys, which anchors
// can make cyclic.
const maxDepth = 64

// decoder turns YAML nodes into a Config, checking keys and types. Value
// checks are the validator's; the decoder records each field's line for it.
type decoder struct {
	file   string
	lines  map[string]int  // field path → line of its value
	bad    map[string]bool // paths whose value could not be decoded
	errs   []*Error
	budget int // expanded nodes left (maxExpanded)
}

// exhaust reports a runaway expansion, unless one was reported, and stops
// every further expansion: an anchor that contains itself would otherwise
// report at each step.
func (d *decoder) exhaust(path string, n *yaml.Node, format string, args ...any) {
	if d.budget >= 0 {
		d.fail(path, n, format, args...)
	}
	d.budget = -1
}

// spend takes one node from the budget, reporting once when it runs out.
func (d *decoder) spend(path string, n *yaml.Node) bool {
	d.budget--
	if d.budget == -1 {
		d.fail(path, n, "too large: more than %d nodes once aliases and merge keys are expanded", maxExpanded)
	}
	return d.budget >= 0
}

func (d *decoder) fail(path string, n *yaml.Node, format string, args ...any) {
	if path != "" {
		d.bad[path] = true
		format = path + ": " + format
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Reason: fmt.Sprintf(format, args...)})
}

// key is one known key of a mapping and how to decode its value.
type key struct {
	name   string
	decode func(path string, v *yaml.Node)
}

// resolve follows aliases. An alias never names another alias, so one step
// is enough; the loop is only a guard.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxDepth; i++ {
		n = n.Alias
	}
	if n == nil || n.Kind == yaml.AliasNode {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's type for error messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!str":
		return fmt.Sprintf("the string %q", n.Value)
	case "!!int":
		return "the integer " + n.Value
	case "!!float":
		return "the number " + n.Value
	case "!!bool":
		return "the boolean " + n.Value
	case "!!timestamp":
		return "the timestamp " + n.Value
	}
	return fmt.Sprintf("a %s value", n.ShortTag())
}

func child(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func item(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// pair is one key and value of a mapping, merge keys expanded.
type pair struct{ k, v *yaml.Node }

// pairs lists a mapping's entries. Keys must be strings and appear once;
// merge keys (<<: *anchor) contribute the entries the mapping does not set
// itself, the first merged mapping winning among merged ones.
func (d *decoder) pairs(path string, n *yaml.Node, depth int) []pair {
	if depth > maxDepth {
		d.exhaust(path, n, "merge keys nested more than %d deep", maxDepth)
		return nil
	}
	if d.budget < 0 {
		return nil
	}
	var merged, own []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			rv := resolve(v)
			var srcs []*yaml.Node
			switch rv.Kind {
			case yaml.MappingNode:
				srcs = []*yaml.Node{rv}
			case yaml.SequenceNode:
				for _, s := range rv.Content {
					srcs = append(srcs, resolve(s))
				}
			default:
				srcs = []*yaml.Node{rv}
			}
			for _, s := range srcs {
				switch {
				case s.Kind != yaml.MappingNode:
					d.fail(path, k, "a merge key (<<) takes a mapping or a list of mappings, not %s", describe(s))
					continue
				case s == n:
					d.fail(path, k, "a merge key (<<) names the mapping it is in")
					continue
				case !d.spend(path, k):
					return nil
				}
				for _, p := range d.pairs(path, s, depth+1) {
					// Merges of merges multiply: bound them as aliases are.
					if !d.spend(path, p.k) {
						return nil
					}
					merged = append(merged, p)
				}
			}
			continue
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			d.fail(path, k, "keys must be strings, not %s", describe(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(path, k, "key %q repeats the one on line %d", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		own = append(own, pair{k, v})
	}
	if len(merged) == 0 {
		return own
	}
	var out []pair
	for _, p := range merged {
		if _, ok := seen[p.k.Value]; !ok {
			seen[p.k.Value] = p.k.Line
			out = append(out, p)
		}
	}
	return append(out, own...)
}

// mapping decodes a mapping by its known keys. A null value leaves the
// field's default.
func (d *decoder) mapping(path string, n *yaml.Node, keys []key) {
	if n.Kind != yaml.MappingNode {
		if path == "" {
			d.fail(path, n, "a configuration is a mapping of keys to values, not %s", describe(n))
			return
		}
		d.fail(path, n, "want a mapping, not %s", describe(n))
		return
	}
	for _, p := range d.pairs(path, n, 0) {
		i := indexKey(keys, p.k.Value)
		if i < 0 {
			names := make([]string, len(keys))
			for j, k := range keys {
				names[j] = k.name
			}
			where := "at the top level"
			if path != "" {
				where = "in " + path
			}
			d.fail("", p.k, "unknown key %q %s (want %s)", p.k.Value, where, strings.Join(names, ", "))
			continue
		}
		sub := child(path, p.k.Value)
		d.lines[sub] = p.v.Line
		if v := resolve(p.v); !isNull(v) {
			keys[i].decode(sub, v)
		}
	}
}

func indexKey(keys []key, name string) int {
	for i, k := range keys {
		if k.name == name {
			return i
		}
	}
	return -1
}

// sequence decodes a list item by item.
func (d *decoder) sequence(path string, n *yaml.Node, each func(path string, v *yaml.Node)) bool {
	if n.Kind != yaml.SequenceNode {
		d.fail(path, n, "want a list, not %s", describe(n))
		return false
	}
	for i, it := range n.Content {
		p := item(path, i)
		d.lines[p] = it.Line
		each(p, resolve(it))
	}
	return true
}

// secretText decodes a string that is a secret: its errors never repeat the
// value.
func secretText(d *decoder, out *string) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.fail(path, n, "want a string (quote it)")
			return
		}
		*out = n.Value
	}
}

// text decodes a string, or a string type such as countersign.Mode.
func text[T ~string](d *decoder, out *T) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			hint := ""
			if n.Kind == yaml.ScalarNode {
				hint = fmt.Sprintf(" (quote it: %q)", n.Value)
			}
			d.fail(path, n, "want a string, not %s%s", describe(n), hint)
			return
		}
		*out = T(n.Value)
	}
}

func (d *decoder) boolean(out *bool) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.fail(path, n, "want true or false, not %s", describe(n))
			return
		}
		*out = b
	}
}

func (d *decoder) integer(out *int) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.fail(path, n, "want an integer, not %s", describe(n))
			return
		}
		if err := n.Decode(&i); err != nil || i > math.MaxInt32 || i < math.MinInt32 {
			d.fail(path, n, "integer %s out of range", n.Value)
			return
		}
		*out = int(i)
	}
}

func (d *decoder) duration(out *time.Duration) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.fail(path, n, "want a duration such as 10s, 5m or 1h30m, not %s", describe(n))
			return
		}
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			d.fail(path, n, "%q is not a duration (want one such as 10s, 5m or 1h30m)", n.Value)
			return
		}
		if v <= 0 {
			d.fail(path, n, "%s: must be positive", n.Value)
			return
		}
		*out = v
	}
}

// texts decodes a list of strings. An explicit empty list yields a non-nil
// empty slice, which the validator tells apart from an absent one.
func texts[T ~string](d *decoder, out *[]T) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		list := []T{}
		ok := d.sequence(path, n, func(p string, v *yaml.Node) {
			var s T
			text(d, &s)(p, v)
			list = append(list, s)
		})
		if ok {
			*out = list
		}
	}
}

func (d *decoder) config(c *Config, n *yaml.Node) {
	d.mapping("", n, []key{
		{"listen", text(d, &c.Listen)},
		{"store", func(p string, v *yaml.Node) {
			if v.Kind != yaml.MappingNode {
				text(d, &c.Store)(p, v)
				return
			}
			d.mapping(p, v, []key{
				{"url", text(d, &c.Store)},
				{"connect_timeout", d.duration(&c.StoreConnectTimeout)},
			})
		}},
		{"auto_migrate", d.boolean(&c.AutoMigrate)},
		{"auth", func(p string, v *yaml.Node) { d.auth(&c.Auth, p, v) }},
		{"cors", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{{"allowed_origins", texts(d, &c.CORS.AllowedOrigins)}})
		}},
		{"webhook_secret_env", text(d, &c.WebhookSecretEnv)},
		{"worker", func(p string, v *yaml.Node) {
			w := &c.Worker
			d.mapping(p, v, []key{
				{"poll_interval", d.duration(&w.PollInterval)},
				{"lease", d.duration(&w.Lease)},
				{"max_concurrency", d.integer(&w.MaxConcurrency)},
				{"max_attempts", d.integer(&w.MaxAttempts)},
			})
		}},
		{"postgres", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{
				{"max_conns", func(p string, v *yaml.Node) {
					d.integer(&c.Postgres.MaxConns)(p, v)
					if c.Postgres.MaxConns == 0 {
						c.Postgres.MaxConns = DefaultPostgresMaxConns // 0 means the default
					}
				}},
			})
		}},
		{"policy", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{
				{"default_ttl", d.duration(&c.PolicySpec.DefaultTTL)},
				{"rules", func(p string, v *yaml.Node) {
					c.PolicySpec.Rules = []Rule{}
					d.sequence(p, v, func(p string, v *yaml.Node) {
						c.PolicySpec.Rules = append(c.PolicySpec.Rules, d.rule(p, v))
					})
				}},
			})
		}},
		{"actions", func(p string, v *yaml.Node) {
			c.Actions = []Action{}
			d.sequence(p, v, func(p string, v *yaml.Node) {
				c.Actions = append(c.Actions, d.action(p, v))
			})
		}},
		{"metrics", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{
				{"require_role", text(d, &c.Metrics.RequireRole)},
				{"proposal_counts_every", d.duration(&c.Metrics.ProposalCountsEvery)},
			})
		}},
		{"events", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{{"max_streams_per_actor", d.integer(&c.Events.MaxStreamsPerActor)}})
		}},
		{"web", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{
				{"secure_cookies", text(d, &c.Web.SecureCookies)},
				{"trusted_proxies", texts(d, &c.Web.TrustedProxies)},
			})
		}},
		{"log", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{
				{"level", text(d, &c.Log.Level)},
				{"format", text(d, &c.Log.Format)},
				{"requests", d.boolean(&c.Log.Requests)},
			})
		}},
		{"text_decisions", func(p string, v *yaml.Node) { d.textDecisions(&c.TextDecisions, p, v) }},
		{"default_agent", text(d, &c.DefaultAgent)},
		{"agents", func(p string, v *yaml.Node) {
			c.Agents = []AgentSpec{}
			d.sequence(p, v, func(p string, v *yaml.Node) {
				c.Agents = append(c.Agents, d.agent(p, v))
			})
		}},
		{"mcp", func(p string, v *yaml.Node) { d.mcp(&c.MCP, p, v) }},
		{"notifications", func(p string, v *yaml.Node) { d.notifications(c, p, v) }},
		{"public_url", text(d, &c.PublicURL)},
		{"channels", func(p string, v *yaml.Node) { d.channels(c, p, v) }},
		{"tracing", func(p string, v *yaml.Node) { d.tracing(c, p, v) }},
		{"audit", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{
				{"signing_key_file", text(d, &c.Audit.SigningKeyFile)},
				{"checkpoint_every", d.duration(&c.Audit.CheckpointEvery)},
			})
		}},
	})
}

func (d *decoder) auth(a *Auth, path string, n *yaml.Node) {
	d.mapping(path, n, []key{
		{"api_keys", func(p string, v *yaml.Node) {
			a.APIKeys = []APIKey{}
			d.sequence(p, v, func(p string, v *yaml.Node) {
				var k APIKey
				d.mapping(p, v, []key{
					{"key", secretText(d, &k.Key)},
					{"key_sha256", text(d, &k.KeySHA256)},
					{"tenant", text(d, &k.Tenant)},
					{"actor", text(d, &k.Actor)},
					{"roles", texts(d, &k.Roles)},
					{"kind", text(d, &k.Kind)},
				})
				a.APIKeys = append(a.APIKeys, k)
			})
		}},
		{"jwt", func(p string, v *yaml.Node) {
			j := &JWT{Claims: Claims{Tenant: DefaultTenantClaim, Actor: DefaultActorClaim, Roles: DefaultRolesClaim, Kind: DefaultKindClaim}}
			d.mapping(p, v, []key{
				{"issuer", text(d, &j.Issuer)},
				{"audience", text(d, &j.Audience)},
				{"jwks_file", text(d, &j.JWKSFile)},
				{"hs256_secret_env", text(d, &j.HS256SecretEnv)},
				{"default_kind", text(d, &j.DefaultKind)},
				{"claims", func(p string, v *yaml.Node) {
					d.mapping(p, v, []key{
						{"tenant", text(d, &j.Claims.Tenant)},
						{"actor", text(d, &j.Claims.Actor)},
						{"roles", text(d, &j.Claims.Roles)},
						{"kind", text(d, &j.Claims.Kind)},
					})
				}},
			})
			a.JWT = j
		}},
	})
}

func (d *decoder) rule(path string, n *yaml.Node) Rule {
	r := Rule{
		Effect:    DefaultEffect,
		Approvers: []string{DefaultApprover},
		Quorum:    DefaultQuorum,
		Mode:      DefaultMode,
	}
	d.mapping(path, n, []key{
		{"match", text(d, &r.Match)},
		{"when", text(d, &r.When)},
		{"effect", text(d, &r.Effect)},
		{"approvers", texts(d, &r.Approvers)},
		{"quorum", d.integer(&r.Quorum)},
		{"forbid_self_approval", d.boolean(&r.ForbidSelfApproval)},
		{"ttl", d.duration(&r.TTL)},
		{"mode", text(d, &r.Mode)},
		{"channels", texts(d, &r.Channels)},
		{"notify", texts(d, &r.Notify)},
		{"step_up", text(d, &r.StepUp)},
		{"remember", texts(d, &r.Remember)},
		{"escalate_after", d.duration(&r.EscalateAfter)},
		{"escalate_to", texts(d, &r.EscalateTo)},
		{"remind_every", d.duration(&r.RemindEvery)},
	})
	return r
}

func (d *decoder) action(path string, n *yaml.Node) Action {
	a := Action{Version: DefaultActionVersion, Kind: DefaultKind, InputSchema: json.RawMessage(DefaultInputSchema)}
	d.mapping(path, n, []key{
		{"name", text(d, &a.Name)},
		{"version", text(d, &a.Version)},
		{"kind", text(d, &a.Kind)},
		{"description", text(d, &a.Description)},
		{"input_schema", func(p string, v *yaml.Node) {
			if v.Kind != yaml.MappingNode {
				d.fail(p, v, "want a mapping (a JSON Schema), not %s", describe(v))
				return
			}
			doc, ok := d.toJSON(p, v, 0)
			if !ok {
				return
			}
			raw, err := json.Marshal(doc)
			if err != nil {
				d.fail(p, v, "cannot be written as JSON: %v", err)
				return
			}
			a.InputSchema = raw
		}},
		{"confirmation", func(p string, v *yaml.Node) {
			d.mapping(p, v, []key{
				{"title", text(d, &a.Confirmation.Title)},
				{"verb", text(d, &a.Confirmation.Verb)},
			})
		}},
		{"replacement_key", text(d, &a.ReplacementKey)},
		{"idempotent", d.boolean(&a.Idempotent)},
		{"webhook_secret_env", text(d, &a.WebhookSecretEnv)},
		{"prepare", d.endpoint(&a.Prepare)},
		{"execute", d.executeEndpoint(&a.Execute)},
		{"reconcile", d.endpoint(&a.Reconcile)},
	})
	return a
}

func (d *decoder) endpoint(out **Endpoint) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		e := &Endpoint{Timeout: DefaultHookTimeout}
		d.mapping(path, n, []key{
			{"url", text(d, &e.URL)},
			{"timeout", d.duration(&e.Timeout)},
		})
		*out = e
	}
}

// executeEndpoint is endpoint, or `{by: caller}`.
func (d *decoder) executeEndpoint(out **Endpoint) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		e := &Endpoint{Timeout: DefaultHookTimeout}
		d.mapping(path, n, []key{
			{"url", text(d, &e.URL)},
			{"timeout", d.duration(&e.Timeout)},
			{"by", text(d, &e.By)},
		})
		*out = e
	}
}

// toJSON converts a YAML node into a value encoding/json writes: mappings
// with string keys, lists, strings, finite numbers, booleans and null.
func (d *decoder) toJSON(path string, n *yaml.Node, depth int) (any, bool) {
	n = resolve(n)
	if !d.spend(path, n) {
		return nil, false
	}
	if depth > maxDepth {
		d.exhaust(path, n, "nested more than %d levels deep", maxDepth)
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		obj := map[string]any{}
		ok := true
		for _, p := range d.pairs(path, n, 0) {
			v, vok := d.toJSON(path, p.v, depth+1)
			obj[p.k.Value] = v
			ok = ok && vok
		}
		return obj, ok
	case yaml.SequenceNode:
		arr := make([]any, 0, len(n.Content))
		ok := true
		for _, it := range n.Content {
			v, vok := d.toJSON(path, it, depth+1)
			arr = append(arr, v)
			ok = ok && vok
		}
		return arr, ok
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil, true
		case "!!str", "!!timestamp":
			return n.Value, true
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return b, true
			}
		case "!!int", "!!float":
			var x any
			if n.Decode(&x) == nil {
				switch x := x.(type) {
				case int, int64, uint64:
					return x, true
				case float64:
					if !math.IsInf(x, 0) && !math.IsNaN(x) {
						return x, true
					}
				}
			}
			d.fail(path, n, "the number %s has no JSON form", n.Value)
			return nil, false
		}
	}
	d.fail(path, n, "%s has no JSON form", describe(n))
	return nil, false
}
