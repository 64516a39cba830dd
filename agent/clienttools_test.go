package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/runhost"
)

// clientModel calls the caller's get_weather tool (and, on "weather and
// refund", the refund action too) when asked about the weather, and
// answers a result with its summary. It records every request.
type clientModel struct {
	mu       sync.Mutex
	requests []*agent.Request
}

func (m *clientModel) Generate(_ context.Context, req *agent.Request) (*agent.Reply, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	m.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	switch {
	case last.Role == agent.RoleTool:
		return &agent.Reply{Text: "It is " + last.Summary}, nil
	case last.Role == agent.RoleUser && strings.HasPrefix(last.Text, "weather"):
		reply := &agent.Reply{ToolCalls: []agent.ToolCall{{ID: "call_w", Action: "get_weather", Input: json.RawMessage(`{"city":"Lisbon"}`)}}}
		if strings.Contains(last.Text, "refund") {
			reply.ToolCalls = append(reply.ToolCalls, agent.ToolCall{ID: "call_r", Action: "payments.refund",
				Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`)})
		}
		return reply, nil
	}
	return &agent.Reply{Text: "Ask me about the weather."}, nil
}

func (m *clientModel) last() *agent.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[len(m.requests)-1]
}

var weatherTool = cstype.ClientTool{Name: "get_weather", Description: "The weather in a city.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}

func clientHarness(t *testing.T, mode countersign.Mode) (*harness, *clientModel) {
	t.Helper()
	h := newHarness(t, mode, "en")
	model := &clientModel{}
	rt, err := agent.NewRuntime(agent.RuntimeOptions{Engine: h.engine, Agents: []*agent.Agent{{Name: "demo", Model: model}}})
	if err != nil {
		t.Fatal(err)
	}
	h.rt = rt
	return h, model
}

func (h *harness) postMessage(m *countersign.Message) (*countersign.MessageAnswer, error) {
	m.Identity, m.ThreadID = alice, "th1"
	return h.engine.PostMessage(context.Background(), m)
}

func (h *harness) pending(r *cstype.Run) []string {
	h.t.Helper()
	st, err := h.engine.RunHost(runhost.Grant()).RunState(context.Background(), "acme", r.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	for _, c := range st.PendingClientCalls() {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestClientToolCallEndsTheRunAndItsResultStartsTheNext(t *testing.T) {
	h, model := clientHarness(t, countersign.ModeWait)
	ans, err := h.postMessage(&countersign.Message{Text: "weather in Lisbon?", Agent: "demo", ClientTools: []cstype.ClientTool{weatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	r := h.drive(ans.Run)
	if r.Status != cstype.RunFinished || r.Steps != 1 {
		t.Fatalf("run %+v, want finished after one model call", r)
	}
	// The model was offered the caller's tool besides the agent's action.
	var offered []string
	for _, tool := range model.last().Tools {
		offered = append(offered, tool.Name)
		if tool.Name == "get_weather" && (tool.Description != weatherTool.Description || string(tool.InputSchema) != string(weatherTool.Parameters)) {
			t.Fatalf("offered %+v, want the client tool as given", tool)
		}
	}
	if !slices.Equal(offered, []string{"payments.refund", "get_weather"}) {
		t.Fatalf("offered %q", offered)
	}
	if got := h.pending(r); !slices.Equal(got, []string{"call_w"}) {
		t.Fatalf("pending client calls %q, want call_w", got)
	}
	msgs := h.messages()
	if a := msgs[len(msgs)-1]; a.Role != cstype.RoleAssistant || len(a.ToolCalls) != 1 || !a.ToolCalls[0].Client {
		t.Fatalf("last message %+v, want the assistant's client call", a)
	}

	// The caller's result starts the next run, which answers it.
	ans, err = h.postMessage(&countersign.Message{Agent: "demo", ToolResults: []countersign.ToolResult{
		{ID: "msg_result_1", ToolCallID: "call_w", Content: `{"sky": "sunny"}`}}})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Message != nil || len(ans.Results) != 1 || ans.Results[0].ID != "msg_result_1" || ans.Run == nil {
		t.Fatalf("answer %+v, want the result stored and a run", ans)
	}
	r2 := h.drive(ans.Run)
	if r2.Status != cstype.RunFinished || len(h.pending(r2)) != 0 {
		t.Fatalf("run %+v, pending %q; want finished, nothing pending", r2, h.pending(r2))
	}
	msgs = h.messages()
	if last := msgs[len(msgs)-1]; last.RunID != r2.ID || last.Text != `It is {"sky": "sunny"}` {
		t.Fatalf("last message %+v, want the model's answer to the result", last)
	}
	got := model.last().Messages
	if res := got[len(got)-1]; res.Role != agent.RoleTool || res.ToolCallID != "call_w" || string(res.Result) != `{"sky": "sunny"}` {
		t.Fatalf("the model read %+v last, want the result", res)
	}

	// That call is answered: the same result again is refused, and so is
	// a result for a call nobody made; neither stores anything.
	n := len(h.messages())
	for name, res := range map[string]countersign.ToolResult{
		"answered":  {ToolCallID: "call_w", Content: "again"},
		"not asked": {ToolCallID: "call_nobody", Content: "x"},
	} {
		if _, err := h.postMessage(&countersign.Message{Agent: "demo", ToolResults: []countersign.ToolResult{res}}); !errors.Is(err, countersign.ErrInvalidCall) {
			t.Errorf("%s: %v, want ErrInvalidCall", name, err)
		}
	}
	if len(h.messages()) != n {
		t.Fatal("a refused result was stored")
	}
}

func TestClientCallWaitsForTheEngineCallsOfItsStep(t *testing.T) {
	h, model := clientHarness(t, countersign.ModeWait)
	ans, err := h.postMessage(&countersign.Message{Text: "weather and refund", Agent: "demo", ClientTools: []cstype.ClientTool{weatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	r := h.drive(ans.Run)
	if r.Status != cstype.RunParked {
		t.Fatalf("run %s, want parked on the refund", r.Status)
	}
	// Approved in the conversation; the run makes the refund, then ends
	// with the caller's call pending, without asking the model again.
	h.post(bob, "yes", false)
	r = h.resume()
	if r.Status != cstype.RunFinished || h.executed.Load() != 1 || r.Steps != 1 {
		t.Fatalf("run %+v, %d executions; want finished after the refund, one model call", r, h.executed.Load())
	}
	if got := h.pending(r); !slices.Equal(got, []string{"call_w"}) {
		t.Fatalf("pending client calls %q, want call_w", got)
	}
	// The result, and a new question, in one message: the model reads each
	// call's result right after the call, then the refund's outcome, and
	// not the text decision.
	ans, err = h.postMessage(&countersign.Message{Text: "thanks", Agent: "demo", ToolResults: []countersign.ToolResult{
		{ToolCallID: "call_w", Error: "location access denied"}}})
	if err != nil {
		t.Fatal(err)
	}
	h.drive(ans.Run)
	var shape []string
	for _, m := range model.last().Messages {
		s := string(m.Role)
		if m.Role == agent.RoleTool {
			s += ":" + m.ToolCallID
		}
		if m.Text != "" {
			s += ":" + m.Text
		}
		shape = append(shape, s)
	}
	want := []string{"user:weather and refund", "assistant", "tool:call_r", "tool:call_w",
		`assistant:Action "payments.refund" completed. Receipt: rf_1.`, "user:thanks"}
	if !slices.Equal(shape, want) {
		t.Fatalf("the model read %q, want %q", shape, want)
	}
	if res := model.last().Messages[3]; !strings.Contains(string(res.Result), `"error":"location access denied"`) ||
		res.Summary != "get_weather failed: location access denied" {
		t.Fatalf("the failed result %+v", res)
	}
}

func TestCallsNobodyAnsweredReadAsNoResult(t *testing.T) {
	h, model := clientHarness(t, countersign.ModeWait)
	ans, err := h.postMessage(&countersign.Message{Text: "weather?", Agent: "demo", ClientTools: []cstype.ClientTool{weatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	h.drive(ans.Run)
	// The caller moves on without the result: the call is no longer
	// pending, and the model reads it answered by no result.
	ans, err = h.postMessage(&countersign.Message{Text: "never mind", Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	h.drive(ans.Run)
	msgs := model.last().Messages
	if len(msgs) != 4 || msgs[2].Role != agent.RoleTool || msgs[2].ToolCallID != "call_w" || !strings.Contains(string(msgs[2].Result), `"no_result"`) ||
		msgs[3].Text != "never mind" {
		t.Fatalf("the model read %+v", msgs)
	}
	if _, err := h.postMessage(&countersign.Message{Agent: "demo", ToolResults: []countersign.ToolResult{{ToolCallID: "call_w", Content: "late"}}}); !errors.Is(err, countersign.ErrInvalidCall) {
		t.Fatalf("a result after the conversation moved on: %v, want ErrInvalidCall", err)
	}

	// A run cancelled while it waits for a human leaves its calls without
	// results: the next run's model reads them answered by no result.
	ans, err = h.postMessage(&countersign.Message{Text: "weather and refund", Agent: "demo", ClientTools: []cstype.ClientTool{weatherTool}})
	if err != nil {
		t.Fatal(err)
	}
	if r := h.drive(ans.Run); r.Status != cstype.RunParked {
		t.Fatalf("run %s, want parked", r.Status)
	}
	if _, err := h.engine.CancelRun(context.Background(), alice, "th1", ans.Run.ID); err != nil {
		t.Fatal(err)
	}
	ans, err = h.postMessage(&countersign.Message{Text: "forget it", Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	h.drive(ans.Run)
	msgs = model.last().Messages
	tail := msgs[len(msgs)-4:]
	if len(tail[0].ToolCalls) != 2 || tail[1].ToolCallID != "call_w" || tail[2].ToolCallID != "call_r" ||
		!strings.Contains(string(tail[2].Result), `"no_result"`) || tail[3].Text != "forget it" {
		t.Fatalf("the model read %+v", tail)
	}
	if h.executed.Load() != 0 {
		t.Fatal("the cancelled run's refund executed")
	}
}

func TestClientToolsAreChecked(t *testing.T) {
	h, _ := clientHarness(t, countersign.ModeWait)
	long := strings.Repeat("x", 65)
	for name, m := range map[string]*countersign.Message{
		"a dotted name":            {Text: "x", Agent: "demo", ClientTools: []cstype.ClientTool{{Name: "get.weather"}}},
		"a long name":              {Text: "x", Agent: "demo", ClientTools: []cstype.ClientTool{{Name: long}}},
		"no name":                  {Text: "x", Agent: "demo", ClientTools: []cstype.ClientTool{{Description: "x"}}},
		"twice":                    {Text: "x", Agent: "demo", ClientTools: []cstype.ClientTool{weatherTool, weatherTool}},
		"parameters not JSON":      {Text: "x", Agent: "demo", ClientTools: []cstype.ClientTool{{Name: "a", Parameters: json.RawMessage(`{`)}}},
		"parameters an array":      {Text: "x", Agent: "demo", ClientTools: []cstype.ClientTool{{Name: "a", Parameters: json.RawMessage(`[]`)}}},
		"parameters null":          {Text: "x", Agent: "demo", ClientTools: []cstype.ClientTool{{Name: "a", Parameters: json.RawMessage(`null`)}}},
		"without a run":            {Text: "x", ClientTools: []cstype.ClientTool{weatherTool}},
		"neither text nor any":     {Agent: "demo"},
		"a result on a new thread": {Agent: "demo", ToolResults: []countersign.ToolResult{{ToolCallID: "call_w", Content: "x"}}},
		"a result with a bad id":   {Agent: "demo", ToolResults: []countersign.ToolResult{{ID: "bad id", ToolCallID: "call_w"}}},
		"too many tools":           {Text: "x", Agent: "demo", ClientTools: manyTools(65)},
	} {
		if _, err := h.postMessage(m); !errors.Is(err, countersign.ErrInvalidCall) {
			t.Errorf("%s: %v, want ErrInvalidCall", name, err)
		}
	}
	if _, err := h.engine.Thread(context.Background(), alice, "th1"); !errors.Is(err, countersign.ErrNotFound) {
		t.Fatalf("a refused message created the thread: %v", err)
	}
}

func manyTools(n int) []cstype.ClientTool {
	out := make([]cstype.ClientTool, n)
	for i := range out {
		out[i] = cstype.ClientTool{Name: fmt.Sprintf("tool_%d", i)}
	}
	return out
}
