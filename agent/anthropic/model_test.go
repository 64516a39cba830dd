package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent"
)

var refundTool = agent.Tool{
	Name:        "payments.refund",
	Description: "Refund a payment.",
	// The maximum does not fit a float64: it must travel as written.
	InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","maximum":12345678901234567890},` +
		`"customer":{"type":"string"}},"required":["amount","customer"],"additionalProperties":false}`),
}

var lookupTool = agent.Tool{
	Name:        "crm.lookup",
	Description: "Look a customer up.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"customer":{"type":"string"}}}`),
}

// checkHeaders asserts what every request must carry.
func checkHeaders(t *testing.T, r recorded) {
	t.Helper()
	if r.method != http.MethodPost || r.path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", r.method, r.path)
	}
	// The SDK (v2) sends the API key as a bearer token.
	if got := r.header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q, want the configured key as a bearer token", got)
	}
	if got := r.header.Get("X-Api-Key"); got != "" {
		t.Errorf("X-Api-Key %q: the key must travel once, as the SDK sends it", got)
	}
	if r.header.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
	if got := r.header.Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
		t.Errorf("Content-Type %q", got)
	}
	if got := r.header.Get("X-From-Env"); got != "" {
		t.Error("the request carries a header from ANTHROPIC_CUSTOM_HEADERS")
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	first := message("tool_use", `[{"type":"text","text":"Refunding "},{"type":"text","text":"now."},`+
		`{"type":"tool_use","id":"toolu_1","name":"payments_refund","input":{"amount":5,"customer":"bob"}},`+
		`{"type":"tool_use","id":"toolu_2","name":"crm_lookup","input":{"customer":"bob"}}]`)
	second := message("end_turn", `[{"type":"text","text":"Done: 5 refunded to bob."}]`)
	api := newFakeAPI(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, []string{first, second}[min(n, 1)])
	})
	m := api.model(t, Options{Model: "claude-sonnet-test"})
	tools := []agent.Tool{refundTool, lookupTool}
	req := &agent.Request{
		Instructions: "You help customers of ACME.",
		Messages:     []agent.Message{{Role: agent.RoleUser, Text: "refund 5 to bob"}},
		Tools:        tools,
	}

	got, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if got.Text != "Refunding now." {
		t.Errorf("text %q, want the text blocks concatenated", got.Text)
	}
	want := []agent.ToolCall{
		{ID: "toolu_1", Action: "payments.refund", Input: json.RawMessage(`{"amount":5,"customer":"bob"}`)},
		{ID: "toolu_2", Action: "crm.lookup", Input: json.RawMessage(`{"customer":"bob"}`)},
	}
	if len(got.ToolCalls) != len(want) {
		t.Fatalf("tool calls %+v, want %+v", got.ToolCalls, want)
	}
	for i, c := range got.ToolCalls {
		if c.ID != want[i].ID || c.Action != want[i].Action || !sameJSON(t, c.Input, want[i].Input) {
			t.Errorf("tool call %d: %+v (input %s), want %+v", i, c, c.Input, want[i])
		}
	}

	reqs := api.received()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	checkHeaders(t, reqs[0])
	wire := decodeRequest(t, reqs[0].body)
	if wire.Model != "claude-sonnet-test" || wire.MaxTokens != DefaultMaxTokens {
		t.Errorf("model %q, max_tokens %d", wire.Model, wire.MaxTokens)
	}
	if len(wire.System) != 1 || wire.System[0].Type != "text" || wire.System[0].Text != req.Instructions {
		t.Errorf("system %+v, want the instructions as one text block", wire.System)
	}
	if len(wire.Messages) != 1 || wire.Messages[0].Role != "user" || len(wire.Messages[0].Content) != 1 ||
		wire.Messages[0].Content[0].Type != "text" || wire.Messages[0].Content[0].Text != "refund 5 to bob" {
		t.Errorf("messages %+v", wire.Messages)
	}
	if len(wire.Tools) != 2 {
		t.Fatalf("tools %+v", wire.Tools)
	}
	for i, name := range []string{"payments_refund", "crm_lookup"} {
		tool := wire.Tools[i]
		if tool.Name != name || tool.Description != tools[i].Description {
			t.Errorf("tool %d: %q %q, want %q %q", i, tool.Name, tool.Description, name, tools[i].Description)
		}
		if !sameJSON(t, tool.InputSchema, tools[i].InputSchema) {
			t.Errorf("tool %d: input_schema %s, want %s", i, tool.InputSchema, tools[i].InputSchema)
		}
	}
	if !strings.Contains(string(wire.Tools[0].InputSchema), "12345678901234567890") {
		t.Errorf("the schema's maximum lost its digits: %s", wire.Tools[0].InputSchema)
	}

	// The engine runs both calls and asks again with their results.
	req.Messages = append(req.Messages,
		agent.Message{Role: agent.RoleAssistant, Text: got.Text, ToolCalls: got.ToolCalls},
		agent.Message{Role: agent.RoleTool, ToolCallID: "toolu_1", Result: json.RawMessage(`{"status":"refunded"}`), Summary: "refunded 5"},
		agent.Message{Role: agent.RoleTool, ToolCallID: "toolu_2", Result: json.RawMessage(`{"name":"Bob"}`), Summary: "Bob"},
	)
	got, err = m.Generate(context.Background(), req)
	if err != nil {
		t.Fatalf("second Generate: %v", err)
	}
	if got.Text != "Done: 5 refunded to bob." || len(got.ToolCalls) != 0 {
		t.Errorf("second reply %+v", got)
	}
	reqs = api.received()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	checkHeaders(t, reqs[1])
	wire = decodeRequest(t, reqs[1].body)
	if len(wire.Messages) != 3 {
		t.Fatalf("messages %+v, want user, assistant, one user with both results", wire.Messages)
	}
	asst := wire.Messages[1]
	if asst.Role != "assistant" || len(asst.Content) != 3 || asst.Content[0].Type != "text" || asst.Content[0].Text != "Refunding now." {
		t.Fatalf("assistant message %+v", asst)
	}
	for i, w := range want {
		b := asst.Content[i+1]
		if b.Type != "tool_use" || b.ID != w.ID || b.Name != wire.Tools[i].Name || !sameJSON(t, b.Input, w.Input) {
			t.Errorf("assistant block %d: %+v (input %s), want tool_use %s %s", i+1, b, b.Input, w.ID, wire.Tools[i].Name)
		}
	}
	results := wire.Messages[2]
	if results.Role != "user" || len(results.Content) != 2 {
		t.Fatalf("results message %+v, want both tool_result blocks in one user message", results)
	}
	for i, text := range []string{`{"status":"refunded"}`, `{"name":"Bob"}`} {
		b := results.Content[i]
		if b.Type != "tool_result" || b.ToolUseID != want[i].ID || len(b.Content) != 1 ||
			b.Content[0].Type != "text" || b.Content[0].Text != text {
			t.Errorf("result %d: %+v, want tool_result for %s with %s as text", i, b, want[i].ID, text)
		}
	}
}

