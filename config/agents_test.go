package config

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/anthropic"
	"github.com/countersign/countersign/agent/openai"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/textdecision"
)

// env is a getenv over a map.
func env(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// exampleAgents is what testdata/agents.yaml (docs/api.md's Part 2) holds.
func exampleAgents() []AgentSpec {
	return []AgentSpec{
		{
			Name:         "support",
			Instructions: "You help customers of ACME. Use the tools.",
			Model: ModelSpec{
				Provider:  ProviderOpenAI,
				Name:      "gpt-4.1-mini",
				BaseURL:   "http://127.0.0.1:11434/v1",
				APIKeyEnv: "OPENAI_API_KEY",
			},
			Actions:  []string{"payments.*", "crm.lookup"},
			MaxSteps: 8,
		},
		{
			Name:     "claude",
			Model:    ModelSpec{Provider: ProviderAnthropic, Name: "claude-sonnet-4-5", APIKeyEnv: "ANTHROPIC_API_KEY"},
			Actions:  []string{"crm.*"},
			MaxSteps: 3,
		},
		{
			Name: "demo",
			Model: ModelSpec{Provider: ProviderScripted, Scripted: scripted.Config{
				Rules: []scripted.Rule{
					{
						Match: `(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)`,
						Say:   "I'll ask for that refund.",
						Call:  &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`},
					},
					{Match: ".*", Say: "I can refund payments."},
				},
				AfterTool: "{summary}",
			}},
			MaxSteps: DefaultMaxSteps,
		},
	}
}

func exampleTextDecisions() textdecision.Config {
	return textdecision.Config{
		Language: "pt-BR",
		Vocabulary: textdecision.Words{
			Approve:  []string{"sim", "pode ir"},
			Reject:   []string{"não", "nao"},
			Remember: []string{"sempre nesta conversa"},
		},
		Replies: textdecision.Replies{
			Approved: "Aprovado.", ApprovedQueued: "Aprovado; na fila.", Rejected: "Rejeitado.",
			Unchanged: "Nada mudou.", Conflict: "Já decidido.", Expired: "Expirou.", Ambiguous: "Qual? {ids}",
		},
	}
}

func parseAgentsExample(t *testing.T) *Config {
	t.Helper()
	data, err := os.ReadFile("testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("testdata/agents.yaml", data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestAgentsExample(t *testing.T) {
	t.Parallel()
	c := parseAgentsExample(t)
	if !reflect.DeepEqual(c.Agents, exampleAgents()) {
		t.Errorf("agents parsed to\n%+v\nwant\n%+v", c.Agents, exampleAgents())
	}
	if !reflect.DeepEqual(c.TextDecisions, exampleTextDecisions()) {
		t.Errorf("text_decisions parsed to\n%+v\nwant\n%+v", c.TextDecisions, exampleTextDecisions())
	}
	if c.DefaultAgent != "support" || c.DefaultAgentName() != "support" {
		t.Errorf("default agent %q, DefaultAgentName() %q", c.DefaultAgent, c.DefaultAgentName())
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after Parse: %v", err)
	}
	// The same sections built in code are valid too.
	d := Default()
	d.Actions = c.Actions
	d.Agents, d.TextDecisions, d.DefaultAgent = exampleAgents(), exampleTextDecisions(), "support"
	if err := d.Validate(); err != nil {
		t.Errorf("Validate of the sections built in code: %v", err)
	}
}

func TestTextVocabulary(t *testing.T) {
	t.Parallel()
	voc, err := parseAgentsExample(t).TextVocabulary()
	if err != nil {
		t.Fatalf("TextVocabulary: %v", err)
	}
	if voc.Language() != "pt-BR" {
		t.Errorf("language %q", voc.Language())
	}
	if got := voc.Reply(textdecision.ReplyAmbiguous, []string{"prp_1", "prp_2"}); !strings.Contains(got, "Qual?") || !strings.Contains(got, "prp_1") {
		t.Errorf("ambiguous reply %q", got)
	}
	th := textdecision.Thread{Proposals: []textdecision.Proposal{{ID: "prp_1", Pending: true}}}
	for text, want := range map[string]textdecision.Verdict{
		"pode ir":               textdecision.Approve, // configured
		"Não.":                  textdecision.Reject,  // configured, and the preset's
		"yes":                   textdecision.Approve, // English works in every language
		"confirmar":             "",                   // replaced by the configured approvals
		"sempre nesta conversa": textdecision.Approve,
	} {
		r := voc.Parse(textdecision.Message{Role: textdecision.RoleUser, Text: text}, th)
		if r.Verdict != want {
			t.Errorf("%q: verdict %q, want %q (%+v)", text, r.Verdict, want, r)
		}
	}
	// An empty file gives the English preset.
	en, err := Default().TextVocabulary()
	if err != nil || en.Language() != textdecision.English {
		t.Errorf("default vocabulary %v, %v", en, err)
	}
	// A configuration built in code is checked; its problems have no line.
	bad := Default()
	bad.TextDecisions.Language = "fr"
	bad.TextDecisions.Vocabulary.Approve = []string{"ok", "no"}
	_, err = bad.TextVocabulary()
	errs := Errors(err)
	if len(errs) != 2 || errs[0].Line != 0 ||
		errs[0].Reason != `text_decisions.language: unknown language "fr" (want en or pt-BR)` ||
		!strings.HasPrefix(errs[1].Reason, `text_decisions.vocabulary.approve[1]: "no" rejects`) {
		t.Errorf("TextVocabulary of a bad configuration: %v", err)
	}
}

func TestBuildAgents(t *testing.T) {
	t.Parallel()
	c := parseAgentsExample(t)
	agents, err := c.BuildAgents(env(map[string]string{"OPENAI_API_KEY": "sk-test-1", "ANTHROPIC_API_KEY": "sk-ant-test-2"}))
	if err != nil {
		t.Fatalf("BuildAgents: %v", err)
	}
	if len(agents) != 3 {
		t.Fatalf("%d agents, want 3", len(agents))
	}
	for i, spec := range exampleAgents() {
		a := agents[i]
		if a.Name != spec.Name || a.Instructions != spec.Instructions || !reflect.DeepEqual(a.Actions, spec.Actions) || a.MaxSteps != spec.MaxSteps {
			t.Errorf("agent %d = %+v, want %+v", i, a, spec)
		}
		if err := a.Validate(); err != nil {
			t.Errorf("agent %s: %v", a.Name, err)
		}
	}
	if _, ok := agents[0].Model.(*openai.Model); !ok {
		t.Errorf("support's model is %T", agents[0].Model)
	}
	if _, ok := agents[1].Model.(*anthropic.Model); !ok {
		t.Errorf("claude's model is %T", agents[1].Model)
	}
	// The scripted model answers from the file's rules.
	demo := agents[2]
	if _, ok := demo.Model.(*scripted.Model); !ok {
		t.Fatalf("demo's model is %T", demo.Model)
	}
	reply, err := demo.Model.Generate(context.Background(), &agent.Request{
		Messages: []agent.Message{{Role: agent.RoleUser, Text: "Please refund 40 EUR to c_9"}},
		Tools:    []agent.Tool{{Name: "payments.refund"}},
	})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if reply.Text != "I'll ask for that refund." || len(reply.ToolCalls) != 1 ||
		reply.ToolCalls[0].Action != "payments.refund" || string(reply.ToolCalls[0].Input) != `{"amount":40,"customer":"c_9"}` {
		t.Errorf("demo's reply: %+v", reply)
	}
	// The agents own their slices.
	agents[0].Actions[0] = "changed"
	if c.Agents[0].Actions[0] != "payments.*" {
		t.Error("BuildAgents shares the actions slice with the configuration")
	}
	// No agents, no error.
	if got, err := Default().BuildAgents(nil); err != nil || len(got) != 0 {
		t.Errorf("Default().BuildAgents = %v, %v", got, err)
	}
}

// TestBuildAgentsKeys: a key missing from the environment, or not a key,
// is an error naming the variable and its line, never the value.
func TestBuildAgentsKeys(t *testing.T) {
	t.Parallel()
	c := parseAgentsExample(t)
	_, err := c.BuildAgents(env(map[string]string{"ANTHROPIC_API_KEY": "sk-ant-s3cr3t value"}))
	errs := Errors(err)
	if len(errs) != 2 {
		t.Fatalf("want 2 problems, got %v", err)
	}
	if want := "testdata/agents.yaml:25: agents[0].model.api_key_env: environment variable OPENAI_API_KEY is empty or unset: it must hold the openai API key"; errs[0].Error() != want {
		t.Errorf("missing key:\n got %q\nwant %q", errs[0], want)
	}
	if want := "testdata/agents.yaml:29: agents[1].model.api_key_env: environment variable ANTHROPIC_API_KEY holds spaces or control characters, which no API key has"; errs[1].Error() != want {
		t.Errorf("bad key:\n got %q\nwant %q", errs[1], want)
	}
	if !errors.Is(err, ErrSecretUnset) || errors.Is(errs[1], ErrSecretUnset) {
		t.Errorf("errors.Is(ErrSecretUnset) holds for the missing key only: %v", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("an error repeats the key: %v", err)
	}
	// An invalid configuration built in code fails before any model is built.
	bad := Default()
	bad.Agents = []AgentSpec{{Name: "a", Model: ModelSpec{Provider: ProviderOpenAI, Name: "m", APIKeyEnv: "sk-proj-s3cr3t"}}}
	_, err = bad.BuildAgents(env(nil))
	if errs := Errors(err); len(errs) != 1 || errs[0].Line != 0 || !strings.Contains(errs[0].Reason, "looks like an API key") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("BuildAgents of an invalid configuration: %v", err)
	}
}

// BuildAgents with a nil getenv reads the process's environment.
func TestBuildAgentsEnviron(t *testing.T) {
	c := parseOK(t, "agents:\n  - name: a\n    model: {provider: anthropic, name: m, api_key_env: CS_TEST_AGENT_KEY}\n")
	t.Setenv("CS_TEST_AGENT_KEY", "")
	if _, err := c.BuildAgents(nil); !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "CS_TEST_AGENT_KEY") {
		t.Errorf("unset: %v", err)
	}
	t.Setenv("CS_TEST_AGENT_KEY", "sk-ant-x")
	if agents, err := c.BuildAgents(nil); err != nil || len(agents) != 1 {
		t.Errorf("set: %v, %v", agents, err)
	}
}

// fakeProvider records the requests a provider's model sends and answers
// each with reply.
type fakeProvider struct {
	srv *httptest.Server

	mu     sync.Mutex
	path   string
	header http.Header
	body   map[string]any
}

func newFakeProvider(t *testing.T, reply string) *fakeProvider {
	t.Helper()
	f := &fakeProvider{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.path, f.header = r.URL.Path, r.Header.Clone()
		_ = json.Unmarshal(raw, &f.body)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// sentKey is the API key a request carries, as a bearer token or in
// X-Api-Key.
func sentKey(h http.Header) string {
	if k := h.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// TestBuildAgentsProviders: a built model sends its requests to base_url,
// for the model the file names, with the key from the variable it names.
func TestBuildAgentsProviders(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		provider, reply, path string
	}{
		{
			provider: ProviderOpenAI,
			reply:    `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`,
			path:     "/chat/completions",
		},
		{
			provider: ProviderAnthropic,
			reply:    `{"id":"msg_1","type":"message","role":"assistant","model":"m-1","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`,
			path:     "/v1/messages",
		},
	} {
		t.Run(tt.provider, func(t *testing.T) {
			t.Parallel()
			f := newFakeProvider(t, tt.reply)
			c := parseOK(t, "agents:\n  - name: a\n    model: {provider: "+tt.provider+", name: m-1, base_url: \""+f.srv.URL+"\", api_key_env: KEY}\n")
			agents, err := c.BuildAgents(env(map[string]string{"KEY": "sk-test-key"}))
			if err != nil {
				t.Fatalf("BuildAgents: %v", err)
			}
			reply, err := agents[0].Model.Generate(context.Background(), &agent.Request{
				Instructions: "Be brief.",
				Messages:     []agent.Message{{Role: agent.RoleUser, Text: "hi"}},
			})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if reply.Text != "hello" || f.path != tt.path || sentKey(f.header) != "sk-test-key" || f.body["model"] != "m-1" {
				t.Errorf("reply %+v; request %s, key %q, model %v", reply, f.path, sentKey(f.header), f.body["model"])
			}
		})
	}
}

// TestAgentsDefaults: max_steps defaults to 8, which 0 also means; an
// agent's action list is nil (every action) unless the file gives one.
func TestAgentsDefaults(t *testing.T) {
	t.Parallel()
	c := parseOK(t, `
agents:
  - name: a
    model: {provider: scripted, rules: [{match: x, say: y}]}
  - name: b
    model: {provider: scripted, rules: [{match: x, say: y}]}
    max_steps: 0
  - name: c
    model: {provider: scripted, rules: [{match: x, say: y}]}
    max_steps: 2
    actions:
`)
	for i, want := range []int{8, 8, 2} {
		if a := c.Agents[i]; a.MaxSteps != want || a.Actions != nil {
			t.Errorf("agent %s: max_steps %d (want %d), actions %#v", a.Name, a.MaxSteps, want, a.Actions)
		}
	}
	if c.DefaultAgentName() != "" {
		t.Errorf("no default_agent, yet DefaultAgentName() = %q", c.DefaultAgentName())
	}
	// In code, 0 means the default too.
	d := Default()
	d.Agents = []AgentSpec{{Name: "a", Model: ModelSpec{Provider: ProviderScripted, Scripted: scripted.Config{Rules: []scripted.Rule{{Match: "x", Say: "y"}}}}}}
	agents, err := d.BuildAgents(nil)
	if err != nil || agents[0].Steps() != DefaultMaxSteps {
		t.Errorf("BuildAgents: %v, %v", agents, err)
	}
	// Without actions in the file, globs are not checked against any.
	parseOK(t, "agents:\n  - name: a\n    model: {provider: scripted, rules: [{match: x, say: y}]}\n    actions: [\"fs__*\", email.send]\n")
	// Anchors and merge keys share a model between agents.
	m := parseOK(t, `
agents:
  - &base
    name: a
    model: &demo {provider: scripted, rules: [{match: x, say: y}], after_tool: done}
    max_steps: 4
  - <<: *base
    name: b
  - name: c
    model: *demo
`)
	if b, c := m.Agents[1], m.Agents[2]; b.Name != "b" || b.MaxSteps != 4 || b.Model.Scripted.AfterTool != "done" ||
		c.MaxSteps != DefaultMaxSteps || !reflect.DeepEqual(c.Model, m.Agents[0].Model) {
		t.Errorf("merged agents: %+v", m.Agents)
	}
	// Names may use every character the rule allows.
	parseOK(t, "default_agent: Support_2.v-1\nagents:\n  - name: Support_2.v-1\n    model: {provider: scripted, rules: [{match: x, say: y}]}\n")
}

func TestAgentsBuiltInCode(t *testing.T) {
	t.Parallel()
	c := Default()
	c.DefaultAgent = "nobody"
	c.Agents = []AgentSpec{
		{Name: "a", Model: ModelSpec{Provider: ProviderScripted}},
		{Name: "a", Model: ModelSpec{Provider: ProviderOpenAI}, MaxSteps: -2},
	}
	c.TextDecisions.Replies.Ambiguous = "which?"
	err := c.Validate()
	want := []string{
		`text_decisions.replies.ambiguous: "which?" must contain {ids}, where the pending proposals' ids go`,
		"agents[0].model.rules: at least one rule is needed",
		`agents[1].name: "a" is already the name of agents[0]`,
		"agents[1].model.name: is required: the provider's model name, such as gpt-4.1-mini",
		"agents[1].model.api_key_env: is required: the environment variable that holds the API key, such as OPENAI_API_KEY",
		"agents[1].max_steps: -2: must be positive, or 0 for the default (8)",
		`default_agent: "nobody" names no agent (want one of a)`,
	}
	errs := Errors(err)
	if len(errs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(want), err)
	}
	for i, e := range errs {
		if e.Reason != want[i] || e.Line != 0 || e.File != "" {
			t.Errorf("problem %d = %q (line %d), want %q", i, e.Reason, e.Line, want[i])
		}
	}
}
