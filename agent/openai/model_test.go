package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/openai"
)

// refundSchema carries a number no float64 holds exactly: it must reach
// the wire as written.
const refundSchema = `{"type":"object","properties":{"amount":{"type":"integer","maximum":12345678901234567891},` +
	`"customer":{"type":"string"}},"required":["amount","customer"],"additionalProperties":false}`

func refundTools() []agent.Tool {
	return []agent.Tool{
		{Name: "payments.refund", Description: "Refund a payment.", InputSchema: json.RawMessage(refundSchema)},
		{Name: "crm.lookup", Description: "Find a customer.", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
}

// at walks a decoded JSON value by object keys and array indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %T is not an object", path, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %v has no element %d", path, v, k)
			}
			v = a[k]
		}
	}
	return v
}

func TestToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			writeJSON(w, 200, completion(toolCallMessage("call_1", "payments_refund", jsonString(`{"amount": 5, "customer": "bob"}`)), "tool_calls"))
			return
		}
		writeJSON(w, 200, completion(`{"role":"assistant","content":"Refunded 5 to bob."}`, "stop"))
	})
	m := f.model(t, nil)
	req := &agent.Request{
		Instructions: "You help customers of ACME.",
		Messages:     []agent.Message{{Role: agent.RoleUser, Text: "refund 5 to bob"}},
		Tools:        refundTools(),
	}
	reply, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "" || len(reply.ToolCalls) != 1 {
		t.Fatalf("reply %+v, want one tool call and no text", reply)
	}
	call := reply.ToolCalls[0]
	if call.ID != "call_1" || call.Action != "payments.refund" {
		t.Errorf("tool call %+v, want call_1 of payments.refund", call)
	}
	var input map[string]any
	if err := json.Unmarshal(call.Input, &input); err != nil || input["amount"] != 5.0 || input["customer"] != "bob" {
		t.Errorf("tool call input %s, want amount 5 and customer bob", call.Input)
	}

	seen := f.requests()
	if len(seen) != 1 {
		t.Fatalf("%d requests, want 1", len(seen))
	}
	first := seen[0]
	if first.method != http.MethodPost || first.path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", first.method, first.path)
	}
	if first.auth != "Bearer "+testKey {
		t.Errorf("Authorization %q, want the bearer key", first.auth)
	}
	body := first.decoded(t)
	if body["model"] != "gpt-test" {
		t.Errorf("model %v", body["model"])
	}
	if got := at(t, body, "messages"); len(got.([]any)) != 2 {
		t.Fatalf("messages %v, want system and user", got)
	}
	if at(t, body, "messages", 0, "role") != "system" || at(t, body, "messages", 0, "content") != req.Instructions {
		t.Errorf("first message %v, want the instructions as system", at(t, body, "messages", 0))
	}
	if at(t, body, "messages", 1, "role") != "user" || at(t, body, "messages", 1, "content") != "refund 5 to bob" {
		t.Errorf("second message %v, want the user's", at(t, body, "messages", 1))
	}
	var wantSchema any
	if err := decodeNumbers([]byte(refundSchema), &wantSchema); err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		name, desc string
		schema     any
	}{
		{"payments_refund", "Refund a payment.", wantSchema},
		{"crm_lookup", "Find a customer.", map[string]any{"type": "object"}},
	} {
		if at(t, body, "tools", i, "type") != "function" {
			t.Errorf("tool %d type %v", i, at(t, body, "tools", i, "type"))
		}
		fn := at(t, body, "tools", i, "function")
		if at(t, fn, "name") != want.name || at(t, fn, "description") != want.desc {
			t.Errorf("tool %d: %v, want name %q and description %q", i, fn, want.name, want.desc)
		}
		if got := at(t, fn, "parameters"); !reflect.DeepEqual(got, want.schema) {
			t.Errorf("tool %d parameters %v, want %v", i, got, want.schema)
		}
	}
	if !strings.Contains(string(first.body), "12345678901234567891") {
		t.Errorf("the schema's large number did not reach the wire as written: %s", first.body)
	}

	// The second turn carries the call and its result.
	req.Messages = append(req.Messages,
		agent.Message{Role: agent.RoleAssistant, ToolCalls: reply.ToolCalls},
		agent.Message{Role: agent.RoleTool, ToolCallID: "call_1", Result: json.RawMessage(`{"refund_id":"re_1","status":"succeeded"}`), Summary: "Refunded."})
	reply, err = m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "Refunded 5 to bob." || len(reply.ToolCalls) != 0 {
		t.Errorf("second reply %+v", reply)
	}
	seen = f.requests()
	if len(seen) != 2 {
		t.Fatalf("%d requests, want 2", len(seen))
	}
	body = seen[1].decoded(t)
	msgs := at(t, body, "messages").([]any)
	if len(msgs) != 4 {
		t.Fatalf("second request has %d messages, want 4: %v", len(msgs), msgs)
	}
	assistant := msgs[2]
	if at(t, assistant, "role") != "assistant" {
		t.Errorf("third message %v, want the assistant's", assistant)
	}
	if c, ok := assistant.(map[string]any)["content"]; ok && c != nil {
		t.Errorf("assistant content %v, want none beside its tool calls", c)
	}
	tc := at(t, assistant, "tool_calls", 0)
	if at(t, tc, "id") != "call_1" || at(t, tc, "type") != "function" || at(t, tc, "function", "name") != "payments_refund" {
		t.Errorf("assistant tool call %v, want call_1 of payments_refund", tc)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(at(t, tc, "function", "arguments").(string)), &args); err != nil || args["amount"] != 5.0 || args["customer"] != "bob" {
		t.Errorf("assistant tool call arguments %v", at(t, tc, "function", "arguments"))
	}
	tool := msgs[3]
	if at(t, tool, "role") != "tool" || at(t, tool, "tool_call_id") != "call_1" ||
		at(t, tool, "content") != `{"refund_id":"re_1","status":"succeeded"}` {
		t.Errorf("tool message %v, want the result for call_1", tool)
	}
}