// TestRequestMapping covers the corners of the translation: empty
// messages left out, runs of one role merged, a result with only a
// summary, a call without input, and an action called earlier that is no
// longer offered.
func TestRequestMapping(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(http.StatusOK, message("end_turn", `[{"type":"text","text":"ok"}]`)))
	m := api.model(t, Options{MaxTokens: 77})
	req := &agent.Request{
		Messages: []agent.Message{
			{Role: agent.RoleUser, Text: "hello"},
			{Role: agent.RoleAssistant}, // says nothing: left out
			{Role: agent.RoleUser, Text: "refund bob"},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{
				{ID: "c1", Action: "payments_refund"}, // no longer offered; its sanitized name is taken
				{ID: "c2", Action: "payments.refund", Input: json.RawMessage(` {"amount":1} `)},
			}},
			{Role: agent.RoleTool, ToolCallID: "c1", Summary: "refunded"},
			{Role: agent.RoleTool, ToolCallID: "c2", Result: json.RawMessage(`{"ok":true}`)},
			{Role: agent.RoleUser, Text: "thanks"},
		},
		Tools: []agent.Tool{{Name: "payments.refund"}}, // no description, no schema
	}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	reqs := api.received()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	wire := decodeRequest(t, reqs[0].body)
	if wire.MaxTokens != 77 || wire.System != nil {
		t.Errorf("max_tokens %d, system %+v", wire.MaxTokens, wire.System)
	}
	if len(wire.Tools) != 1 || wire.Tools[0].Name != "payments_refund" || wire.Tools[0].Description != "" ||
		!sameJSON(t, wire.Tools[0].InputSchema, []byte(`{"type":"object","properties":{}}`)) {
		t.Errorf("tools %+v", wire.Tools)
	}
	if len(wire.Messages) != 3 {
		t.Fatalf("messages %+v, want user (2 texts), assistant, user (2 results and a text)", wire.Messages)
	}
	user, asst, last := wire.Messages[0], wire.Messages[1], wire.Messages[2]
	if user.Role != "user" || len(user.Content) != 2 || user.Content[0].Text != "hello" || user.Content[1].Text != "refund bob" {
		t.Errorf("first message %+v", user)
	}
	if asst.Role != "assistant" || len(asst.Content) != 2 {
		t.Fatalf("assistant message %+v", asst)
	}
	if b := asst.Content[0]; b.Name == "payments_refund" || b.Name == "" || !sameJSON(t, b.Input, []byte(`{}`)) {
		t.Errorf("call of an action no longer offered: %+v (input %s), want a name of its own and {}", b, b.Input)
	}
	if b := asst.Content[1]; b.Name != "payments_refund" || !sameJSON(t, b.Input, []byte(`{"amount":1}`)) {
		t.Errorf("call of the offered action: %+v (input %s)", b, b.Input)
	}
	if last.Role != "user" || len(last.Content) != 3 {
		t.Fatalf("last message %+v", last)
	}
	if b := last.Content[0]; b.Type != "tool_result" || b.ToolUseID != "c1" || len(b.Content) != 1 || b.Content[0].Text != "refunded" {
		t.Errorf("result with only a summary: %+v", b)
	}
	if b := last.Content[1]; b.Type != "tool_result" || b.ToolUseID != "c2" || len(b.Content) != 1 || b.Content[0].Text != `{"ok":true}` {
		t.Errorf("result: %+v", b)
	}
	if b := last.Content[2]; b.Type != "text" || b.Text != "thanks" {
		t.Errorf("text after the results: %+v", b)
	}
}

