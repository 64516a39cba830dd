package config

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
	"go.yaml.in/yaml/v3"
)

// The model providers of an agent's model.provider.
const (
	// ProviderOpenAI is any OpenAI-compatible chat-completions endpoint.
	ProviderOpenAI = "openai"
	// ProviderAnthropic is Anthropic's Messages API.
	ProviderAnthropic = "anthropic"
	// ProviderScripted is the deterministic scripted model (no network),
	// for tests and the demo.
	ProviderScripted = "scripted"
)

// DefaultMaxSteps is an agent's max_steps when the file leaves it out or
// writes 0: the model calls one run may make.
const DefaultMaxSteps = agent.DefaultMaxSteps

// MaxAgentNameLen bounds an agent's name, which appears in URL paths
// (/v1/agui/{agent}) and in every run.
const MaxAgentNameLen = 64

// AgentSpec is one agent of the agents section. The composition root
// (cmd/countersign) turns it into an agent.Agent with its model.
type AgentSpec struct {
	// Name names the agent in messages ("agent": NAME), runs and the AG-UI
	// route (/v1/agui/NAME): 1 to MaxAgentNameLen of [A-Za-z0-9_.-], not
	// "." or "..", unique in the file.
	Name string
	// Instructions are the model's standing instructions (a system prompt).
	Instructions string
	// Model says which model answers for the agent.
	Model ModelSpec
	// Actions are globs over action names ("payments.*", "*" standing for
	// any run of characters, as in policy rules). The model is offered the
	// actions they match that the policy does not deny. Empty: every
	// action. When the file configures actions, each glob must match one of
	// them, so that a misspelt glob does not silently offer nothing.
	Actions []string
	// MaxSteps bounds the model calls of one run. Default DefaultMaxSteps,
	// which a file's 0 also means.
	MaxSteps int
}

// ModelSpec is an agent's model section. Which fields apply depends on the
// provider: Name, BaseURL and APIKeyEnv for openai and anthropic, Scripted
// (the section's rules and after_tool) for scripted; the others must be
// left out.
type ModelSpec struct {
	// Provider is openai, anthropic or scripted. Required.
	Provider string
	// Name is the provider's model name, like "gpt-4.1-mini". Required for
	// openai and anthropic.
	Name string
	// BaseURL is the endpoint's http or https base URL, such as
	// "http://127.0.0.1:11434/v1" for a local OpenAI-compatible server.
	// Empty: the provider's own API.
	BaseURL string
	// APIKeyEnv names the environment variable holding the API key, which
	// never lives in the file; read by the composition root when it builds
	// the model. Required for openai and anthropic on the provider's own
	// API; with a BaseURL it may be left out, for a local endpoint that
	// wants no key (then none is sent).
	APIKeyEnv string
	// Scripted is a scripted model's rules and after_tool, written in the
	// model section itself.
	Scripted scripted.Config
}

// onLine is " (line N)" naming path's line, or "" when it has none (a
// configuration built in code).
func (v *validator) onLine(path string) string {
	if l := v.line(path); l > 0 {
		return fmt.Sprintf(" (line %d)", l)
	}
	return ""
}

// wrap is fail with a cause, which errors.Is and errors.As find.
func (v *validator) wrap(cause error, path, format string, args ...any) {
	n := len(v.errs)
	v.fail(path, format, args...)
	if len(v.errs) > n {
		v.errs[n].err = cause
	}
}

// DefaultAgentName returns default_agent: the agent that answers a message
// naming none. Empty: such a message starts no run (it is stored for an
// external agent), whatever agents the file configures.
func (c *Config) DefaultAgentName() string { return c.DefaultAgent }

func (d *decoder) agent(path string, n *yaml.Node) AgentSpec {
	a := AgentSpec{MaxSteps: DefaultMaxSteps}
	d.mapping(path, n, []key{
		{"name", text(d, &a.Name)},
		{"instructions", text(d, &a.Instructions)},
		{"model", func(p string, v *yaml.Node) { d.model(&a.Model, p, v) }},
		{"actions", texts(d, &a.Actions)},
		{"max_steps", func(p string, v *yaml.Node) {
			d.integer(&a.MaxSteps)(p, v)
			if a.MaxSteps == 0 {
				a.MaxSteps = DefaultMaxSteps // 0 means the default
			}
		}},
	})
	return a
}

