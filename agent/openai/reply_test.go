package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/openai"
)

func TestMalformedReplies(t *testing.T) {
	t.Parallel()
	call := func(name, args string) string {
		return completion(toolCallMessage("call_1", name, args), "tool_calls")
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not JSON", `not json`, "openai: chat completion: error parsing response json"},
		{"empty body", ``, "openai: chat completion:"},
		{"null", `null`, "openai: the reply has no choices"},
		{"choices missing", `{"id":"chatcmpl-1","object":"chat.completion"}`, "openai: the reply has no choices"},
		{"choices empty", `{"choices":[]}`, "openai: the reply has no choices"},
		{"choices not a list", `{"choices":{"a":1}}`, "openai:"},
		{"choice without message", `{"choices":[{"index":0,"finish_reason":"stop"}]}`, "openai: the reply's first choice has no message"},
		{"content not a string", completion(`{"role":"assistant","content":[{"type":"text","text":"hi"}]}`, "stop"), "openai: the reply's content is not a string"},
		{"tool calls not a list", completion(`{"role":"assistant","content":"x","tool_calls":{"id":"a"}}`, "tool_calls"), "openai: the reply's tool_calls is not a list of tool calls"},
		{"tool call not an object", completion(`{"role":"assistant","tool_calls":["payments_refund"]}`, "tool_calls"), "openai: the reply's tool_calls is not a list of tool calls"},
		{"arguments a number", call("payments_refund", `5`), "arguments are not a JSON object"},
		{"arguments a raw array", call("payments_refund", `[1]`), "arguments are not a JSON object"},
		{"unknown tool", call("payments_delete", `"{}"`), `openai: tool call 0: calls "payments_delete", which was not offered`},
		{"action name instead of wire name", call("payments.refund", `"{}"`), `calls "payments.refund", which was not offered`},
		{"arguments not JSON", call("payments_refund", jsonString(`{amount: 5`)), "openai: tool call 0: payments.refund: arguments are not valid JSON"},
		{"arguments an array", call("payments_refund", jsonString(`[1, 2]`)), "openai: tool call 0: payments.refund: arguments are not a JSON object"},
		{"arguments null", call("payments_refund", jsonString(`null`)), "arguments are not a JSON object"},
		{"arguments a string", call("payments_refund", jsonString(`"x"`)), "arguments are not a JSON object"},
		{"arguments two objects", call("payments_refund", jsonString(`{} {}`)), "arguments are not valid JSON"},
		{"tool call without id", completion(`{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"payments_refund","arguments":"{}"}}]}`, "tool_calls"), "openai: tool call 0: no id"},
		{"duplicate ids", completion(`{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"payments_refund","arguments":"{}"}},{"id":"a","type":"function","function":{"name":"crm_lookup","arguments":"{}"}}]}`, "tool_calls"), `openai: tool call 1: id "a" is used twice`},
		{"custom tool call", completion(`{"role":"assistant","tool_calls":[{"id":"a","type":"custom","custom":{"name":"payments_refund","input":"x"}}]}`, "tool_calls"), `openai: tool call 0: type "custom" is not a function call`},
		{"refusal", completion(`{"role":"assistant","content":null,"refusal":"I can't help with that."}`, "stop"), "openai: the model refused: I can't help with that."},
		{"cut off", completion(`{"role":"assistant","content":"Refunding th"}`, "length"), "openai: the reply was cut off at the token limit"},
		{"content filter", completion(`{"role":"assistant","content":""}`, "content_filter"), "openai: the reply was withheld by the content filter"},
		{"legacy function call", completion(`{"role":"assistant","function_call":{"name":"payments_refund","arguments":"{}"}}`, "function_call"), "openai: the reply uses the deprecated function_call field instead of tool_calls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeServer(t, func(n int, w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, tc.body) })
			reply, err := f.model(t, nil).Generate(context.Background(), &agent.Request{
				Messages: []agent.Message{{Role: agent.RoleUser, Text: "refund 5 to bob"}},
				Tools:    refundTools(),
			})
			if err == nil {
				t.Fatalf("reply %+v, want an error", reply)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q carries the API key", err)
			}
		})
	}
}

// serveBody is a fake server's transport in-process: each request is
// answered with status and body, without a socket, so the fuzzer runs fast.
type serveBody struct {
	status int
	body   []byte
}

func (s serveBody) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(s.status)
	_, _ = w.Write(s.body)
	return w.Result(), nil
}

// FuzzGenerate: whatever the endpoint answers, Generate returns a reply or
// an error, never panics, and a reply calls only offered tools with a JSON
// object.
func FuzzGenerate(f *testing.F) {
	for _, seed := range []string{
		completion(`{"role":"assistant","content":"hi"}`, "stop"),
		completion(toolCallMessage("call_1", "payments_refund", jsonString(`{"amount":5}`)), "tool_calls"),
		completion(toolCallMessage("call_1", "crm_lookup", `""`), "tool_calls"),
		completion(toolCallMessage("call_1", "payments_refund", jsonString(`[1]`)), "tool_calls"),
		completion(`{"role":"assistant","refusal":"no"}`, "stop"),
		`{"choices":[{"message":{"tool_calls":[{"id":"x","function":{"name":"crm_lookup","arguments":{"a":1}}}]}}]}`,
		`{"choices":null}`, `{"error":{"message":"x"}}`, `null`, `[]`, `not json`, ``,
	} {
		f.Add(uint16(200), []byte(seed))
	}
	f.Add(uint16(429), []byte(`{"error":{"message":"slow down","code":"rate_limit_exceeded"}}`))
	f.Add(uint16(500), []byte(`<html>`))
	offered := map[string]bool{"payments.refund": true, "crm.lookup": true}
	f.Fuzz(func(t *testing.T, status uint16, body []byte) {
		code := 200 + int(status)%400 // 200–599
		m, err := openai.New(openai.Options{
			Model:      "gpt-test",
			BaseURL:    "http://model.test/v1",
			APIKey:     testKey,
			MaxRetries: -1,
			HTTPClient: &http.Client{Transport: serveBody{status: code, body: body}},
		})
		if err != nil {
			t.Fatal(err)
		}
		reply, err := m.Generate(context.Background(), &agent.Request{
			Messages: []agent.Message{{Role: agent.RoleUser, Text: "refund 5 to bob"}},
			Tools:    refundTools(),
		})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "openai: ") {
				t.Errorf("error %q has no openai: prefix", err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q carries the API key", err)
			}
			return
		}
		if code >= 300 {
			t.Errorf("status %d, yet a reply: %+v", code, reply)
		}
		for _, c := range reply.ToolCalls {
			if !offered[c.Action] {
				t.Errorf("reply calls %q, not offered", c.Action)
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(c.Input, &obj); err != nil || obj == nil {
				t.Errorf("tool call input %q is not a JSON object", c.Input)
			}
		}
	})
}