// TestBaseURLPath: a base URL with a path (a proxy) keeps it.
func TestBaseURLPath(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(http.StatusOK, message("end_turn", `[{"type":"text","text":"ok"}]`)))
	m := api.model(t, Options{BaseURL: api.srv.URL + "/anthropic"})
	if _, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	reqs := api.received()
	if len(reqs) != 1 || reqs[0].path != "/anthropic/v1/messages" {
		t.Fatalf("requests %+v, want one to /anthropic/v1/messages", reqs)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(reqs[0].body, &body); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"tools", "system"} {
		if v, ok := body[key]; ok {
			t.Errorf("%q is %s, want it left out when there is none", key, v)
		}
	}
}

func TestNoAPIKey(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(http.StatusOK, message("end_turn", `[{"type":"text","text":"ok"}]`)))
	m, err := New(Options{Model: "local", BaseURL: api.srv.URL, HTTPClient: api.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	reqs := api.received()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if a, k := reqs[0].header.Get("Authorization"), reqs[0].header.Get("X-Api-Key"); a != "" || k != "" {
		t.Errorf("credentials sent without a key (Authorization %q, X-Api-Key %q): the environment's must not be used", a, k)
	}
}

func TestRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		body   string
	}{
		{http.StatusTooManyRequests, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{http.StatusServiceUnavailable, `upstream unavailable`},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, func(n int, w http.ResponseWriter, _ *http.Request) {
				if n == 0 {
					writeJSON(w, tc.status, tc.body)
					return
				}
				writeJSON(w, http.StatusOK, message("end_turn", `[{"type":"text","text":"hello"}]`))
			})
			m := api.model(t, Options{})
			got, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if got.Text != "hello" {
				t.Errorf("reply %+v", got)
			}
			reqs := api.received()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2 (one retry)", len(reqs))
			}
			for _, r := range reqs {
				checkHeaders(t, r)
			}
			if string(reqs[0].body) != string(reqs[1].body) {
				t.Error("the retry sent another body")
			}
		})
	}
}

