package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/anthropic"
	"github.com/countersign/countersign/agent/openai"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/mcpgateway"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pgstore"
)

// The tests of build.go: what serve builds from a configuration that
// package config parsed and checked.

// getenvOf is a getenv over a map.
func getenvOf(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

// parseConfig parses yaml, named name in its errors.
func parseConfig(t *testing.T, name, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse(name, []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// agentsExample is config/testdata/agents.yaml (docs/api.md's Part 2),
// parsed under the name its errors were written with.
func agentsExample(t *testing.T) *config.Config {
	t.Helper()
	data, err := os.ReadFile("../../config/testdata/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return parseConfig(t, "testdata/agents.yaml", string(data))
}

func TestConfiguredAgents(t *testing.T) {
	t.Parallel()
	c := agentsExample(t)
	agents, err := configuredAgents(c, getenvOf(map[string]string{"OPENAI_API_KEY": "sk-test-1", "ANTHROPIC_API_KEY": "sk-ant-test-2"}))
	if err != nil {
		t.Fatalf("configuredAgents: %v", err)
	}
	if len(agents) != 3 {
		t.Fatalf("%d agents, want 3", len(agents))
	}
	for i, spec := range c.Agents {
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
		t.Error("configuredAgents shares the actions slice with the configuration")
	}
	// No agents, no error.
	if got, err := configuredAgents(config.Default(), nil); err != nil || len(got) != 0 {
		t.Errorf("configuredAgents(Default()) = %v, %v", got, err)
	}
}

// TestConfiguredAgentsKeys: a key missing from the environment, or not a
// key, is an error naming the variable and its line, never the value.
func TestConfiguredAgentsKeys(t *testing.T) {
	t.Parallel()
	c := agentsExample(t)
	_, err := configuredAgents(c, getenvOf(map[string]string{"ANTHROPIC_API_KEY": "sk-ant-s3cr3t value"}))
	errs := config.Errors(err)
	if len(errs) != 2 {
		t.Fatalf("want 2 problems, got %v", err)
	}
	if want := "testdata/agents.yaml:25: agents[0].model.api_key_env: environment variable OPENAI_API_KEY is empty or unset: it must hold the openai API key"; errs[0].Error() != want {
		t.Errorf("missing key:\n got %q\nwant %q", errs[0], want)
	}
	if want := "testdata/agents.yaml:29: agents[1].model.api_key_env: environment variable ANTHROPIC_API_KEY holds spaces or control characters, which no API key has"; errs[1].Error() != want {
		t.Errorf("bad key:\n got %q\nwant %q", errs[1], want)
	}
	if !errors.Is(err, config.ErrSecretUnset) || errors.Is(errs[1], config.ErrSecretUnset) {
		t.Errorf("errors.Is(ErrSecretUnset) holds for the missing key only: %v", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("an error repeats the key: %v", err)
	}
	// An invalid configuration built in code fails before any model is built.
	bad := config.Default()
	bad.Agents = []config.AgentSpec{{Name: "a", Model: config.ModelSpec{Provider: config.ProviderOpenAI, Name: "m", APIKeyEnv: "sk-proj-s3cr3t"}}}
	_, err = configuredAgents(bad, getenvOf(nil))
	if errs := config.Errors(err); len(errs) != 1 || errs[0].Line != 0 || !strings.Contains(errs[0].Reason, "looks like an API key") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("configuredAgents of an invalid configuration: %v", err)
	}
}

// configuredAgents with a nil getenv reads the process's environment.
func TestConfiguredAgentsEnviron(t *testing.T) {
	c := parseConfig(t, "c.yaml", "agents:\n  - name: a\n    model: {provider: anthropic, name: m, api_key_env: CS_TEST_AGENT_KEY}\n")
	t.Setenv("CS_TEST_AGENT_KEY", "")
	if _, err := configuredAgents(c, nil); !errors.Is(err, config.ErrSecretUnset) || !strings.Contains(err.Error(), "CS_TEST_AGENT_KEY") {
		t.Errorf("unset: %v", err)
	}
	t.Setenv("CS_TEST_AGENT_KEY", "sk-ant-x")
	if agents, err := configuredAgents(c, nil); err != nil || len(agents) != 1 {
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

// TestConfiguredAgentsProviders: a built model sends its requests to
// base_url, for the model the file names, with the key from the variable
// it names.
func TestConfiguredAgentsProviders(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		provider, reply, path string
	}{
		{
			provider: config.ProviderOpenAI,
			reply:    `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`,
			path:     "/chat/completions",
		},
		{
			provider: config.ProviderAnthropic,
			reply:    `{"id":"msg_1","type":"message","role":"assistant","model":"m-1","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`,
			path:     "/v1/messages",
		},
	} {
		// With api_key_env, the variable's key is sent; a model with a
		// base_url and no api_key_env (a local server) sends none.
		for _, keyed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/key=%t", tt.provider, keyed), func(t *testing.T) {
				t.Parallel()
				f := newFakeProvider(t, tt.reply)
				keyField, wantKey := "", ""
				if keyed {
					keyField, wantKey = ", api_key_env: KEY", "sk-test-key"
				}
				c := parseConfig(t, "c.yaml", "agents:\n  - name: a\n    model: {provider: "+tt.provider+", name: m-1, base_url: \""+f.srv.URL+"\""+keyField+"}\n")
				agents, err := configuredAgents(c, getenvOf(map[string]string{"KEY": "sk-test-key"}))
				if err != nil {
					t.Fatalf("configuredAgents: %v", err)
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
				if reply.Text != "hello" || f.path != tt.path || sentKey(f.header) != wantKey || f.body["model"] != "m-1" {
					t.Errorf("reply %+v; request %s, key %q (want %q), model %v", reply, f.path, sentKey(f.header), wantKey, f.body["model"])
				}
				if !keyed && (f.header.Get("Authorization") != "" || f.header.Get("X-Api-Key") != "") {
					t.Errorf("no api_key_env, yet the request carried a credential: %v", f.header)
				}
			})
		}
	}
}

// TestConfiguredAgentsFromFile: what docs/configuration.md's agents section
// builds, and the error of a key that is not set, at its line.
func TestConfiguredAgentsFromFile(t *testing.T) {
	t.Parallel()
	c := parseConfig(t, "countersign.yaml", `
default_agent: support
agents:
  - name: support
    instructions: "You help customers of ACME. Use the tools."
    model:
      provider: openai
      name: gpt-4.1-mini
      api_key_env: OPENAI_API_KEY
    actions: ["payments.*"]
  - name: demo
    model:
      provider: scripted
      rules:
        - match: '.*'
          say: "I can refund payments."
`)
	agents, err := configuredAgents(c, getenvOf(map[string]string{"OPENAI_API_KEY": "sk-…"}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range agents {
		got = append(got, a.Name+" "+strings.Join(a.Actions, ",")+" "+strconv.Itoa(a.Steps()))
	}
	if want := []string{"support payments.* 8", "demo  8"}; !slices.Equal(got, want) || c.DefaultAgentName() != "support" {
		t.Errorf("agents %q (want %q), default %q", got, want, c.DefaultAgentName())
	}
	_, err = configuredAgents(c, getenvOf(nil))
	if want := "countersign.yaml:9: agents[0].model.api_key_env: environment variable OPENAI_API_KEY is empty or unset: it must hold the openai API key"; err == nil || err.Error() != want {
		t.Errorf("without the key: %v, want %q", err, want)
	}
	// In code, a max_steps of 0 means the default too.
	d := config.Default()
	d.Agents = []config.AgentSpec{{Name: "a", Model: config.ModelSpec{Provider: config.ProviderScripted, Scripted: scripted.Config{Rules: []scripted.Rule{{Match: "x", Say: "y"}}}}}}
	if agents, err := configuredAgents(d, nil); err != nil || agents[0].Steps() != config.DefaultMaxSteps {
		t.Errorf("configuredAgents of a configuration built in code: %v, %v", agents, err)
	}
}

// TestMCPUpstream: the gateway's upstreams carry what the file vouches for
// (docs/api.md Part 3's servers), and an HTTP server's headers from the
// variables headers_env names.
func TestMCPUpstream(t *testing.T) {
	t.Parallel()
	pin := strings.Repeat("0123456789abcdef", 4)
	c := parseConfig(t, "c.yaml", `mcp:
  servers:
    - name: fs
      command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv/data]
      read_only: [read_file, list_directory, {name: search_files, schema_sha256: "`+pin+`"}]
      idempotent: []
      trust_annotations: false
    - name: crm
      url: http://127.0.0.1:9200/mcp
      headers_env: {Authorization: CRM_MCP_AUTH}
      idempotent: [upsert_contact]
      trust_annotations: true
`)
	fs, crm := c.MCP.Servers[0], c.MCP.Servers[1]
	u, err := mcpUpstream(fs, getenvOf(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "fs" || u.Transport == nil || u.TrustAnnotations || len(u.Idempotent) != 0 ||
		!reflect.DeepEqual(u.ReadOnly, []mcpgateway.ReadOnlyTool{{Name: "read_file"}, {Name: "list_directory"}, {Name: "search_files", SchemaSHA256: pin}}) {
		t.Fatalf("fs's upstream %+v", u)
	}
	u, err = mcpUpstream(crm, getenvOf(map[string]string{"CRM_MCP_AUTH": "Bearer s3cret"}), nil)
	if err != nil || u.Name != "crm" || u.Transport == nil || !u.TrustAnnotations || !reflect.DeepEqual(u.Idempotent, []string{"upsert_contact"}) || u.ReadOnly != nil {
		t.Fatalf("crm's upstream %+v, %v", u, err)
	}
	_, err = mcpUpstream(crm, getenvOf(nil), nil)
	if !errors.Is(err, config.ErrSecretUnset) || !strings.Contains(err.Error(), "CRM_MCP_AUTH") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("crm's upstream without its header's variable: %v, want ErrSecretUnset naming the variable", err)
	}
}

// TestConfigDefaultsAreTheBuilders: the defaults package config states
// are those of the packages serve builds with, which config does not
// import (both read internal/defaults).
func TestConfigDefaultsAreTheBuilders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"postgres.max_conns", config.DefaultPostgresMaxConns, pgstore.DefaultMaxConns},
		{"mcp.hold", config.DefaultMCPHold, mcpgateway.DefaultHold},
		{"notifications[].timeout", config.DefaultNotificationTimeout, notifications.DefaultTimeout},
		{"notifications[].max_attempts", config.DefaultNotificationMaxAttempts, notifications.DefaultMaxAttempts},
		{"notifications[].backoff.initial", config.DefaultNotificationBackoff, notifications.DefaultBackoffInitial},
		{"notifications[].backoff.max", config.DefaultNotificationBackoffMax, notifications.DefaultBackoffMax},
		{"agents[].max_steps", config.DefaultMaxSteps, agent.DefaultMaxSteps},
		{"worker.lease", config.DefaultLease, countersign.DefaultLeaseDuration},
	} {
		if c.got != c.want {
			t.Errorf("%s: config's default %v, the builder's %v", c.name, c.got, c.want)
		}
	}
}

// buildSeeds are configurations that exercise every section serve builds
// from, beside config's test files and its fuzz corpus.
var buildSeeds = []string{
	"default_agent: a\nagents:\n  - name: a\n    model: {provider: scripted, rules: [{match: '(?P<n>\\d+)', call: {action: x.y, input: '{\"n\": {n}}'}}]}\n    actions: [\"x.*\"]\n    max_steps: 0\n",
	"agents:\n  - name: a\n    model: {provider: openai, name: m, api_key_env: K, base_url: \"http://127.0.0.1:1/v1\"}\n  - name: b\n    model: {provider: anthropic, name: m, api_key_env: K}\n",
	"worker: {poll_interval: 2s, lease: 1m, max_concurrency: 8, max_attempts: 3}\npolicy:\n  default_ttl: 1h\n  rules:\n    - {match: \"payments.*\", approvers: [\"role:finance\", \"actor:carol\"], quorum: 2, forbid_self_approval: true, ttl: 5m, mode: two_phase, channels: [web, cli], remember: [thread]}\n    - {match: payments.refund, effect: allow}\n    - {match: \"*\", effect: deny}\n",
	"policy:\n  rules:\n    - {match: a, approvers: [\"actor:b\"], quorum: 2, escalate_after: 1m, escalate_to: [\"role:manager\"], remind_every: 30s}\n",
	"mcp:\n  path: /tools/mcp\n  hold: 5s\n  servers:\n    - {name: fs, command: [npx, -y, x], env: {A: b}}\n    - {name: crm-1, url: \"https://h/mcp\", headers_env: {Authorization: T}}\n",
	"mcp: {servers: [{name: a_b, url: \"http://h\"}, &s {name: c, command: [c]}, {<<: *s, name: d}]}\n",
}

// buildInputs lists what TestEngineAcceptsWhatConfigAccepts builds: config's
// test files, the inputs of its fuzz corpus, and buildSeeds.
func buildInputs(t *testing.T) map[string][]byte {
	t.Helper()
	in := map[string][]byte{}
	files, _ := filepath.Glob("../../config/testdata/*.yaml")
	corpus, _ := filepath.Glob("../../config/testdata/fuzz/FuzzParse/*")
	if len(files) == 0 || len(corpus) == 0 {
		t.Fatalf("config's test files (%d) or fuzz corpus (%d) not found", len(files), len(corpus))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in[f] = data
	}
	for _, f := range corpus {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// go test fuzz v1, then one []byte("…") line.
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		arg, ok := strings.CutPrefix(lines[len(lines)-1], "[]byte(")
		text, err := strconv.Unquote(strings.TrimSuffix(arg, ")"))
		if len(lines) != 2 || !ok || err != nil {
			t.Fatalf("%s: not a corpus entry of one []byte: %q", f, data)
		}
		in[f] = []byte(text)
	}
	for i, s := range buildSeeds {
		in["seed "+strconv.Itoa(i)] = []byte(s)
	}
	return in
}

// TestEngineAcceptsWhatConfigAccepts: what config accepts, what serve
// builds from it takes: the engine its policy and options, the worker its
// options, the agents their models, the gateway its upstreams. config
// checks the policy with countersign.Policy.Validate and builds nothing;
// this is where the rest of its promise is held to.
func TestEngineAcceptsWhatConfigAccepts(t *testing.T) {
	t.Parallel()
	accepted := 0
	for name, data := range buildInputs(t) {
		c, err := config.Parse("c.yaml", data)
		if err != nil {
			continue
		}
		accepted++
		opts := c.EngineOptions()
		opts.Store = memstore.New(nil)
		e, err := countersign.New(opts)
		if err != nil {
			t.Errorf("%s: countersign.New refuses what config accepted: %v", name, err)
			continue
		}
		if _, err := e.NewWorker(c.WorkerOptions()); err != nil {
			t.Errorf("%s: NewWorker refuses the worker options: %v", name, err)
		}
		built, err := configuredAgents(c, func(string) string { return "k" })
		if err != nil || len(built) != len(c.Agents) {
			t.Errorf("%s: configuredAgents refuses what config accepted: %d agents, %v", name, len(built), err)
		}
		if d := c.DefaultAgentName(); d != "" && !slices.ContainsFunc(built, func(a *agent.Agent) bool { return a.Name == d }) {
			t.Errorf("%s: default_agent %q is none of the agents built", name, d)
		}
		var ups []mcpgateway.Upstream
		for _, s := range c.MCP.Servers {
			u, err := mcpUpstream(s, func(string) string { return "set" }, nil)
			if err != nil {
				t.Errorf("%s: mcpUpstream refuses the server %s: %v", name, s.Name, err)
				continue
			}
			ups = append(ups, u)
		}
		if _, err := mcpgateway.New(mcpgateway.Options{Engine: e, Upstreams: ups, Hold: c.MCP.Hold}); err != nil {
			t.Errorf("%s: mcpgateway.New refuses the mcp section: %v", name, err)
		}
	}
	if accepted < len(buildSeeds)+2 {
		t.Errorf("config accepted %d inputs: the seeds and test files should all pass", accepted)
	}
}
