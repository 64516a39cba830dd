package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/agent"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/respjson"
)

// newReply maps the first choice of a completion back to an agent.Reply.
// offered is the table from the wire names of the offered tools to their
// action names; a call of any other function is an error.
func newReply(c *sdk.ChatCompletion, offered map[string]string) (*agent.Reply, error) {
	if c == nil || len(c.Choices) == 0 {
		return nil, errors.New("openai: the reply has no choices")
	}
	choice := c.Choices[0]
	// The SDK's decoder is lenient: a field of the wrong type is left zero
	// and marked invalid, so what we read is checked for presence here.
	if !choice.JSON.Message.Valid() {
		return nil, errors.New("openai: the reply's first choice has no message")
	}
	msg := choice.Message
	if invalid(msg.JSON.Content) {
		return nil, errors.New("openai: the reply's content is not a string")
	}
	if invalid(msg.JSON.ToolCalls) {
		return nil, errors.New("openai: the reply's tool_calls is not a list of tool calls")
	}
	if msg.Refusal != "" {
		return nil, fmt.Errorf("openai: the model refused: %s", clip(msg.Refusal))
	}
	switch choice.FinishReason {
	case "length":
		return nil, errors.New("openai: the reply was cut off at the token limit (finish_reason length)")
	case "content_filter":
		return nil, errors.New("openai: the reply was withheld by the content filter (finish_reason content_filter)")
	}
	if msg.JSON.FunctionCall.Valid() {
		// The deprecated single function call: we offer tools, never
		// functions, so a server that answers this way is not speaking the
		// protocol we asked for.
		return nil, errors.New("openai: the reply uses the deprecated function_call field instead of tool_calls")
	}
	reply := &agent.Reply{Text: msg.Content}
	seen := make(map[string]bool, len(msg.ToolCalls))
	for i, tc := range msg.ToolCalls {
		call, err := toolCall(tc, offered)
		if err != nil {
			return nil, fmt.Errorf("openai: tool call %d: %w", i, err)
		}
		// The engine derives its idempotent tool-call id from this one, so
		// two calls with one id would be taken for one call.
		if seen[call.ID] {
			return nil, fmt.Errorf("openai: tool call %d: id %q is used twice", i, clip(call.ID))
		}
		seen[call.ID] = true
		reply.ToolCalls = append(reply.ToolCalls, call)
	}
	return reply, nil
}

func toolCall(tc sdk.ChatCompletionMessageToolCallUnion, offered map[string]string) (agent.ToolCall, error) {
	// Some compatible servers leave "type" out; a function call is all we
	// offer, so that is what it must be.
	if tc.Type != "" && tc.Type != "function" {
		return agent.ToolCall{}, fmt.Errorf("type %q is not a function call", clip(tc.Type))
	}
	if tc.ID == "" {
		return agent.ToolCall{}, errors.New("no id")
	}
	action, ok := offered[tc.Function.Name]
	if !ok {
		return agent.ToolCall{}, fmt.Errorf("calls %q, which was not offered", clip(tc.Function.Name))
	}
	args := tc.Function.Arguments
	if raw := tc.Function.JSON.Arguments; invalid(raw) {
		// Arguments sent as a JSON value rather than a string holding one,
		// as a few compatible servers do; an object is still an object.
		args = raw.Raw()
	}
	input, err := arguments(args)
	if err != nil {
		return agent.ToolCall{}, fmt.Errorf("%s: %w", action, err)
	}
	return agent.ToolCall{ID: tc.ID, Action: action, Input: input}, nil
}

// arguments checks that a call's arguments are one JSON object; empty
// arguments are the empty object.
func arguments(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid([]byte(s)) {
		return nil, errors.New("arguments are not valid JSON")
	}
	if s[0] != '{' {
		return nil, errors.New("arguments are not a JSON object")
	}
	return json.RawMessage(s), nil
}

// invalid reports whether a field of the reply was present, not null, and
// of a type the SDK could not decode.
func invalid(f respjson.Field) bool {
	return !f.Valid() && f.Raw() != respjson.Omitted && f.Raw() != respjson.Null
}

// maxQuoted bounds the text quoted from a reply into an error.
const maxQuoted = 200

// clip cuts text taken from the provider to maxQuoted bytes, on a rune
// boundary, so an error stays one readable line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
