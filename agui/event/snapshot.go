package event

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// StateSnapshot replaces the agent's state wholesale.
type StateSnapshot struct {
	// Snapshot is the complete new state, any JSON value (nil is null,
	// which is a state like any other).
	Snapshot  any   `json:"snapshot"`
	Timestamp int64 `json:"timestamp,omitempty"`
}

// MessagesSnapshot restates the conversation's messages, in order; a
// consumer reconciles them with what it holds by id.
type MessagesSnapshot struct {
	Messages  []Message `json:"messages"`
	Timestamp int64     `json:"timestamp,omitempty"`
}

// The roles of a message. A streamed text message (TEXT_MESSAGE_START)
// takes any but RoleTool, whose messages are TOOL_CALL_RESULTs.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleSystem    = "system"
	RoleDeveloper = "developer"
)

// Message is one message of a MESSAGES_SNAPSHOT: Countersign's thread
// messages (user, assistant, tool) as AG-UI writes them. Content is always
// sent, the empty string included: user, system, developer and tool
// messages require it and an assistant message may carry it.
type Message struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are, on an assistant message, the tools it called.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID is, on a tool message (required there), the call it
	// answers.
	ToolCallID string `json:"toolCallId,omitempty"`
	// Error is, on a tool message, why the tool failed.
	Error string `json:"error,omitempty"`
}

// ToolCall is one call an assistant message made. Its JSON carries
// "type": "function", the only kind AG-UI has.
type ToolCall struct {
	ID       string
	Function FunctionCall
}

// FunctionCall is the tool a ToolCall called and its argument text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolCallJSON is ToolCall's wire form.
type toolCallJSON struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// MarshalJSON writes the call with "type": "function".
func (c ToolCall) MarshalJSON() ([]byte, error) {
	return json.Marshal(toolCallJSON{ID: c.ID, Type: "function", Function: c.Function})
}

// UnmarshalJSON reads a call strictly: no field AG-UI does not define, and
// "type" must be "function".
func (c *ToolCall) UnmarshalJSON(b []byte) error {
	var v toolCallJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("tool call: %w", err)
	}
	if v.Type != "function" {
		return fmt.Errorf("tool call %q: type %q, want \"function\"", v.ID, v.Type)
	}
	*c = ToolCall{ID: v.ID, Function: v.Function}
	return nil
}

// Type returns "STATE_SNAPSHOT".
func (*StateSnapshot) Type() string { return TypeStateSnapshot }

// Type returns "MESSAGES_SNAPSHOT".
func (*MessagesSnapshot) Type() string { return TypeMessagesSnapshot }

func (*StateSnapshot) event()    {}
func (*MessagesSnapshot) event() {}

// MarshalJSON writes the event with its "type".
func (e StateSnapshot) MarshalJSON() ([]byte, error) {
	type fields StateSnapshot
	b, err := json.Marshal(fields(e))
	return withType(TypeStateSnapshot, b, err)
}

// MarshalJSON writes the event with its "type"; no messages is [], never
// null.
func (e MessagesSnapshot) MarshalJSON() ([]byte, error) {
	type fields MessagesSnapshot
	if e.Messages == nil {
		e.Messages = []Message{}
	}
	b, err := json.Marshal(fields(e))
	return withType(TypeMessagesSnapshot, b, err)
}
