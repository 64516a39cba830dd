package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// callRequest is the body of POST /v1/calls.
type callRequest struct {
	ThreadID    string          `json:"thread_id"`
	RunID       string          `json:"run_id"`
	ToolCallID  string          `json:"tool_call_id"`
	Action      string          `json:"action"`
	Input       json.RawMessage `json:"input"`
	Mode        string          `json:"mode"`
	Evidence    string          `json:"evidence"`
	WaitSeconds *float64        `json:"wait_seconds"`
}

func (c *callRequest) validate() error {
	switch {
	case c.ThreadID == "":
		return errBadBody("thread_id", "required")
	case c.ToolCallID == "":
		return errBadBody("tool_call_id", "required")
	case c.Action == "":
		return errBadBody("action", "required")
	case len(c.Input) == 0:
		return errBadBody("input", "required")
	case c.Mode != "" && !countersign.Mode(c.Mode).Valid():
		return errBadBody("mode", "want wait, two_phase or independent")
	case c.WaitSeconds != nil && !(*c.WaitSeconds >= 0 && *c.WaitSeconds <= MaxWait.Seconds()):
		return errBadBody("wait_seconds", "want a number from 0 to 60")
	}
	for _, f := range []struct{ name, v string }{{"thread_id", c.ThreadID}, {"run_id", c.RunID}, {"tool_call_id", c.ToolCallID}} {
		if len(f.v) > cstype.MaxIDLen {
			return errBadBody(f.name, "longer than 256 bytes")
		}
	}
	return nil
}

// waitFor turns wait_seconds into a wait: default 25s, at most 60s (or the
// server's cap), and at least a nanosecond, since Call reads zero as "until
// the context ends".
func waitFor(seconds *float64, def, limit time.Duration) time.Duration {
	d := def
	if seconds != nil {
		d = time.Duration(math.Round(*seconds * float64(time.Second)))
	}
	return max(min(d, limit), time.Nanosecond)
}

func (s *Server) handleCall(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req callRequest
	if err := readBody(w, r, &req, false); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	call := &countersign.Call{
		Identity: id, ThreadID: req.ThreadID, RunID: req.RunID, ToolCallID: req.ToolCallID,
		Action: req.Action, Input: req.Input, Mode: countersign.Mode(req.Mode), Evidence: req.Evidence,
		WaitTimeout: waitFor(req.WaitSeconds, DefaultCallWait, s.waitCap),
	}
	// The call outlives its client: a disconnect must not cancel an execution
	// that already began (that would make its outcome uncertain), and the
	// wait is bounded by WaitTimeout anyway.
	ctx := context.WithoutCancel(r.Context())
	res, err := s.engine.Call(ctx, call)
	if err != nil {
		if body := refusal(err); body != nil {
			writeJSON(w, http.StatusOK, body)
			return nil
		}
		return callError(err)
	}
	writeJSON(w, http.StatusOK, callResponse(res))
	return nil
}

// refusal is the 200 answer for a denial or bad evidence (they are answers,
// not failures), or nil for any other error.
func refusal(err error) map[string]any {
	if d, ok := errors.AsType[*countersign.DeniedError](err); ok {
		return map[string]any{"status": "denied", "code": d.Code, "reason": d.Reason}
	}
	if e, ok := errors.AsType[*countersign.EvidenceError](err); ok {
		return map[string]any{"status": "confirmation_invalid", "code": "CONFIRMATION_INVALID", "reason": string(e.Reason), "retry": "no"}
	}
	return nil
}

