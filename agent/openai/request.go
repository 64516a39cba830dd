package openai

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/agent"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// newParams translates req to a chat-completion request. It also returns
// the table from the wire names of req.Tools back to their action names:
// the only functions the reply may call.
func (m *Model) newParams(req *agent.Request) (sdk.ChatCompletionNewParams, map[string]string, error) {
	wire, offered := wireNames(req)
	params := sdk.ChatCompletionNewParams{Model: m.model}
	if req.Instructions != "" {
		// "system" rather than "developer": every OpenAI-compatible server
		// knows it, and OpenAI treats it as developer for the newer models.
		params.Messages = append(params.Messages, sdk.SystemMessage(req.Instructions))
	}
	for i, msg := range req.Messages {
		p, err := messageParam(msg, wire)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, nil, fmt.Errorf("openai: message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, p)
	}
	for i, t := range req.Tools {
		schema, err := parameters(t.InputSchema)
		if err != nil {
			return sdk.ChatCompletionNewParams{}, nil, fmt.Errorf("openai: tool %q: %w", t.Name, err)
		}
		fn := shared.FunctionDefinitionParam{Name: wire[i].name, Parameters: schema}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	return params, offered, nil
}

// wireName is the function name an action goes by in one request.
type wireName struct {
	action string
	name   string
}

// wireNames names the offered tools with agent.WireNames, and after them
// the actions that earlier assistant messages called but that are no
// longer offered (the conversation still has to name them). Because
// WireNames names tools in order, the offered tools get the same names as
// they would alone. It returns one wireName per offered tool, then the
// extra ones, and the table of the offered tools alone.
func wireNames(req *agent.Request) ([]wireName, map[string]string) {
	tools := append([]agent.Tool(nil), req.Tools...)
	known := make(map[string]bool, len(tools))
	for _, t := range tools {
		known[t.Name] = true
	}
	for _, msg := range req.Messages {
		for _, c := range msg.ToolCalls {
			if !known[c.Action] {
				known[c.Action] = true
				tools = append(tools, agent.Tool{Name: c.Action})
			}
		}
	}
	names, _ := agent.WireNames(tools)
	wire := make([]wireName, len(tools))
	offered := make(map[string]string, len(req.Tools))
	for i, t := range tools {
		wire[i] = wireName{action: t.Name, name: names[i]}
		if i < len(req.Tools) {
			offered[names[i]] = t.Name
		}
	}
	return wire, offered
}

// nameOf is the wire name of action: the first tool of that name.
func nameOf(wire []wireName, action string) string {
	for _, w := range wire {
		if w.action == action {
			return w.name
		}
	}
	return "" // unreachable: wireNames names every action the messages call
}

func messageParam(msg agent.Message, wire []wireName) (sdk.ChatCompletionMessageParamUnion, error) {
	switch msg.Role {
	case agent.RoleUser:
		return sdk.UserMessage(msg.Text), nil
	case agent.RoleAssistant:
		var a sdk.ChatCompletionAssistantMessageParam
		// Content may be left out only when the message calls tools.
		if msg.Text != "" || len(msg.ToolCalls) == 0 {
			a.Content.OfString = sdk.String(msg.Text)
		}
		for j, c := range msg.ToolCalls {
			if c.ID == "" {
				return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool call %d has no id", j)
			}
			args := string(bytes.TrimSpace(c.Input))
			if args == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      nameOf(wire, c.Action),
						Arguments: args,
					},
				},
			})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	case agent.RoleTool:
		if msg.ToolCallID == "" {
			return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool message has no tool call id")
		}
		content := string(bytes.TrimSpace(msg.Result))
		if content == "" {
			content = msg.Summary
		}
		return sdk.ToolMessage(content, msg.ToolCallID), nil
	default:
		return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", msg.Role)
	}
}

// parameters hands a tool's input schema to the SDK, which takes it as a
// map. Each top-level value stays the raw JSON it was, so the schema is
// sent as written (the SDK's encoder would turn a json.Number into a
// string). An empty schema is an object with no properties.
func parameters(schema json.RawMessage) (shared.FunctionParameters, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return shared.FunctionParameters{"type": "object", "properties": map[string]any{}}, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(schema, &raw); err != nil || raw == nil {
		return nil, fmt.Errorf("input schema is not a JSON object")
	}
	params := make(shared.FunctionParameters, len(raw))
	for k, v := range raw {
		params[k] = v
	}
	return params, nil
}