func (d *decoder) model(m *ModelSpec, path string, n *yaml.Node) {
	d.mapping(path, n, []key{
		{"provider", text(d, &m.Provider)},
		{"name", text(d, &m.Name)},
		{"base_url", text(d, &m.BaseURL)},
		// A name, but where a key pasted by mistake would land: the decoder's
		// errors do not repeat it.
		{"api_key_env", secretText(d, &m.APIKeyEnv)},
		{"rules", func(p string, v *yaml.Node) {
			m.Scripted.Rules = []scripted.Rule{}
			d.sequence(p, v, func(p string, v *yaml.Node) {
				m.Scripted.Rules = append(m.Scripted.Rules, d.scriptedRule(p, v))
			})
		}},
		{"after_tool", text(d, &m.Scripted.AfterTool)},
	})
}

func (d *decoder) scriptedRule(path string, n *yaml.Node) scripted.Rule {
	var r scripted.Rule
	d.mapping(path, n, []key{
		{"match", text(d, &r.Match)},
		{"say", text(d, &r.Say)},
		{"call", func(p string, v *yaml.Node) {
			call := &scripted.Call{}
			d.mapping(p, v, []key{
				{"action", text(d, &call.Action)},
				{"client_tool", text(d, &call.ClientTool)},
				{"input", func(p string, v *yaml.Node) {
					if v.Kind == yaml.MappingNode {
						// The template is JSON text with {name} placeholders,
						// which YAML would read as nested mappings.
						d.fail(p, v, "want a string: the JSON text of the input, in single quotes, such as '{\"amount\": {amount}}'")
						return
					}
					text(d, &call.Input)(p, v)
				}},
			})
			r.Call = call
		}},
	})
	return r
}

// agentName is what an agent's name may be: one URL path segment that needs
// no escaping.
var agentName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

func (v *validator) agents(c *Config) {
	first := map[string]string{} // name → path of the first agent with it
	known, unread := map[string]bool{}, false
	for i := range c.Agents {
		a := &c.Agents[i]
		p := item("agents", i)
		known[a.Name] = true
		unread = unread || v.skipped(p+".name")
		switch {
		case a.Name == "":
			v.fail(p+".name", "is required")
		case len(a.Name) > MaxAgentNameLen || !agentName.MatchString(a.Name) || a.Name == "." || a.Name == "..":
			v.fail(p+".name", "%q: want 1-%d of [A-Za-z0-9_.-] (it is a URL path segment), not . or ..", a.Name, MaxAgentNameLen)
		default:
			if f, dup := first[a.Name]; dup {
				v.fail(p+".name", "%q is already the name of %s%s", a.Name, f, v.onLine(f))
			} else {
				first[a.Name] = p
			}
		}
		v.model(p+".model", a, c.Actions)
		v.agentActions(p+".actions", a.Actions, c.Actions)
		if a.MaxSteps < 0 {
			v.fail(p+".max_steps", "%d: must be positive, or 0 for the default (%d)", a.MaxSteps, DefaultMaxSteps)
		}
	}
	switch d := c.DefaultAgent; {
	case d == "":
	case len(c.Agents) == 0:
		v.fail("default_agent", "%q names no agent: the file configures none", d)
	case !known[d] && !unread:
		if len(first) == 0 {
			v.fail("default_agent", "%q names no agent", d)
		} else {
			v.fail("default_agent", "%q names no agent (want one of %s)", d, strings.Join(slices.Sorted(maps.Keys(first)), ", "))
		}
	}
}

// agentActions checks an agent's action globs. They are checked against
// the file's actions only when it configures some: actions can also come
// from outside the file (the demo's, or ones a program registers itself),
// and a file without actions says nothing about those.
func (v *validator) agentActions(path string, globs []string, actions []Action) {
	if globs != nil && len(globs) == 0 {
		v.fail(path, "is empty: leave it out to offer every action")
	}
	for j, g := range globs {
		p := item(path, j)
		switch {
		case g == "":
			v.fail(p, "is empty: want an action name or a glob such as payments.*")
		case !matchPattern.MatchString(g):
			v.fail(p, "%q: want an action name or a glob of [A-Za-z0-9_.:/-] and *", g)
		case slices.Index(globs, g) < j:
			v.fail(p, "%q is listed twice", g)
		case len(actions) > 0 && !slices.ContainsFunc(actions, func(a Action) bool { return countersign.MatchGlob(g, a.Name) }):
			v.fail(p, "%q matches none of the actions the file configures", g)
		}
	}
}

