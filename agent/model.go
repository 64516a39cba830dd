package agent

import (
	"context"
	"encoding/json"
)

// Role is who wrote a message of the conversation.
type Role string

// The roles of a conversation (docs/api.md, Messages and runs).
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of the conversation a model is given.
type Message struct {
	Role Role
	// Text is the message's text: a user's words, the assistant's reply
	// (possibly empty when it only calls tools).
	Text string
	// ToolCalls are the tools an assistant message called, in order.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	// Result is a tool message's result object, JSON.
	Result json.RawMessage
	// Summary is a tool message's result in one line, for a human (and for
	// the scripted model's after_tool).
	Summary string
}

// ToolCall is one tool the model asked to call.
type ToolCall struct {
	// ID is the model's id for the call; the engine's tool-call id, which
	// makes the call idempotent, is derived from it.
	ID string
	// Action is the engine's action name (not the wire name).
	Action string
	// Input is the call's input, a JSON object.
	Input json.RawMessage
}

// Tool is an action offered to the model.
type Tool struct {
	// Name is the action's name.
	Name string
	// Description says what the action does.
	Description string
	// InputSchema is the JSON Schema of the action's input (an object).
	InputSchema json.RawMessage
}

// Request is what a model is asked: the agent's instructions, the
// conversation so far (oldest first) and the tools it may call.
type Request struct {
	Instructions string
	Messages     []Message
	Tools        []Tool
}

// Reply is the model's answer: text, tool calls, or both.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
}

// Model is a language model, or anything that answers like one.
//
// Generate returns the assistant's next message. It honours ctx's deadline
// and cancellation. An error fails the run with that error's text, so it
// must say what went wrong without secrets (never an API key); a reply the
// provider could not make sense of is an error, never a panic. A tool call
// may name only a tool of req.Tools.
type Model interface {
	Generate(ctx context.Context, req *Request) (*Reply, error)
}
