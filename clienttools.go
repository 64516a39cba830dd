package countersign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Client tools are tools the caller executes, not the engine (docs/api.md,
// AG-UI: the input's tools). A run offers them to its model besides the
// agent's actions; a model's call of one is recorded, not made, and ends the
// run with the call pending; the caller runs it and posts its result with
// the thread's next message. Nothing of a client tool passes the policy: it
// acts in the caller's own process, with what the caller already has.

// The bounds on what a message carries for client tools.
const (
	maxClientTools      = 64
	maxClientToolName   = 64
	maxClientToolDesc   = 4 << 10
	maxClientToolSchema = 16 << 10
	maxToolResults      = 64
)

// ToolResult is a client tool's result: the answer to a call the thread's
// latest run left pending (RunState.PendingClientCalls).
type ToolResult struct {
	// ID, when set, is the tool message's id (a front end's own); by
	// default the engine makes one.
	ID string
	// ToolCallID is the call it answers.
	ToolCallID string
	// Content is the result as the caller gives it: a JSON document is
	// kept as it is, other text becomes a JSON string.
	Content string
	// Error, when set, says the tool failed, and why.
	Error string
}

// validClientToolName is the names the model providers accept for a
// function: [a-zA-Z0-9_-], 1 to 64 bytes.
func validClientToolName(s string) bool {
	if s == "" || len(s) > maxClientToolName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkClientTools validates the client tools a message offers its run.
func (e *Engine) checkClientTools(tools []cstype.ClientTool) error {
	if len(tools) > maxClientTools {
		return fmt.Errorf("%w: tools: at most %d", ErrInvalidCall, maxClientTools)
	}
	seen := map[string]bool{}
	for i, t := range tools {
		switch {
		case !validClientToolName(t.Name):
			return fmt.Errorf("%w: tools[%d]: name %q: want 1 to %d of [a-zA-Z0-9_-]", ErrInvalidCall, i, t.Name, maxClientToolName)
		case seen[t.Name]:
			return fmt.Errorf("%w: tools[%d]: %q twice", ErrInvalidCall, i, t.Name)
		case e.hasAction(t.Name):
			return fmt.Errorf("%w: tools[%d]: %q is the name of an action", ErrInvalidCall, i, t.Name)
		case len(t.Description) > maxClientToolDesc || !utf8.ValidString(t.Description):
			return fmt.Errorf("%w: tools[%d]: description: at most %d bytes of UTF-8", ErrInvalidCall, i, maxClientToolDesc)
		case len(t.Parameters) > maxClientToolSchema:
			return fmt.Errorf("%w: tools[%d]: parameters: at most %d bytes", ErrInvalidCall, i, maxClientToolSchema)
		}
		if len(t.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.Parameters, &schema); err != nil || schema == nil {
				return fmt.Errorf("%w: tools[%d]: parameters: want a JSON Schema object", ErrInvalidCall, i)
			}
		}
		seen[t.Name] = true
	}
	return nil
}

func (e *Engine) hasAction(name string) bool {
	_, ok := e.Action(name)
	return ok
}

// toolResultMessages checks results against the calls the thread's latest
// run left pending and returns them as the tool messages to store.
func (e *Engine) toolResultMessages(ctx context.Context, m *Message, t *cstype.Thread) ([]*cstype.Message, error) {
	if len(m.ToolResults) == 0 {
		return nil, nil
	}
	if len(m.ToolResults) > maxToolResults {
		return nil, fmt.Errorf("%w: tool results: at most %d", ErrInvalidCall, maxToolResults)
	}
	var pending []cstype.ToolCall
	if t != nil {
		var err error
		if pending, err = e.awaitingCaller(ctx, m.Identity.Tenant, t.ID); err != nil {
			return nil, err
		}
	}
	calls := map[string]cstype.ToolCall{}
	for _, c := range pending {
		calls[c.ID] = c
	}
	answered := map[string]bool{}
	out := make([]*cstype.Message, 0, len(m.ToolResults))
	for i, r := range m.ToolResults {
		c, ok := calls[r.ToolCallID]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: tool results[%d]: %q is not a tool call awaiting the caller's result", ErrInvalidCall, i, r.ToolCallID)
		case answered[r.ToolCallID]:
			return nil, fmt.Errorf("%w: tool results[%d]: %q answered twice", ErrInvalidCall, i, r.ToolCallID)
		case r.ID != "" && !validMessageID(r.ID):
			return nil, fmt.Errorf("%w: tool results[%d]: id: must be 1 to %d characters of UTF-8, no control characters", ErrInvalidCall, i, MaxMessageIDLen)
		case len(r.Content)+len(r.Error) > MaxMessageText || !utf8.ValidString(r.Content) || !utf8.ValidString(r.Error):
			return nil, fmt.Errorf("%w: tool results[%d]: at most %d bytes of UTF-8", ErrInvalidCall, i, MaxMessageText)
		case strings.ContainsRune(r.Content, 0) || strings.ContainsRune(r.Error, 0):
			return nil, fmt.Errorf("%w: tool results[%d]: must not contain NUL", ErrInvalidCall, i)
		}
		answered[r.ToolCallID] = true
		id := r.ID
		if id == "" {
			id = "msg_" + newID()
		}
		result, line := clientResult(c.Action, r)
		out = append(out, &cstype.Message{ID: id, Tenant: m.Identity.Tenant, ThreadID: m.ThreadID, Role: cstype.RoleTool,
			ToolCallID: r.ToolCallID, Result: result, Text: line, Sender: m.Identity.Actor})
	}
	return out, nil
}