func TestServerErrorEveryTry(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Request-Id", "req_42")
		writeJSON(w, http.StatusInternalServerError, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
	})
	m := api.model(t, Options{MaxRetries: 1})
	_, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if err == nil {
		t.Fatal("Generate succeeded on a 500")
	}
	if n := len(api.received()); n != 2 {
		t.Errorf("%d requests, want 2 (MaxRetries 1)", n)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T), want an *APIError", err, err)
	}
	if apiErr.StatusCode != 500 || apiErr.Type != "api_error" || apiErr.Message != "Internal server error" || apiErr.RequestID != "req_42" {
		t.Errorf("APIError %+v", apiErr)
	}
	for _, want := range []string{"anthropic:", "500", "Internal server error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), api.srv.URL) {
		t.Errorf("error %q carries the endpoint's URL", err)
	}
}

func TestClientErrorNotRetried(t *testing.T) {
	t.Parallel()
	// A provider that quotes the key back must not put it in the run's error.
	api := newFakeAPI(t, reply(http.StatusUnauthorized,
		`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key `+testKey+`"}}`))
	m := api.model(t, Options{})
	_, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if err == nil {
		t.Fatal("Generate succeeded on a 401")
	}
	if n := len(api.received()); n != 1 {
		t.Errorf("%d requests, want 1: a 401 is not retried", n)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q holds the API key", err)
	}
	for _, want := range []string{"anthropic:", "401", "authentication_error", "invalid x-api-key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	api := newFakeAPI(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server closes
	m := api.model(t, Options{Timeout: 20 * time.Millisecond, MaxRetries: -1})
	_, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want a deadline exceeded", err)
	}
	if !strings.Contains(err.Error(), "anthropic:") || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("error %q does not say it timed out", err)
	}
	if n := len(api.received()); n != 1 {
		t.Errorf("%d requests, want 1 (no retries)", n)
	}
}

func TestContextCancelled(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(http.StatusOK, message("end_turn", `[{"type":"text","text":"ok"}]`)))
	m := api.model(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.Generate(ctx, &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "anthropic:") {
		t.Fatalf("error %v, want anthropic: … context canceled", err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts Options
		want string // in the error; empty: valid
	}{
		{"no model", Options{}, "Options.Model"},
		{"negative max tokens", Options{Model: "m", MaxTokens: -1}, "Options.MaxTokens"},
		{"negative timeout", Options{Model: "m", Timeout: -time.Second}, "Options.Timeout"},
		{"base URL not http", Options{Model: "m", BaseURL: "ftp://example.com"}, "Options.BaseURL"},
		{"base URL not a URL", Options{Model: "m", BaseURL: "://nope"}, "Options.BaseURL"},
		{"base URL without host", Options{Model: "m", BaseURL: "http://"}, "Options.BaseURL"},
		{"defaults", Options{Model: "m"}, ""},
		{"negative retries", Options{Model: "m", MaxRetries: -3}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := New(tc.opts)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "anthropic:") {
					t.Fatalf("New: %v, want an error naming %s", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if m.maxTokens != DefaultMaxTokens || m.timeout != DefaultTimeout {
				t.Errorf("max tokens %d, timeout %s: not the defaults", m.maxTokens, m.timeout)
			}
			wantRetries := DefaultMaxRetries
			if tc.opts.MaxRetries < 0 {
				wantRetries = 0
			}
			if m.maxRetries != wantRetries {
				t.Errorf("max retries %d, want %d", m.maxRetries, wantRetries)
			}
		})
	}
}
