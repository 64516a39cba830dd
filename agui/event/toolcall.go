package event

import "encoding/json"

// ToolCallStart opens a tool call; its arguments follow as TOOL_CALL_ARGS
// deltas and TOOL_CALL_END closes it.
type ToolCallStart struct {
	ToolCallID string `json:"toolCallId"`
	// ToolCallName is the tool called: in Countersign, the action's name.
	ToolCallName string `json:"toolCallName"`
	// ParentMessageID is the assistant message that carries the call, if
	// any.
	ParentMessageID string `json:"parentMessageId,omitempty"`
	Timestamp       int64  `json:"timestamp,omitempty"`
}

// ToolCallArgs appends Delta to the open call's argument text, which the
// deltas form together (conventionally a JSON document). A consumer acts on
// the arguments only after TOOL_CALL_END.
type ToolCallArgs struct {
	ToolCallID string `json:"toolCallId"`
	Delta      string `json:"delta"`
	Timestamp  int64  `json:"timestamp,omitempty"`
}

// ToolCallEnd closes the call ToolCallID: its argument text is complete.
type ToolCallEnd struct {
	ToolCallID string `json:"toolCallId"`
	Timestamp  int64  `json:"timestamp,omitempty"`
}

// ToolCallResult carries what a tool returned. It is a tool message of its
// own (MessageID) and may answer a call of an earlier run: a resumed run
// answers the call its interrupt stopped on.
type ToolCallResult struct {
	// MessageID is the tool message this result becomes.
	MessageID string `json:"messageId"`
	// ToolCallID is the call it answers.
	ToolCallID string `json:"toolCallId"`
	// Content is the result as text; structured results (Countersign's
	// result objects) are sent as their JSON text.
	Content   string `json:"content"`
	Timestamp int64  `json:"timestamp,omitempty"`
}

// Type returns "TOOL_CALL_START".
func (*ToolCallStart) Type() string { return TypeToolCallStart }

// Type returns "TOOL_CALL_ARGS".
func (*ToolCallArgs) Type() string { return TypeToolCallArgs }

// Type returns "TOOL_CALL_END".
func (*ToolCallEnd) Type() string { return TypeToolCallEnd }

// Type returns "TOOL_CALL_RESULT".
func (*ToolCallResult) Type() string { return TypeToolCallResult }

func (*ToolCallStart) event()  {}
func (*ToolCallArgs) event()   {}
func (*ToolCallEnd) event()    {}
func (*ToolCallResult) event() {}

// MarshalJSON writes the event with its "type".
func (e ToolCallStart) MarshalJSON() ([]byte, error) {
	type fields ToolCallStart
	b, err := json.Marshal(fields(e))
	return withType(TypeToolCallStart, b, err)
}

// MarshalJSON writes the event with its "type".
func (e ToolCallArgs) MarshalJSON() ([]byte, error) {
	type fields ToolCallArgs
	b, err := json.Marshal(fields(e))
	return withType(TypeToolCallArgs, b, err)
}

// MarshalJSON writes the event with its "type".
func (e ToolCallEnd) MarshalJSON() ([]byte, error) {
	type fields ToolCallEnd
	b, err := json.Marshal(fields(e))
	return withType(TypeToolCallEnd, b, err)
}

// MarshalJSON writes the event with its "type".
func (e ToolCallResult) MarshalJSON() ([]byte, error) {
	type fields ToolCallResult
	b, err := json.Marshal(fields(e))
	return withType(TypeToolCallResult, b, err)
}