// An action the conversation called but that is no longer offered keeps a
// name in the history, and the model may not call it.
func TestHistoryActionNotOffered(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, completion(toolCallMessage("call_2", "payments_void", `"{}"`), "tool_calls"))
	})
	req := &agent.Request{
		Messages: []agent.Message{
			{Role: agent.RoleUser, Text: "void it"},
			{Role: agent.RoleAssistant, Text: "Voiding.", ToolCalls: []agent.ToolCall{{ID: "call_1", Action: "payments.void"}}},
			{Role: agent.RoleTool, ToolCallID: "call_1", Summary: "Voided."},
		},
		Tools: refundTools(),
	}
	_, err := f.model(t, nil).Generate(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), `"payments_void", which was not offered`) {
		t.Fatalf("error %v, want a call of a tool not offered", err)
	}
	body := f.requests()[0].decoded(t)
	if at(t, body, "messages", 0, "role") != "user" {
		t.Errorf("first message %v, want the user's (no system message without instructions)", at(t, body, "messages", 0))
	}
	if at(t, body, "messages", 1, "content") != "Voiding." || at(t, body, "messages", 1, "tool_calls", 0, "function", "name") != "payments_void" ||
		at(t, body, "messages", 1, "tool_calls", 0, "function", "arguments") != "{}" {
		t.Errorf("assistant message %v", at(t, body, "messages", 1))
	}
	if at(t, body, "messages", 2, "content") != "Voided." {
		t.Errorf("tool message %v, want its summary for want of a result", at(t, body, "messages", 2))
	}
	if n := len(at(t, body, "tools").([]any)); n != 2 {
		t.Errorf("%d tools offered, want 2", n)
	}
}

