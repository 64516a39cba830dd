package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/textdecision"
)

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
	// In code, 0 means the default too (cmd/countersign builds it so).
	d := Default()
	d.Agents = []AgentSpec{{Name: "a", Model: ModelSpec{Provider: ProviderScripted, Scripted: scripted.Config{Rules: []scripted.Rule{{Match: "x", Say: "y"}}}}}}
	if err := d.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
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
		"agents[1].model.api_key_env: is required: the environment variable that holds the API key, such as OPENAI_API_KEY (only a model with a base_url, such as a local server's, may have none)",
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

// TestAPIKeyEnvOptionalWithBaseURL: a model with a base_url (a local
// server's) may name no key variable; on the provider's own API it must,
// and a variable named beside a base_url is checked as any other.
func TestAPIKeyEnvOptionalWithBaseURL(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{ProviderOpenAI, ProviderAnthropic} {
		c := parseOK(t, "agents:\n  - name: a\n    model: {provider: "+provider+", name: m, base_url: \"http://127.0.0.1:11434/v1\"}\n")
		if m := c.Agents[0].Model; m.APIKeyEnv != "" || m.BaseURL != "http://127.0.0.1:11434/v1" {
			t.Errorf("%s: model %+v, want a base_url and no api_key_env", provider, m)
		}
		_, err := Parse("test.yaml", []byte("agents:\n  - name: a\n    model: {provider: "+provider+", name: m}\n"))
		if err == nil || !strings.Contains(err.Error(), "agents[0].model.api_key_env: is required") {
			t.Errorf("%s without base_url or api_key_env: %v, want api_key_env required", provider, err)
		}
		_, err = Parse("test.yaml", []byte("agents:\n  - name: a\n    model: {provider: "+provider+", name: m, base_url: \"http://127.0.0.1:1/v1\", api_key_env: sk-proj-0123456789abcdef}\n"))
		if err == nil || !strings.Contains(err.Error(), "looks like an API key") {
			t.Errorf("%s with base_url and a key for a variable: %v, want it refused", provider, err)
		}
	}
}
