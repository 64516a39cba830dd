package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/countersign/countersign/agent"
)

// newReply translates a Messages reply into an [agent.Reply]. offered maps
// the wire names of the tools the request offered to their action names;
// a tool_use naming anything else is an error.
func newReply(msg *sdk.Message, offered map[string]string, maxTokens int64) (*agent.Reply, error) {
	if msg == nil {
		return nil, errors.New("anthropic: the reply is empty")
	}
	if err := checkStop(msg, maxTokens); err != nil {
		return nil, err
	}
	if c := msg.JSON.Content; !c.Valid() {
		if raw := c.Raw(); raw != "" && raw != "null" {
			return nil, errors.New("anthropic: the reply's content is not a list of blocks")
		}
		return nil, errors.New("anthropic: the reply has no content")
	}

	var text strings.Builder
	reply := &agent.Reply{}
	ids := map[string]bool{}
	for i, block := range msg.Content {
		switch block.Type {
		case "text":
			text.WriteString(block.Text)
		case "tool_use":
			call, err := toolCall(block, offered)
			if err != nil {
				return nil, fmt.Errorf("anthropic: content block %d: %w", i, err)
			}
			// The engine derives the call's idempotency key from the id:
			// two calls under one id would be taken for one.
			if ids[call.ID] {
				return nil, fmt.Errorf("anthropic: content block %d: tool_use id %q is used twice", i, clip(call.ID))
			}
			ids[call.ID] = true
			reply.ToolCalls = append(reply.ToolCalls, call)
		case "thinking", "redacted_thinking":
			// Reasoning the model shows is not part of its answer; the
			// request never asks for it.
		default:
			return nil, fmt.Errorf("anthropic: content block %d has type %q, which this provider does not handle", i, clip(block.Type))
		}
	}
	reply.Text = text.String()
	if reply.Text == "" && len(reply.ToolCalls) == 0 {
		return nil, errors.New("anthropic: the reply has neither text nor a tool call")
	}
	return reply, nil
}

// checkStop accepts the reasons a reply ends normally: the turn's end, a
// tool call, a stop sequence, or none given (some compatible endpoints
// leave it out).
func checkStop(msg *sdk.Message, maxTokens int64) error {
	switch msg.StopReason {
	case "", sdk.StopReasonEndTurn, sdk.StopReasonToolUse, sdk.StopReasonStopSequence:
		return nil
	case sdk.StopReasonRefusal:
		var details []string
		if c := msg.StopDetails.Category; c != "" {
			details = append(details, "category "+clip(string(c)))
		}
		if e := msg.StopDetails.Explanation; e != "" {
			details = append(details, clip(e))
		}
		if len(details) == 0 {
			return errors.New("anthropic: the model refused to answer")
		}
		return fmt.Errorf("anthropic: the model refused to answer: %s", strings.Join(details, ": "))
	case sdk.StopReasonMaxTokens:
		// A cut-off reply may hold half a tool call's input.
		return fmt.Errorf("anthropic: the reply was cut off at max_tokens (%d)", maxTokens)
	case sdk.StopReasonModelContextWindowExceeded:
		return errors.New("anthropic: the conversation exceeds the model's context window")
	default:
		return fmt.Errorf("anthropic: the reply stopped for an unexpected reason %q", clip(string(msg.StopReason)))
	}
}

// toolCall maps a tool_use block back to the action it names.
func toolCall(block sdk.ContentBlockUnion, offered map[string]string) (agent.ToolCall, error) {
	action, ok := offered[block.Name]
	if !ok {
		return agent.ToolCall{}, fmt.Errorf("tool_use names %q, a tool that was not offered", clip(block.Name))
	}
	if block.ID == "" {
		return agent.ToolCall{}, fmt.Errorf("tool_use of %q has no id", block.Name)
	}
	if !isObject(block.Input) {
		return agent.ToolCall{}, fmt.Errorf("the input of tool_use %q (%q) is not a JSON object", clip(block.ID), block.Name)
	}
	// The block's bytes belong to the decoded reply; the call keeps its own.
	return agent.ToolCall{ID: block.ID, Action: action, Input: append(json.RawMessage(nil), block.Input...)}, nil
}

// maxQuoted is the most of a provider's string an error text quotes.
const maxQuoted = 200

// clip cuts s to at most maxQuoted bytes, at a rune boundary, so that an
// error never carries a reply's whole body.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