func TestCompatibleServerReplies(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		// No "type", empty arguments: what some compatible servers send.
		writeJSON(w, 200, completion(`{"role":"assistant","content":"Looking.","tool_calls":[{"id":"c","function":{"name":"crm_lookup","arguments":""}}]}`, "tool_calls"))
	})
	reply, err := f.model(t, nil).Generate(context.Background(), &agent.Request{
		Messages: []agent.Message{{Role: agent.RoleUser, Text: "who am I"}},
		Tools:    refundTools()[1:],
	})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "Looking." || len(reply.ToolCalls) != 1 || reply.ToolCalls[0].Action != "crm.lookup" || string(reply.ToolCalls[0].Input) != "{}" {
		t.Errorf("reply %+v, want text and crm.lookup with {}", reply)
	}

	h := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		// Arguments as a JSON object rather than a string holding one.
		writeJSON(w, 200, completion(toolCallMessage("c", "payments_refund", `{"amount": 5}`), "tool_calls"))
	})
	reply, err = h.model(t, nil).Generate(context.Background(), &agent.Request{Tools: refundTools()})
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.ToolCalls) != 1 || string(reply.ToolCalls[0].Input) != `{"amount": 5}` {
		t.Errorf("reply %+v, want payments.refund with the object as sent", reply)
	}

	g := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, completion(`{"role":"assistant","content":"Hello."}`, "stop"))
	})
	if _, err := g.model(t, nil).Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.requests()[0].decoded(t)["tools"]; ok {
		t.Error("a request without tools carries a tools field")
	}
}

func TestRetriesTooManyRequests(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			w.Header().Set("Retry-After-Ms", "1")
			writeJSON(w, 429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
		writeJSON(w, 200, completion(`{"role":"assistant","content":"ok"}`, "stop"))
	})
	reply, err := f.model(t, nil).Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "ok" {
		t.Errorf("reply %+v", reply)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want 2 (one retry)", n)
	}
}

func TestServerErrorEveryTry(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After-Ms", "1")
		writeJSON(w, 500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","code":null}}`)
	})
	_, err := f.model(t, func(o *openai.Options) { o.MaxRetries = 1 }).Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if err == nil {
		t.Fatal("no error")
	}
	want := "openai: chat completion: HTTP 500 Internal Server Error: The server had an error while processing your request. (server_error)"
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests, want 2 (MaxRetries 1)", n)
	}
}

func TestAPIErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		body        string
		want        string
	}{
		{"bad request", 400, "application/json", `{"error":{"message":"Invalid schema for function 'payments_refund'.","type":"invalid_request_error","param":"tools[0]","code":"invalid_function_parameters"}}`,
			"openai: chat completion: HTTP 400 Bad Request: Invalid schema for function 'payments_refund'. (invalid_function_parameters)"},
		{"key echoed", 401, "application/json", `{"error":{"message":"Incorrect API key provided: ` + testKey + `.","type":"invalid_request_error","code":"invalid_api_key"}}`,
			"openai: chat completion: HTTP 401 Unauthorized: Incorrect API key provided: [redacted]. (invalid_api_key)"},
		{"not found", 404, "application/json", `{"error":{"message":"The model 'gpt-test' does not exist"}}`,
			"openai: chat completion: HTTP 404 Not Found: The model 'gpt-test' does not exist"},
		{"html gateway page", 502, "text/html", `<html><body>Bad Gateway</body></html>`,
			"openai: chat completion: HTTP 502 Bad Gateway"},
		{"no error object", 503, "application/json", `{"detail":"overloaded"}`,
			"openai: chat completion: HTTP 503 Service Unavailable"},
		{"error not an object", 400, "application/json", `{"error":"bad"}`,
			"openai: chat completion: HTTP 400 Bad Request"},
		{"unknown status", 599, "application/json", `{"error":{"message":"odd"}}`,
			"openai: chat completion: HTTP 599: odd"},
		{"long message", 400, "application/json", `{"error":{"message":"` + long + `"}}`,
			"openai: chat completion: HTTP 400 Bad Request: " + strings.Repeat("x", 200) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			})
			_, err := f.model(t, func(o *openai.Options) { o.MaxRetries = -1 }).Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "openai: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q carries the API key", err)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1 (no retries)", n)
			}
		})
	}
}