// awaitingCaller are the client tool calls a result may answer: those the
// thread's latest run left to its caller when it finished (AG-UI's
// pendingToolCallIds). A run that failed or was cancelled reported none, so
// its calls take no result: the next message starts afresh.
func (e *Engine) awaitingCaller(ctx context.Context, tenant, threadID string) ([]cstype.ToolCall, error) {
	msgs, err := e.store.ListMessages(ctx, &store.ListMessagesParams{Tenant: tenant, ThreadID: threadID})
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	pending := store.PendingClientCalls(msgs)
	if len(pending) == 0 {
		return nil, nil
	}
	// The calls are one run's: the one whose assistant message made them.
	runID := ""
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.ID == pending[0].ID && m.Role == cstype.RoleAssistant {
				runID = m.RunID
			}
		}
	}
	r, err := e.store.GetRun(ctx, &store.GetRunParams{Tenant: tenant, ID: runID})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get run: %w", err)
	case r.Status != cstype.RunFinished:
		return nil, nil
	}
	return pending, nil
}

// Resent reports whether r, a result a front end sends again with its
// history (AG-UI's messages), is the tool message m the thread holds: a
// result the front end posted (as this engine stores it), or one a run
// wrote and streamed to it (its result object, or its text).
func (r ToolResult) Resent(m *cstype.Message) bool {
	if m.Role != cstype.RoleTool || m.ToolCallID != r.ToolCallID {
		return false
	}
	if result, _ := clientResult("", r); bytes.Equal(result, m.Result) {
		return true
	}
	if r.Error != "" {
		return false
	}
	if len(m.Result) > 0 {
		return r.Content == string(m.Result)
	}
	return r.Content == m.Text
}

// clientResult is a client tool's result as a tool message holds it: the
// result object the model reads, and one line for a human.
func clientResult(tool string, r ToolResult) (json.RawMessage, string) {
	if r.Error != "" {
		b, _ := json.Marshal(map[string]string{"status": "failed", "error": r.Error}) // strings only
		return b, fmt.Sprintf("%s failed: %s", tool, firstLine(r.Error))
	}
	content := strings.TrimSpace(r.Content)
	if content != "" && json.Valid([]byte(content)) {
		return json.RawMessage(content), firstLine(r.Content)
	}
	b, _ := json.Marshal(r.Content) // a valid UTF-8 string
	return b, firstLine(r.Content)
}

// firstLine is s's first line, cut to a length a summary line takes.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	const max = 200
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// PendingClientCalls are the calls of the run's client tools that the
// caller has not answered yet (store.PendingClientCalls), once the run has
// finished: what it left to its caller, as AG-UI's pendingToolCallIds.
func (st *RunState) PendingClientCalls() []cstype.ToolCall {
	if st.Run.Status != cstype.RunFinished {
		return nil
	}
	var out []cstype.ToolCall
	calls := store.PendingClientCalls(st.Messages)
	for _, m := range st.Messages {
		if m.RunID != st.Run.ID || m.Role != cstype.RoleAssistant {
			continue
		}
		for _, c := range m.ToolCalls {
			for _, p := range calls {
				if p.ID == c.ID {
					out = append(out, p)
				}
			}
		}
	}
	return out
}
