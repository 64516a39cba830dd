package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// ToolOutput is the result object a tool message carries, and the model
// reads, for one call: what Engine.Call answered. The shapes follow docs/api.md:
// an independent call answers {proposal_id, status: "pending", executed:
// false}; a two-phase one {status: "confirmation_required",
// confirmation_id, …}; a refusal {status: "denied", error}.
type ToolOutput struct {
	ProposalID string `json:"proposal_id,omitempty"`
	Status     string `json:"status"`
	// Code names a refusal the model can act on: TOOL_CALL_ID_REUSED.
	Code           string          `json:"code,omitempty"`
	Executed       *bool           `json:"executed,omitempty"`
	Receipt        string          `json:"receipt,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	ConfirmationID string          `json:"confirmation_id,omitempty"`
	Summary        string          `json:"summary,omitempty"`
	ExpiresAt      string          `json:"expires_at,omitempty"`
}

// toolResult turns Engine.Call's answer into the tool's output. It reports
// false for an error that is not an answer about the call (the store
// failed): nothing is recorded then.
func toolResult(res *countersign.Result, err error) (*ToolOutput, bool) {
	var (
		denied   *countersign.DeniedError
		evidence *countersign.EvidenceError
		input    *countersign.InvalidInputError
		mismatch *countersign.MismatchError
		forbid   *countersign.ForbiddenError
		reused   *countersign.ToolCallIDReusedError
	)
	switch {
	case err == nil:
	case errors.As(err, &reused):
		return &ToolOutput{Status: "error", Code: countersign.CodeToolCallIDReused, Executed: new(bool), Error: err.Error()}, true
	case errors.As(err, &denied):
		return &ToolOutput{Status: "denied", Error: err.Error()}, true
	case errors.As(err, &evidence):
		return &ToolOutput{Status: "invalid_evidence", Error: err.Error()}, true
	case errors.As(err, &input), errors.Is(err, countersign.ErrInvalidCall), errors.Is(err, countersign.ErrActionNotFound):
		return &ToolOutput{Status: "invalid_input", Error: err.Error()}, true
	case errors.As(err, &mismatch):
		return &ToolOutput{Status: "mismatch", Error: err.Error()}, true
	case errors.As(err, &forbid):
		return &ToolOutput{Status: "forbidden", Error: err.Error()}, true
	default:
		return nil, false
	}
	out := &ToolOutput{Status: string(res.Status), Executed: res.Executed, Receipt: res.Receipt, Result: res.Result,
		Error: res.Error, ProposalID: res.ProposalID, Summary: res.Summary}
	if out.ProposalID == "" && res.Proposal != nil {
		out.ProposalID = res.Proposal.ID
	}
	if res.Status == countersign.ResultConfirmationRequired {
		out.ConfirmationID = res.ConfirmationID
	}
	if !res.ExpiresAt.IsZero() && (res.Status == countersign.ResultPending || res.Status == countersign.ResultConfirmationRequired) {
		out.ExpiresAt = res.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if out.Summary == "" && res.Proposal != nil && res.Proposal.Outcome != nil {
		out.Summary = res.Proposal.Outcome.Summary
	}
	return out, true
}

// line is the output in one line, for a human and for a scripted model's
// after_tool.
func (o *ToolOutput) line(action string) string {
	switch {
	case o.Summary != "":
		return o.Summary
	case o.Error != "":
		return fmt.Sprintf("%s %s: %s", action, o.Status, o.Error)
	case o.Receipt != "":
		return fmt.Sprintf("%s %s. Receipt: %s.", action, o.Status, o.Receipt)
	}
	return fmt.Sprintf("%s %s.", action, o.Status)
}

// unanswered returns the tool calls of the run's last assistant message
// that no tool message of the run answers yet: the engine's to make, and
// the client's (cstype.ToolCall.Client), left to the run's caller.
func unanswered(msgs []*cstype.Message, runID string) (calls, client []cstype.ToolCall) {
	last := -1
	for i, m := range msgs {
		if m.RunID == runID && m.Role == cstype.RoleAssistant {
			last = i
		}
	}
	if last < 0 {
		return nil, nil
	}
	answered := map[string]bool{}
	for _, m := range msgs[last+1:] {
		if m.RunID == runID && m.Role == cstype.RoleTool {
			answered[m.ToolCallID] = true
		}
	}
	for _, c := range msgs[last].ToolCalls {
		switch {
		case answered[c.ID]:
		case c.Client:
			client = append(client, c)
		default:
			calls = append(calls, c)
		}
	}
	return calls, client
}

// usedBefore is the set of tool call ids that messages of the thread
// other than the run's last assistant message (the one being answered)
// name: another run's calls, and this run's earlier ones.
func usedBefore(msgs []*cstype.Message, runID string) map[string]bool {
	last := -1
	for i, m := range msgs {
		if m.RunID == runID && m.Role == cstype.RoleAssistant {
			last = i
		}
	}
	used := map[string]bool{}
	for i, m := range msgs {
		if i == last {
			continue
		}
		for _, c := range m.ToolCalls {
			used[c.ID] = true
		}
	}
	return used
}

// NewToolCallID mints a tool call id: "call_" and 96 random bits in hex,
// unique in a thread (and anywhere) without looking, for a model's call
// that came without one and for the scripted model's calls.
func NewToolCallID() string { return "call_" + randomID() }

// evidenceFor is the confirmation id the thread last got for action: a
// two-phase call the model makes again (in this run or a later one, once
// the human approved) carries it, and the engine checks that it binds this
// exact call, so an id for another input is refused, never spent.
func evidenceFor(msgs []*cstype.Message, action string) string {
	calls := map[string]string{} // "run/tool call id" → action
	evidence := ""
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			calls[m.RunID+"/"+c.ID] = c.Action
		}
		if m.Role == cstype.RoleTool && calls[m.RunID+"/"+m.ToolCallID] == action {
			var out ToolOutput
			if json.Unmarshal(m.Result, &out) == nil && out.Status == string(countersign.ResultConfirmationRequired) {
				evidence = out.ConfirmationID
			}
		}
	}
	return evidence
}

// noResult is the result a model reads for a call nothing answered: a
// client tool whose caller moved on without its result, a call whose run
// was cancelled while it waited.
var noResult = json.RawMessage(`{"status":"no_result","error":"no result was recorded for this call"}`)

// conversation is the thread as a model reads it. A text decision is not
// shown: it answered the approval, and the model reads what came of it in
// the call's result. Every tool call is followed by its results before any
// other message, as the providers require: a message that is not a run's
// turn (an admitted outcome) waits until the calls it came between are
// answered, and where nothing answered a call (a cancelled run's, a
// client's the caller moved on from) noResult does once the conversation
// moves on (a user's message, a run's).
func conversation(msgs []*cstype.Message) []Message {
	out := make([]Message, 0, len(msgs))
	var (
		open     []ToolCall // the last assistant message's calls without a result yet
		deferred []Message  // what came while they were open
	)
	flush := func() {
		out = append(out, deferred...)
		deferred = nil
	}
	moveOn := func() {
		for _, c := range open {
			out = append(out, Message{Role: RoleTool, ToolCallID: c.ID, Result: noResult, Summary: c.Action + ": no result"})
		}
		open = nil
		flush()
	}
	for _, m := range msgs {
		switch m.Role {
		case cstype.RoleUser:
			if m.Decision {
				continue
			}
			moveOn()
			out = append(out, Message{Role: RoleUser, Text: m.Text})
		case cstype.RoleAssistant:
			am := Message{Role: RoleAssistant, Text: m.Text}
			for _, c := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, ToolCall{ID: c.ID, Action: c.Action, Input: c.Input})
			}
			if m.RunID == "" && len(open) > 0 {
				deferred = append(deferred, am)
				continue
			}
			moveOn()
			out = append(out, am)
			open = slices.Clone(am.ToolCalls)
		case cstype.RoleTool:
			i := slices.IndexFunc(open, func(c ToolCall) bool { return c.ID == m.ToolCallID })
			if i < 0 {
				continue // answers no call it could follow: a provider would refuse it
			}
			open = slices.Delete(open, i, i+1)
			out = append(out, Message{Role: RoleTool, ToolCallID: m.ToolCallID, Result: m.Result, Summary: m.Text})
			if len(open) == 0 {
				flush()
			}
		}
	}
	moveOn()
	return out
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
