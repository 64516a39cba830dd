package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/countersign/countersign/agent"
)

// newParams translates req into a Messages request. It also returns the
// table from the offered tools' wire names back to their action names,
// the only names a reply may call.
func (m *Model) newParams(req *agent.Request) (sdk.MessageNewParams, map[string]string, error) {
	names, offered := agent.WireNames(req.Tools)
	var tools []sdk.ToolUnionParam // nil, not empty, leaves "tools" out
	for i, t := range req.Tools {
		tool, err := toolParam(names[i], t)
		if err != nil {
			return sdk.MessageNewParams{}, nil, err
		}
		tools = append(tools, tool)
	}

	history := historyNames(req)
	var turns []turn
	for i, msg := range req.Messages {
		t, err := newTurn(msg, history)
		if err != nil {
			return sdk.MessageNewParams{}, nil, fmt.Errorf("anthropic: message %d (%s): %w", i, msg.Role, err)
		}
		if len(t.blocks) == 0 {
			continue // an empty text says nothing, and the API refuses empty messages
		}
		// Messages that land on one wire role in a row become one wire
		// message: the API wants every tool_result answering an assistant
		// turn in the one user message after it, and strict alternation
		// costs nothing.
		if n := len(turns); n > 0 && turns[n-1].assistant == t.assistant {
			turns[n-1].blocks = append(turns[n-1].blocks, t.blocks...)
			continue
		}
		turns = append(turns, t)
	}
	if len(turns) == 0 {
		return sdk.MessageNewParams{}, nil, errors.New("anthropic: the conversation has no message to answer")
	}
	msgs := make([]sdk.MessageParam, len(turns))
	for i, t := range turns {
		if t.assistant {
			msgs[i] = sdk.NewAssistantMessage(t.blocks...)
		} else {
			msgs[i] = sdk.NewUserMessage(t.blocks...)
		}
	}

	params := sdk.MessageNewParams{
		Model:     sdk.Model(m.model),
		MaxTokens: m.maxTokens,
		Messages:  msgs,
		Tools:     tools,
	}
	if req.Instructions != "" {
		params.System = []sdk.TextBlockParam{{Text: req.Instructions}}
	}
	return params, offered, nil
}

// historyNames gives a wire name to every action the conversation's
// assistant messages called. The offered tools come first, so they keep
// the names [agent.WireNames] gives them in the tools list; an action no
// longer offered gets a name of its own that no offered tool has.
func historyNames(req *agent.Request) map[string]string {
	tools := append([]agent.Tool(nil), req.Tools...)
	seen := make(map[string]bool, len(req.Tools))
	for _, t := range req.Tools {
		seen[t.Name] = true
	}
	for _, msg := range req.Messages {
		for _, c := range msg.ToolCalls {
			if !seen[c.Action] {
				seen[c.Action] = true
				tools = append(tools, agent.Tool{Name: c.Action})
			}
		}
	}
	names, _ := agent.WireNames(tools)
	byAction := make(map[string]string, len(tools))
	for i, t := range tools {
		if _, dup := byAction[t.Name]; !dup { // a duplicate action keeps its first name
			byAction[t.Name] = names[i]
		}
	}
	return byAction
}

// turn is one wire message on its way: its role and content blocks.
type turn struct {
	assistant bool // else user
	blocks    []sdk.ContentBlockParamUnion
}

// newTurn translates one message into the wire message it becomes.
func newTurn(msg agent.Message, wireName map[string]string) (turn, error) {
	switch msg.Role {
	case agent.RoleUser:
		if msg.Text == "" {
			return turn{}, nil
		}
		return turn{blocks: []sdk.ContentBlockParamUnion{sdk.NewTextBlock(msg.Text)}}, nil

	case agent.RoleAssistant:
		t := turn{assistant: true}
		if msg.Text != "" {
			t.blocks = append(t.blocks, sdk.NewTextBlock(msg.Text))
		}
		for _, c := range msg.ToolCalls {
			if c.ID == "" {
				return turn{}, fmt.Errorf("the call of %q has no id", c.Action)
			}
			input, err := objectOrEmpty(c.Input)
			if err != nil {
				return turn{}, fmt.Errorf("the input of call %q (%q): %w", c.ID, c.Action, err)
			}
			t.blocks = append(t.blocks, sdk.NewToolUseBlock(c.ID, input, wireName[c.Action]))
		}
		return t, nil

	case agent.RoleTool:
		if msg.ToolCallID == "" {
			return turn{}, errors.New("a tool result names no call")
		}
		result := sdk.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
		// The model reads the result object itself; the one-line summary
		// stands in only when there is none.
		text := string(bytes.TrimSpace(msg.Result))
		if text == "" {
			text = msg.Summary
		}
		if text != "" {
			result.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: text}}}
		}
		return turn{blocks: []sdk.ContentBlockParamUnion{{OfToolResult: &result}}}, nil

	default:
		return turn{}, fmt.Errorf("unknown role %q", msg.Role)
	}
}

// toolParam offers one action as a custom tool.
func toolParam(name string, t agent.Tool) (sdk.ToolUnionParam, error) {
	schema, err := inputSchema(t.InputSchema)
	if err != nil {
		return sdk.ToolUnionParam{}, fmt.Errorf("anthropic: the input schema of tool %q: %w", t.Name, err)
	}
	tool := sdk.ToolParam{Name: name, InputSchema: schema}
	if t.Description != "" {
		tool.Description = param.NewOpt(t.Description)
	}
	return sdk.ToolUnionParam{OfTool: &tool}, nil
}

// inputSchema carries an action's JSON Schema as it is: every keyword but
// "type" travels verbatim as an extra field (the SDK writes "type":
// "object" itself), so no number or keyword is lost to a Go type. An empty
// schema is an object that takes anything.
func inputSchema(raw json.RawMessage) (sdk.ToolInputSchemaParam, error) {
	// A schema with no keyword but "type" would be a zero value, which
	// the SDK leaves out, and the API requires input_schema.
	empty := sdk.ToolInputSchemaParam{Properties: json.RawMessage(`{}`)}
	if len(bytes.TrimSpace(raw)) == 0 {
		return empty, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return sdk.ToolInputSchemaParam{}, errors.New("not a JSON object")
	}
	if t, ok := fields["type"]; ok {
		var typ string
		if json.Unmarshal(t, &typ) != nil || typ != "object" {
			return sdk.ToolInputSchemaParam{}, fmt.Errorf(`its type is %s; a tool's input must be "object"`, clip(string(t)))
		}
		delete(fields, "type")
	}
	if len(fields) == 0 {
		return empty, nil
	}
	schema := sdk.ToolInputSchemaParam{ExtraFields: make(map[string]any, len(fields))}
	for k, v := range fields {
		schema.ExtraFields[k] = v
	}
	return schema, nil
}

// objectOrEmpty checks that a call's input is a JSON object; a call
// recorded with no input sends {} (the API requires an object).
func objectOrEmpty(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}"), nil
	}
	if !isObject(raw) {
		return nil, errors.New("not a JSON object")
	}
	return raw, nil
}

// isObject reports whether raw is one valid JSON object.
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}
