package anthropic

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent"
)

// offeredRequest offers payments.refund (wire name payments_refund).
func offeredRequest() *agent.Request {
	return &agent.Request{
		Messages: []agent.Message{{Role: agent.RoleUser, Text: "refund 5 to bob"}},
		Tools:    []agent.Tool{refundTool},
	}
}

func TestMalformedReplies(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name        string
		contentType string // empty: application/json
		body        string
		want        string // in the error
	}{
		{"not JSON", "", `{"content": [`, "anthropic:"},
		{"empty body", "", ``, "anthropic:"},
		{"not JSON, said so", "text/html", `<html>bad gateway</html>`, "anthropic:"},
		{"JSON null", "", `null`, "the reply is empty"},
		{"JSON array", "", `[1,2]`, "anthropic:"},
		{"JSON string", "", `"hello"`, "anthropic:"},
		{"content missing", "", `{"type":"message","role":"assistant","stop_reason":"end_turn"}`, "no content"},
		{"content null", "", message("end_turn", `null`), "no content"},
		{"content not a list", "", message("end_turn", `"hello"`), "content is not a list"},
		{"content empty", "", message("end_turn", `[]`), "neither text nor a tool call"},
		{"only an empty text", "", message("end_turn", `[{"type":"text","text":""}]`), "neither text nor a tool call"},
		{"blocks not objects", "", message("end_turn", `[1,"x",null]`), "anthropic:"},
		{"block without type", "", message("end_turn", `[{"text":"hi"}]`), `type ""`},
		{"unknown block type", "", message("end_turn", `[{"type":"server_tool_use","id":"s1","name":"web_search","input":{}}]`), "server_tool_use"},
		{"unknown tool", "", message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments_delete","input":{}}]`), `"payments_delete", a tool that was not offered`},
		{"action name instead of wire name", "", message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments.refund","input":{}}]`), "not offered"},
		{"long unknown tool name", "", message("tool_use", `[{"type":"tool_use","id":"t1","name":"`+long+`","input":{}}]`), "not offered"},
		{"input a string", "", message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments_refund","input":"{\"amount\":5}"}]`), "not a JSON object"},
		{"input a list", "", message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments_refund","input":[5]}]`), "not a JSON object"},
		{"input null", "", message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments_refund","input":null}]`), "not a JSON object"},
		{"input missing", "", message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments_refund"}]`), "not a JSON object"},
		{"tool_use without id", "", message("tool_use", `[{"type":"tool_use","name":"payments_refund","input":{}}]`), "no id"},
		{"tool_use id twice", "", message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments_refund","input":{}},{"type":"tool_use","id":"t1","name":"payments_refund","input":{}}]`), "used twice"},
		{"refusal", "", `{"type":"message","role":"assistant","content":[{"type":"text","text":"I can't"}],"stop_reason":"refusal",` +
			`"stop_details":{"type":"refusal","category":"cyber","explanation":"not allowed"}}`, "refused to answer: category cyber: not allowed"},
		{"refusal without details", "", message("refusal", `[]`), "refused"},
		{"cut off", "", message("max_tokens", `[{"type":"tool_use","id":"t1","name":"payments_refund","input":{"amount":5}}]`), "max_tokens (1024)"},
		{"context window", "", message("model_context_window_exceeded", `[{"type":"text","text":"…"}]`), "context window"},
		{"pause", "", message("pause_turn", `[{"type":"text","text":"…"}]`), `unexpected reason "pause_turn"`},
		{"long stop reason", "", message(long, `[{"type":"text","text":"…"}]`), "unexpected reason"},
		{"stop reason not a string", "", `{"content":[{"type":"text","text":"hi"}],"stop_reason":{"a":1}}`, "anthropic:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", cmp.Or(tc.contentType, "application/json"))
				_, _ = io.WriteString(w, tc.body)
			})
			m := api.model(t, Options{MaxRetries: -1})
			got, err := m.Generate(context.Background(), offeredRequest())
			if err == nil {
				t.Fatalf("Generate: reply %+v, want an error", got)
			}
			if got != nil {
				t.Errorf("a reply %+v beside the error", got)
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.HasPrefix(msg, "anthropic:") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q, want one starting anthropic: that says %q", msg, tc.want)
			}
			if len(msg) > 1000 {
				t.Errorf("error of %d bytes: a reply's strings must be cut", len(msg))
			}
			if strings.Contains(msg, testKey) {
				t.Errorf("error %q holds the API key", msg)
			}
		})
	}
}