// model checks an agent's model section for its provider.
func (v *validator) model(path string, a *AgentSpec, actions []Action) {
	m := &a.Model
	if m.Provider == "" && m.Name == "" && m.BaseURL == "" && m.APIKeyEnv == "" && m.Scripted.Rules == nil && m.Scripted.AfterTool == "" {
		v.fail(path, "is required: {provider: openai | anthropic | scripted, …}")
		return
	}
	switch m.Provider {
	case ProviderOpenAI, ProviderAnthropic:
		if m.Name == "" {
			v.fail(path+".name", "is required: the provider's model name, such as gpt-4.1-mini")
		} else if !isToken(m.Name) {
			v.fail(path+".name", "%q: a model name has no spaces or control characters", m.Name)
		}
		if m.BaseURL != "" {
			v.baseURL(path+".base_url", m.BaseURL)
		}
		if m.APIKeyEnv != "" || m.BaseURL == "" {
			v.apiKeyEnv(path+".api_key_env", m.APIKeyEnv)
		}
		if m.Scripted.Rules != nil {
			v.fail(path+".rules", "only a scripted model has rules (this one's provider is %s)", m.Provider)
		}
		if m.Scripted.AfterTool != "" {
			v.fail(path+".after_tool", "only a scripted model has after_tool (this one's provider is %s)", m.Provider)
		}
	case ProviderScripted:
		for _, f := range []struct{ name, value string }{{"name", m.Name}, {"base_url", m.BaseURL}, {"api_key_env", m.APIKeyEnv}} {
			if f.value != "" {
				v.fail(path+"."+f.name, "a scripted model has no %s: it answers from its rules, with no network", f.name)
			}
		}
		v.scripted(path, a, actions)
	case "":
		v.fail(path+".provider", "is required: openai, anthropic or scripted")
	default:
		v.fail(path+".provider", "%q: want openai, anthropic or scripted", m.Provider)
	}
}

// scripted checks a scripted model's rules as scripted.New does, placing
// each problem at its field, and checks that each call names an action
// the agent offers.
func (v *validator) scripted(path string, a *AgentSpec, actions []Action) {
	if _, err := scripted.New(a.Model.Scripted); err != nil {
		for _, e := range unjoin(err) {
			if ce, ok := e.(*scripted.ConfigError); ok {
				v.fail(path+"."+ce.Field, "%s", ce.Reason)
			} else {
				v.fail(path, "%v", e)
			}
		}
	}
	offers := (&agent.Agent{Actions: a.Actions}).Offers
	for i, r := range a.Model.Scripted.Rules {
		if r.Call == nil || r.Call.Action == "" {
			continue // none, or a client tool: the caller offers it, or the run fails saying so
		}
		p := item(path+".rules", i) + ".call.action"
		switch name := r.Call.Action; {
		case !offers(name):
			v.fail(p, "%q is not among the agent's actions (%s): the model could never call it", name, strings.Join(a.Actions, ", "))
		case len(actions) > 0 && !slices.ContainsFunc(actions, func(a Action) bool { return a.Name == name }):
			v.fail(p, "%q is none of the actions the file configures", name)
		}
	}
}

// baseURL checks a model's endpoint. Its errors never repeat the URL, which
// may hold credentials.
func (v *validator) baseURL(path, s string) {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "":
		v.fail(path, "want an absolute http:// or https:// URL without a #fragment, such as http://127.0.0.1:11434/v1")
	case u.User != nil:
		v.fail(path, "must not hold credentials: the key comes from api_key_env")
	}
}

// apiKeyEnv checks the name of a key's variable. Its errors never repeat
// the value: the likeliest mistake is the key itself written there.
func (v *validator) apiKeyEnv(path, name string) {
	switch {
	case name == "":
		v.fail(path, "is required: the environment variable that holds the API key, such as OPENAI_API_KEY (only a model with a base_url, such as a local server's, may have none)")
	case looksLikeKey(name):
		v.fail(path, "looks like an API key, not the name of an environment variable: put the key in the environment and name the variable here (and revoke the key if this file was shared)")
	case !envName.MatchString(name):
		v.fail(path, "want an environment variable name (letters, digits and _), such as OPENAI_API_KEY")
	}
}

// keyPrefixes begin the API keys of well-known providers.
var keyPrefixes = []string{"sk-", "sk_", "sess-", "xai-", "gsk_", "AIza", "ghp_", "github_pat_", "hf_", "Bearer "}

// looksLikeKey reports whether s is more likely a key than a variable's
// name: a known key prefix, or a long mixed-case run with digits, which
// variable names (conventionally UPPER_SNAKE_CASE) rarely are.
func looksLikeKey(s string) bool {
	for _, p := range keyPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	lower := strings.ContainsFunc(s, func(r rune) bool { return r >= 'a' && r <= 'z' })
	digit := strings.ContainsFunc(s, func(r rune) bool { return r >= '0' && r <= '9' })
	return len(s) >= 32 && lower && digit
}

// unjoin lists the errors errors.Join put together, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