// hang answers nothing until the client gives up (or the test ends).
func hang(t *testing.T) func(int, http.ResponseWriter, *http.Request) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // runs before the server closes
	return func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
}

func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, hang(t))
	m := f.model(t, func(o *openai.Options) { o.Timeout = 20 * time.Millisecond; o.MaxRetries = -1 })
	_, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer within 20ms") {
		t.Fatalf("error %v, want the per-request timeout", err)
	}
}

func TestContextDeadline(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, hang(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := f.model(t, nil).Generate(ctx, &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "openai: ") {
		t.Fatalf("error %v, want the context's deadline", err)
	}
}

func TestContextCancelled(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, hang(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.model(t, nil).Generate(ctx, &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// The configuration is the only source of the key and the endpoint: the
// SDK's OPENAI_* environment variables are not read.
func TestNoAmbientEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leak: yes")
	f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, completion(`{"role":"assistant","content":"ok"}`, "stop"))
	})
	m := f.model(t, func(o *openai.Options) { o.APIKey = "" })
	if _, err := m.Generate(context.Background(), &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	seen := f.requests()[0]
	if seen.auth != "" {
		t.Errorf("Authorization %q, want none without a key", seen.auth)
	}
	if seen.header.Get("X-Leak") != "" {
		t.Errorf("OPENAI_CUSTOM_HEADERS reached the request")
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts openai.Options
		want string
	}{
		{"no model", openai.Options{}, "Options.Model"},
		{"base URL not http", openai.Options{Model: "m", BaseURL: "ftp://example.test/v1"}, "Options.BaseURL"},
		{"base URL not a URL", openai.Options{Model: "m", BaseURL: "://"}, "Options.BaseURL"},
		{"base URL without host", openai.Options{Model: "m", BaseURL: "http:///v1"}, "Options.BaseURL"},
		{"negative timeout", openai.Options{Model: "m", Timeout: -time.Second}, "Options.Timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := openai.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, %v; want an error naming %s", m, err, tc.want)
			}
		})
	}
	if _, err := openai.New(openai.Options{Model: "m", APIKey: testKey, MaxRetries: -3}); err != nil {
		t.Errorf("New with defaults: %v", err)
	}
}

// Requests the conversation cannot be sent as fail before any request.
func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		t.Errorf("a request was sent")
		writeJSON(w, 500, `{}`)
	})
	m := f.model(t, nil)
	for _, tc := range []struct {
		name string
		req  *agent.Request
		want string
	}{
		{"nil", nil, "openai: nil request"},
		{"unknown role", &agent.Request{Messages: []agent.Message{{Role: "system", Text: "x"}}}, `message 0: unknown role "system"`},
		{"tool message without id", &agent.Request{Messages: []agent.Message{{Role: agent.RoleTool, Result: json.RawMessage(`{}`)}}}, "message 0: tool message has no tool call id"},
		{"tool call without id", &agent.Request{Messages: []agent.Message{{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{Action: "a"}}}}}, "message 0: tool call 0 has no id"},
		{"schema an array", &agent.Request{Tools: []agent.Tool{{Name: "a", InputSchema: json.RawMessage(`[]`)}}}, `tool "a": input schema is not a JSON object`},
		{"schema null", &agent.Request{Tools: []agent.Tool{{Name: "a", InputSchema: json.RawMessage(`null`)}}}, `tool "a": input schema is not a JSON object`},
		{"schema not JSON", &agent.Request{Tools: []agent.Tool{{Name: "a", InputSchema: json.RawMessage(`{"type":`)}}}, `tool "a": input schema is not a JSON object`},
		{"schema trailing data", &agent.Request{Tools: []agent.Tool{{Name: "a", InputSchema: json.RawMessage(`{}}`)}}}, `tool "a": input schema is not a JSON object`},
	} {
		_, err := m.Generate(context.Background(), tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
