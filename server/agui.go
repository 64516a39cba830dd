package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/cstype"
)

// The AG-UI endpoint (docs/api.md, AG-UI): POST /v1/agui and /v1/agui/{agent}
// take an AG-UI 1.0 RunAgentInput and answer with the run as AG-UI events,
// on the engine's conversations: the input's newest user message is a
// message to the thread (a text decision, or a run of the agent), and a
// resume is a decision, via "agui", by the caller.

// aguiInput is RunAgentInput as @ag-ui/core 1.0 defines it: every field it
// names, no other.
type aguiInput struct {
	ThreadID        string            `json:"threadId"`
	RunID           string            `json:"runId"`
	ProtocolVersion string            `json:"protocolVersion"`
	ParentRunID     string            `json:"parentRunId"`
	State           json.RawMessage   `json:"state"`
	Messages        []json.RawMessage `json:"messages"`
	Tools           []json.RawMessage `json:"tools"`
	Context         []json.RawMessage `json:"context"`
	ForwardedProps  json.RawMessage   `json:"forwardedProps"`
	Resume          []aguiResume      `json:"resume"`
}

type aguiResume struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
	Metadata    json.RawMessage `json:"metadata"`
}

// aguiMessage is what the endpoint reads of an input message: its id, its
// role, for a user message its text (a string, or text parts), and for a
// tool message the call it answers and its result or error.
type aguiMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"toolCallId"`
	Error      string          `json:"error"`
}

// aguiTool is a tool of the input: one the front end executes (AG-UI's
// Tool: name, description, parameters).
type aguiTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// text is a user message's content as text: the string, or its text parts
// joined.
func (m *aguiMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// resumePayload is what a front end sends back to decide (the interrupt's
// responseSchema).
type resumePayload struct {
	Approved *bool  `json:"approved"`
	Reason   string `json:"reason"`
	Remember string `json:"remember"`
}

func (s *Server) handleAGUI(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var in aguiInput
	if err := readBody(w, r, &in, false); err != nil {
		return err
	}
	switch {
	case in.ThreadID == "":
		return errBadBody("threadId", "required")
	case in.RunID == "":
		return errBadBody("runId", "required")
	}
	// A thread id reserved for the MCP gateway is refused with a 403
	// before the run's stream starts, as on every other route.
	if s.engine.MayNameThread(id, in.ThreadID, countersign.ThreadNamed) != nil {
		return errForbidden("thread ids beginning mcp: or mcp_ are reserved for the MCP gateway")
	}
	agentName := r.PathValue("agent")
	if agentName == "" {
		agentName = s.defaultAgent
	}
	if agentName == "" || s.agents == nil || !s.agents.HasAgent(agentName) {
		return errNotFound("no agent named %q", agentName)
	}
	ew := event.NewWriter(w, nil)
	started := &event.RunStarted{ThreadID: in.ThreadID, RunID: in.RunID, ProtocolVersion: event.ProtocolVersion, Timestamp: now()}
	fail := func(code, message string) error {
		_ = ew.Write(started)
		_ = ew.Write(&event.RunError{Message: message, Code: code, Timestamp: now()})
		return nil
	}
	// failWith ends the run with an engine error, in words fit for the
	// caller (aguiError).
	failWith := func(err error) error {
		return fail(s.aguiError(r, err))
	}
	// Everything from here is the caller's and is not abandoned with its
	// client.
	ctx := context.WithoutCancel(r.Context())
	if len(in.Resume) > 0 {
		return s.aguiResume(ctx, w, r, ew, started, id, &in, fail, failWith)
	}
	m, err := s.newInput(ctx, id, &in)
	if err != nil {
		return failWith(err)
	}
	m.Identity, m.ThreadID, m.Agent = id, in.ThreadID, agentName
	ans, err := s.engine.PostMessage(ctx, m)
	if err != nil {
		return failWith(err)
	}
	if ans.IsDecision() {
		return s.aguiDecisionRun(ew, started, &in, ans)
	}
	if ans.Run == nil {
		return fail(CodeInvalidInput, "no run was started")
	}
	return s.streamRunAs(w, r, id, ans.Run, in.ThreadID, in.RunID, nil)
}

// aguiInputError is a RunAgentInput the endpoint refuses as it reads it
// (RUN_ERROR INVALID_INPUT); its words are the endpoint's own.
type aguiInputError struct{ msg string }

func (e *aguiInputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &aguiInputError{msg: fmt.Sprintf(format, args...)}
}

// resent reports whether an input message whose id the thread holds is the
// stored message held, sent again: a front end resends its history with
// every input. Its role and content must be the stored message's: a user's
// text, an assistant's text (its tool calls are the stored ones, whatever
// the front end says), a tool's result. Any other role is never stored.
func resent(m *aguiMessage, held *cstype.Message) bool {
	switch m.Role {
	case cstype.RoleUser, cstype.RoleAssistant:
		return held.Role == m.Role && held.Text == m.text()
	case cstype.RoleTool:
		var content string
		if json.Unmarshal(m.Content, &content) != nil {
			return false
		}
		return countersign.ToolResult{ToolCallID: m.ToolCallID, Content: content, Error: m.Error}.Resent(held)
	}
	return false
}

// newInput is what the input brings the thread: the tool messages whose
// ids the thread does not hold yet (the results of the client tools the
// last run called, in order) and the last user message it does not hold,
// with the input's tools as the run's client tools. A message whose id the
// thread holds is the history sent again and is passed over when it is the
// stored message (resent); with other content it is refused, as a
// *countersign.MessageIDTakenError, before anything is stored. Nothing else
// of the input reaches the thread, nor the model, which reads only what the
// thread holds. The engine checks that the results answer the calls the
// last run left to the caller (pendingToolCallIds).
func (s *Server) newInput(ctx context.Context, id countersign.Identity, in *aguiInput) (*countersign.Message, error) {
	held := map[string]*cstype.Message{}
	if v, err := s.engine.Thread(ctx, id, in.ThreadID); err == nil {
		for _, m := range v.Messages {
			held[m.ID] = m
		}
	} else if !errors.Is(err, countersign.ErrNotFound) {
		return nil, err
	}
	out := &countersign.Message{}
	var user *aguiMessage
	for i, raw := range in.Messages {
		var m aguiMessage
		if err := json.Unmarshal(raw, &m); err != nil || m.ID == "" || m.Role == "" {
			return nil, badInput("messages[%d]: each message is an object with an id and a role", i)
		}
		if h := held[m.ID]; h != nil {
			if !resent(&m, h) {
				return nil, &countersign.MessageIDTakenError{ThreadID: in.ThreadID, MessageID: m.ID}
			}
			continue
		}
		switch m.Role {
		case "user":
			user = &m
		case "tool":
			var content string
			if err := json.Unmarshal(m.Content, &content); err != nil || m.ToolCallID == "" {
				return nil, badInput("messages[%d]: a tool message has a toolCallId and a string content", i)
			}
			out.ToolResults = append(out.ToolResults, countersign.ToolResult{ID: m.ID, ToolCallID: m.ToolCallID, Content: content, Error: m.Error})
		}
	}
	if user != nil {
		if out.Text = user.text(); out.Text == "" {
			return nil, badInput("the newest user message has no text")
		}
		out.ID = user.ID
	}
	if user == nil && len(out.ToolResults) == 0 {
		return nil, badInput("the input holds no user message, nor tool result, the thread does not have yet")
	}
	for i, raw := range in.Tools {
		var t aguiTool
		if err := json.Unmarshal(raw, &t); err != nil || t.Name == "" {
			return nil, badInput("tools[%d]: a tool is an object with a name, a description and parameters", i)
		}
		params := t.Parameters
		if string(params) == "null" {
			params = nil
		}
		out.ClientTools = append(out.ClientTools, cstype.ClientTool{Name: t.Name, Description: t.Description, Parameters: params})
	}
	return out, nil
}

// aguiDecisionRun answers a text decision as a short run: RUN_STARTED, the
// decision as a CUSTOM event, the reply as one assistant message,
// RUN_FINISHED.
func (s *Server) aguiDecisionRun(ew *event.Writer, started *event.RunStarted, in *aguiInput, ans *countersign.MessageAnswer) error {
	value := map[string]any{"threadId": in.ThreadID, "proposalDecision": nil}
	if ans.Decision != nil {
		value["proposalDecision"] = map[string]any{"status": string(ans.Decision.Status), "proposal": wireProposal(ans.Decision.Proposal)}
	} else {
		value["pending"] = ans.Pending
	}
	replyID := "msg_reply_" + in.RunID
	for _, e := range []event.Event{
		started,
		&event.Custom{Name: event.CustomActionProposalDecision, Value: value, Timestamp: now()},
		&event.TextMessageStart{MessageID: replyID, Role: event.RoleAssistant, Timestamp: now()},
		&event.TextMessageContent{MessageID: replyID, Delta: ans.Reply, Timestamp: now()},
		&event.TextMessageEnd{MessageID: replyID, Timestamp: now()},
		&event.RunFinished{ThreadID: in.ThreadID, RunID: in.RunID, Outcome: &event.Outcome{Type: event.OutcomeSuccess}, Timestamp: now()},
	} {
		if err := ew.Write(e); err != nil {
			return nil
		}
	}
	return nil
}

// aguiResume takes the input's resumes as decisions by the caller (via
// "agui"), then streams the parked run's continuation from its interrupt
// on, whoever drives it. Every entry is checked before any is decided, so
// a malformed resume decides nothing. Whether a resume decides, is refused,
// or takes a decision made elsewhere meanwhile is the engine's answer
// (Engine.Resume).
func (s *Server) aguiResume(ctx context.Context, w http.ResponseWriter, r *http.Request, ew *event.Writer, started *event.RunStarted,
	id countersign.Identity, in *aguiInput, fail func(code, message string) error, failWith func(error) error) error {
	// A resume is a decision: an agent credential is refused before any
	// interrupt is looked up.
	if err := s.engine.MayAct(id, countersign.ActResume); err != nil {
		return failWith(err)
	}
	if _, err := s.engine.Thread(ctx, id, in.ThreadID); err != nil {
		return failWith(err)
	}
	type entry struct {
		p        *cstype.Proposal
		d        *countersign.Decision
		resolved bool
	}
	entries := make([]entry, 0, len(in.Resume))
	runID := ""
	for _, res := range in.Resume {
		p, err := s.engine.Proposal(ctx, id, res.InterruptID)
		if err != nil || p.ThreadID != in.ThreadID || p.RunID == "" {
			return fail("INVALID_RESUME", "interrupt "+res.InterruptID+" is not one of this thread's")
		}
		if runID != "" && p.RunID != runID {
			return fail("INVALID_RESUME", "the interrupts of one resume are one run's")
		}
		runID = p.RunID
		d := &countersign.Decision{Identity: id, ProposalID: p.ID, Via: countersign.ViaAGUI}
		switch res.Status {
		case "cancelled":
			d.Verdict, d.Reason = countersign.Reject, "the interrupt was cancelled"
		case "resolved":
			var pl resumePayload
			dec := json.NewDecoder(strings.NewReader(string(res.Payload)))
			dec.DisallowUnknownFields()
			if len(res.Payload) == 0 || dec.Decode(&pl) != nil || pl.Approved == nil ||
				(pl.Remember != "" && pl.Remember != "run" && pl.Remember != "thread") {
				return fail("INVALID_RESUME", "payload: want {approved: boolean, reason?: string, remember?: run|thread}")
			}
			d.Verdict, d.Reason = countersign.Reject, pl.Reason
			if *pl.Approved {
				d.Verdict, d.Remember = countersign.Approve, countersign.Scope(pl.Remember)
			}
		default:
			return fail("INVALID_RESUME", "status: want resolved or cancelled")
		}
		entries = append(entries, entry{p: p, d: d, resolved: res.Status == "resolved"})
	}
	// The run the interrupts are of, however many runs the thread has had
	// since.
	run, err := s.engine.Run(ctx, id, in.ThreadID, runID)
	if err != nil {
		return fail("INVALID_RESUME", "no run of this thread waits on these interrupts")
	}
	for _, e := range entries {
		// The engine answers whether the resume decides, or takes the
		// decision that stands (someone who may decided meanwhile) and
		// lets the caller follow the run.
		res, err := s.engine.Resume(ctx, e.d)
		switch {
		case err != nil:
			return failWith(err)
		case res.Stands:
			continue
		case res.Decided.Status == countersign.DecideExpired && e.resolved:
			// The engine judges the deadline by its clock; a cancelled
			// resume of an expired interrupt is taken (the run goes on with
			// the expiry).
			return fail("INTERRUPT_EXPIRED", "interrupt "+e.p.ID+" expired at "+e.p.ExpiresAt.UTC().Format(time.RFC3339))
		}
		// Unchanged or conflict: the decision that stands is the one the
		// run goes on with.
	}
	// Followed from the last interrupt the input resumes.
	follow := run.Clone()
	follow.Awaiting = in.Resume[len(in.Resume)-1].InterruptID
	return s.streamRunAs(w, r, id, nil, in.ThreadID, in.RunID, follow)
}

// aguiError is the RUN_ERROR code and message of an error that ends an
// AG-UI run: the same refusals as the HTTP routes', in words fit for the
// caller. The engine's refusals say what the caller sent and may not do;
// whatever comes from below (a store's or driver's words, an unexpected
// failure) is a fixed text, and its cause is logged here.
func (s *Server) aguiError(r *http.Request, err error) (code, message string) {
	var (
		input  *aguiInputError
		busy   *countersign.ThreadBusyError
		taken  *countersign.MessageIDTakenError
		denied *countersign.ForbiddenError
	)
	logged := func(level slog.Level, code, message string) (string, string) {
		s.log.LogAttrs(r.Context(), level, "AG-UI run refused; the answer says less than the cause",
			slog.String("path", r.URL.Path), slog.String("code", code), slog.Any("err", err))
		return code, message
	}
	switch {
	case errors.As(err, &input):
		return CodeInvalidInput, input.msg
	case agentRefused(err) != nil:
		return CodeAgentCannotDecide, agentRefused(err).message
	case invalidRemember(err) != nil:
		return CodeInvalidRemember, invalidRemember(err).message
	case stepUpRefused(err) != nil:
		// An interrupt's resume cannot carry a passkey: its page can.
		return CodeStepUpRequired, stepUpRefused(err).message
	case errors.As(err, &busy):
		return CodeThreadBusy, fmt.Sprintf("run %s holds thread %s; wait for it to end or cancel it", busy.RunID, busy.ThreadID)
	case errors.As(err, &taken):
		return CodeMessageIDTaken, fmt.Sprintf("this thread already holds a message with id %q, with other content; choose another id", taken.MessageID)
	case errors.As(err, &denied):
		return CodeForbidden, denied.Reason
	case errors.Is(err, countersign.ErrForbidden):
		return CodeForbidden, "forbidden"
	case errors.Is(err, countersign.ErrNotFound):
		return CodeNotFound, "not found"
	case errors.Is(err, cstype.ErrInvalidParams):
		// Before ErrInvalidCall, which the engine wraps it in.
		return logged(slog.LevelWarn, CodeInvalidInput, storeRefusedText)
	case errors.Is(err, countersign.ErrInvalidCall):
		return CodeInvalidInput, err.Error()
	case errors.Is(err, cstype.ErrUnavailable):
		return logged(slog.LevelWarn, CodeUnavailable, unavailableMessage)
	}
	return logged(slog.LevelError, CodeInternal, internalMessage)
}