// TestRepliesAccepted: what a reply may hold besides text and offered calls.
func TestRepliesAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		body  string
		text  string
		calls int
	}{
		{"thinking skipped", message("end_turn", `[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"hi"}]`), "hi", 0},
		{"no stop reason", `{"content":[{"type":"text","text":"hi"}]}`, "hi", 0},
		{"stop sequence", message("stop_sequence", `[{"type":"text","text":"hi"}]`), "hi", 0},
		{"tool call only", message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments_refund","input":{"amount":5,"customer":"bob"}}]`), "", 1},
		{"extra fields", `{"content":[{"type":"text","text":"hi","citations":null,"future":1}],"stop_reason":"end_turn","future":{"x":1}}`, "hi", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(http.StatusOK, tc.body))
			got, err := api.model(t, Options{}).Generate(context.Background(), offeredRequest())
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			if got.Text != tc.text || len(got.ToolCalls) != tc.calls {
				t.Errorf("reply %+v, want text %q and %d calls", got, tc.text, tc.calls)
			}
			for _, c := range got.ToolCalls {
				if c.Action != "payments.refund" || !json.Valid(c.Input) {
					t.Errorf("call %+v", c)
				}
			}
		})
	}
}

// TestBadRequests: a request that cannot be sent is an error before any
// request is made.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	user := agent.Message{Role: agent.RoleUser, Text: "hi"}
	for _, tc := range []struct {
		name string
		req  *agent.Request
		want string
	}{
		{"nil", nil, "no request"},
		{"no messages", &agent.Request{Instructions: "be brief"}, "no message"},
		{"only empty messages", &agent.Request{Messages: []agent.Message{{Role: agent.RoleUser}, {Role: agent.RoleAssistant}}}, "no message"},
		{"unknown role", &agent.Request{Messages: []agent.Message{{Role: "system", Text: "x"}}}, `message 0 (system): unknown role`},
		{"call without id", &agent.Request{Messages: []agent.Message{user, {Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{Action: "a.b"}}}}}, `message 1 (assistant): the call of "a.b" has no id`},
		{"call input not an object", &agent.Request{Messages: []agent.Message{user, {Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c", Action: "a.b", Input: json.RawMessage(`[1]`)}}}}}, "not a JSON object"},
		{"call input not JSON", &agent.Request{Messages: []agent.Message{user, {Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c", Action: "a.b", Input: json.RawMessage(`{"a":`)}}}}}, "not a JSON object"},
		{"result without call", &agent.Request{Messages: []agent.Message{user, {Role: agent.RoleTool, Result: json.RawMessage(`{}`)}}}, "names no call"},
		{"schema not an object", &agent.Request{Messages: []agent.Message{user}, Tools: []agent.Tool{{Name: "a.b", InputSchema: json.RawMessage(`[]`)}}}, `tool "a.b": not a JSON object`},
		{"schema null", &agent.Request{Messages: []agent.Message{user}, Tools: []agent.Tool{{Name: "a.b", InputSchema: json.RawMessage(`null`)}}}, "not a JSON object"},
		{"schema of a string", &agent.Request{Messages: []agent.Message{user}, Tools: []agent.Tool{{Name: "a.b", InputSchema: json.RawMessage(`{"type":"string"}`)}}}, `its type is "string"`},
		{"schema type a list", &agent.Request{Messages: []agent.Message{user}, Tools: []agent.Tool{{Name: "a.b", InputSchema: json.RawMessage(`{"type":["object","null"]}`)}}}, "its type is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := newFakeAPI(t, reply(http.StatusOK, message("end_turn", `[{"type":"text","text":"ok"}]`)))
			got, err := api.model(t, Options{}).Generate(context.Background(), tc.req)
			if err == nil || got != nil {
				t.Fatalf("Generate: %+v, %v; want an error", got, err)
			}
			if !strings.HasPrefix(err.Error(), "anthropic:") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one that says %q", err, tc.want)
			}
			if n := len(api.received()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}