// callError maps the engine's other errors to docs/api.md's answers.
func callError(err error) error {
	if ae := agentRefused(err); ae != nil {
		return ae
	}
	if errors.Is(err, countersign.ErrForbidden) || errors.Is(err, cstype.ErrNotThreadOwner) {
		// Another actor's thread: the answer must say nothing of it (no
		// proposal, input, operation or confirmation id, result), so it is
		// the same whatever the thread holds.
		return errForbidden("only the thread's owner may make calls in it")
	}
	if in, ok := errors.AsType[*countersign.InvalidInputError](err); ok {
		ps := make([]problem, len(in.Problems))
		for i, p := range in.Problems {
			ps[i] = problem{Path: p.Path, Message: p.Message}
		}
		e := newError(http.StatusBadRequest, CodeInvalidInput, "the input does not match the schema of %s", in.Action)
		e.details = ps
		return e
	}
	if me, ok := errors.AsType[*countersign.MismatchError](err); ok {
		// The record is the caller's own (another actor's thread answered
		// 403 above): naming its action and input digest reveals nothing.
		ps := make([]problem, len(me.Differs))
		for i, d := range me.Differs {
			msg := "differs from the recorded call's input (" + me.InputDigest + ")"
			if d == "action" {
				msg = "differs from the recorded call's action " + me.Action
			}
			ps[i] = problem{Path: d, Message: msg}
		}
		e := newError(http.StatusConflict, CodeCallMismatch, "tool call %s was already made with another %s", me.ToolCallID, strings.Join(me.Differs, " and "))
		e.details = ps
		return e
	}
	switch {
	case errors.Is(err, countersign.ErrActionNotFound):
		return newError(http.StatusNotFound, CodeActionNotFound, "no action of that name")
	case errors.Is(err, cstype.ErrInvalidParams):
		// The store's words may be its driver's: a fixed text, the cause
		// logged.
		return errStoreRefused(err)
	case errors.Is(err, countersign.ErrInvalidCall):
		return errBadBody("", err.Error())
	}
	return err
}

// callResponse is docs/api.md's call answer for res.Status.
func callResponse(res *countersign.Result) map[string]any {
	p := wireProposal(res.Proposal)
	var proposal any = p
	if p == nil {
		proposal = nil // an untyped nil: "proposal": null
	}
	body := map[string]any{"status": string(res.Status)}
	executed := func(def bool) bool {
		if res.Executed == nil {
			return def
		}
		return *res.Executed
	}
	switch res.Status {
	case countersign.ResultSucceeded:
		body["executed"] = executed(true)
		body["result"] = rawOrNull(res.Result)
		body["receipt"] = res.Receipt
		body["proposal"] = proposal
	case countersign.ResultFailed:
		body["executed"] = executed(false)
		body["error"] = res.Error
		body["proposal"] = proposal
	case countersign.ResultPending:
		body["executed"] = false
		body["proposal_id"] = res.ProposalID
		body["proposal"] = proposal
	case countersign.ResultConfirmationRequired:
		body["code"] = "CONFIRMATION_REQUIRED"
		body["proposal_id"] = res.ProposalID
		body["confirmation_id"] = res.ConfirmationID
		body["summary"] = res.Summary
		body["expires_at"] = res.ExpiresAt.UTC()
	case countersign.ResultExecute:
		body["proposal_id"] = res.ProposalID
		body["operation_id"] = res.OperationID
		body["input"] = rawOrNull(res.Input)
		body["lease"] = wireLease(res.Lease, res.Proposal.Attempt)
		body["proposal"] = proposal
	case countersign.ResultExecuting:
		body["executed"] = nil
		body["proposal_id"] = res.ProposalID
		body["operation_id"] = res.OperationID
		body["input"] = rawOrNull(res.Input)
		body["proposal"] = proposal
	case countersign.ResultUnknown, countersign.ResultReconciling:
		body["executed"] = nil
		body["error"] = res.Error
		body["proposal"] = proposal
	default: // rejected, expired, superseded, cancelled
		body["executed"] = false
		body["proposal"] = proposal
	}
	return body
}

// rawOrNull is raw, or null when it is empty or (from a misbehaving hook)
// not JSON at all.
func rawOrNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !json.Valid(raw) {
		return json.RawMessage("null")
	}
	return raw
}
