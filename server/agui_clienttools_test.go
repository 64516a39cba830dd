package server

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/agui/event"
)

var weatherTool = map[string]any{"name": "get_weather", "description": "The weather in a city, from the browser.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}

// TestAGUIClientToolRoundTrip: a call of a tool of the input ends the run
// with the call pending; its result, as a tool message of the next input,
// starts the next run, which answers it.
func TestAGUIClientToolRoundTrip(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	user := map[string]any{"id": "m1", "role": "user", "content": "weather in Lisbon?"}
	evs := h.runAGUI("alice", map[string]any{"threadId": "ct1", "runId": "r1", "messages": []any{user}, "tools": []any{weatherTool}})
	if got := types(evs); got != "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED" {
		t.Fatalf("events %s, want the call and a finish", got)
	}
	start := evs[4].(*event.ToolCallStart)
	args := evs[5].(*event.ToolCallArgs)
	fin := evs[len(evs)-1].(*event.RunFinished)
	if start.ToolCallName != "get_weather" || args.Delta != `{"city":"Lisbon"}` {
		t.Fatalf("tool call %+v %+v", start, args)
	}
	if fin.Outcome == nil || fin.Outcome.Type != event.OutcomeSuccess || !slices.Equal(fin.Outcome.PendingToolCallIDs, []string{start.ToolCallID}) {
		t.Fatalf("outcome %+v, want success with %s pending", fin.Outcome, start.ToolCallID)
	}

	// The front end ran the tool: its history now holds the assistant's
	// message and the tool's result.
	assistant := map[string]any{"id": start.ParentMessageID, "role": "assistant", "content": "Let me look.",
		"toolCalls": []any{map[string]any{"id": start.ToolCallID, "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": args.Delta}}}}
	result := map[string]any{"id": "tm1", "role": "tool", "toolCallId": start.ToolCallID, "content": "sunny, 21 °C"}
	next := map[string]any{"threadId": "ct1", "runId": "r2", "messages": []any{user, assistant, result}, "tools": []any{weatherTool}}
	evs = h.runAGUI("alice", next)
	if got := types(evs); got != "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED" {
		t.Fatalf("events %s, want the model's answer", got)
	}
	if text := evs[2].(*event.TextMessageContent).Delta; text != "Done: sunny, 21 °C" {
		t.Fatalf("answer %q", text)
	}
	if fin := evs[len(evs)-1].(*event.RunFinished); fin.Outcome == nil || len(fin.Outcome.PendingToolCallIDs) != 0 || fin.RunID != "r2" {
		t.Fatalf("outcome %+v, want success with nothing pending", fin.Outcome)
	}
	// The thread holds the result, sent by alice.
	thread := h.must(200, req{method: "GET", path: "/v1/threads/ct1", token: "alice"}).json(t)
	raw, _ := json.Marshal(thread["messages"])
	if !strings.Contains(string(raw), `"tm1"`) || !strings.Contains(string(raw), "sunny, 21 °C") {
		t.Fatalf("thread messages %s, want the tool's result", raw)
	}
	// The same input again brings nothing new.
	evs = h.runAGUI("alice", next)
	if e, ok := evs[len(evs)-1].(*event.RunError); !ok || e.Code != "INVALID_INPUT" {
		t.Fatalf("the same input again: %s", types(evs))
	}
}

// TestAGUIClientToolInputRefused: what the endpoint refuses of client
// tools and their results, each as RUN_ERROR INVALID_INPUT, storing
// nothing.
func TestAGUIClientToolInputRefused(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	user := map[string]any{"id": "m1", "role": "user", "content": "weather in Porto?"}
	evs := h.runAGUI("alice", map[string]any{"threadId": "ct2", "runId": "r1", "messages": []any{user}, "tools": []any{weatherTool}})
	callID := evs[4].(*event.ToolCallStart).ToolCallID
	for name, input := range map[string]map[string]any{
		"a result for a call nobody made": {"messages": []any{user, map[string]any{"id": "tx", "role": "tool", "toolCallId": "call_nobody", "content": "x"}}},
		"a result without a call id":      {"messages": []any{user, map[string]any{"id": "tx", "role": "tool", "content": "x"}}},
		"a result that is not text":       {"messages": []any{user, map[string]any{"id": "tx", "role": "tool", "toolCallId": callID, "content": map[string]any{"a": 1}}}},
		"the same call answered twice": {"messages": []any{user,
			map[string]any{"id": "tx", "role": "tool", "toolCallId": callID, "content": "a"},
			map[string]any{"id": "ty", "role": "tool", "toolCallId": callID, "content": "b"}}},
		"a tool with a dotted name": {"messages": []any{user, map[string]any{"id": "m2", "role": "user", "content": "hi"}},
			"tools": []any{map[string]any{"name": "get.weather", "description": "x", "parameters": map[string]any{}}}},
		"a tool without a name": {"messages": []any{user, map[string]any{"id": "m2", "role": "user", "content": "hi"}},
			"tools": []any{map[string]any{"description": "x"}}},
		"a tool whose parameters are not a schema": {"messages": []any{user, map[string]any{"id": "m2", "role": "user", "content": "hi"}},
			"tools": []any{map[string]any{"name": "x", "description": "x", "parameters": []any{1}}}},
		"a message without an id": {"messages": []any{map[string]any{"role": "user", "content": "hi"}}},
	} {
		input["threadId"], input["runId"] = "ct2", "r_bad"
		// Some are not what the document allows either: the endpoint
		// must refuse them all the same.
		evs := h.aguiStream(req{method: "POST", path: "/v1/agui", token: "alice", body: input, invalid: true})
		if e, ok := evs[len(evs)-1].(*event.RunError); !ok || e.Code != "INVALID_INPUT" {
			t.Errorf("%s: %s, want RUN_ERROR INVALID_INPUT", name, types(evs))
		}
	}
	thread := h.must(200, req{method: "GET", path: "/v1/threads/ct2", token: "alice"}).json(t)
	if msgs := thread["messages"].([]any); len(msgs) != 2 {
		t.Fatalf("%d messages after refused inputs, want the first run's 2", len(msgs))
	}
}
