package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// Agents drives the runs the chat route starts: package agent's Runtime,
// given by the composition root. The server never decides what a run does;
// it asks the engine to start one and the driver to take it as far as it
// goes (finished, failed, parked).
type Agents interface {
	// HasAgent reports whether an agent of that name is configured.
	HasAgent(name string) bool
	// Drive takes a run this process holds until it parks or ends.
	Drive(ctx context.Context, r *cstype.Run) (*cstype.Run, error)
}

// maxRunDrive bounds how long a chat request drives its run; a run still
// running then goes on in the background, and the answer says running.
const maxRunDrive = 5 * time.Minute

type messageRequest struct {
	// ID is the caller's id for the message, unique in the thread; the
	// server makes one when it is absent.
	ID    *string `json:"id"`
	Text  *string `json:"text"`
	Agent string  `json:"agent"`
}

// Run is a run as the API shows it.
type Run struct {
	ID          string     `json:"id"`
	ThreadID    string     `json:"thread_id"`
	Agent       string     `json:"agent"`
	Status      string     `json:"status"`
	ProposalIDs []string   `json:"proposal_ids"`
	Error       string     `json:"error,omitempty"`
	StartedAt   time.Time  `json:"started_at"`
	EndedAt     *time.Time `json:"ended_at,omitempty"`
}

func wireRun(r *cstype.Run) *Run {
	if r == nil {
		return nil
	}
	return &Run{ID: r.ID, ThreadID: r.ThreadID, Agent: r.Agent, Status: string(r.Status),
		ProposalIDs: orEmpty(append([]string(nil), r.ProposalIDs...)), Error: r.Error,
		StartedAt: r.StartedAt.UTC(), EndedAt: utcPtr(r.EndedAt)}
}

func wireRuns(rs []*cstype.Run) []*Run {
	out := make([]*Run, len(rs))
	for i, r := range rs {
		out[i] = wireRun(r)
	}
	return out
}

// conversationError maps the engine's refusals of a conversation request.
func conversationError(err error, threadID string) error {
	var busy *countersign.ThreadBusyError
	var taken *countersign.MessageIDTakenError
	switch {
	case errors.As(err, &busy):
		return newError(http.StatusConflict, CodeThreadBusy, "run %s holds thread %s; wait for it to end or cancel it", busy.RunID, busy.ThreadID)
	case errors.As(err, &taken):
		return errMessageIDTaken(taken)
	case errors.Is(err, cstype.ErrInvalidParams):
		// Before ErrInvalidCall, which the engine wraps it in: the store's
		// words are not the caller's to read.
		return errStoreRefused(err)
	case errors.Is(err, countersign.ErrInvalidCall):
		return invalidMessage(err)
	}
	if ae := agentRefused(err); ae != nil {
		return ae
	}
	if ae := invalidRemember(err); ae != nil {
		return ae
	}
	if ae := stepUpRefused(err); ae != nil {
		return ae // a text decision of a step-up proposal: approve it in the inbox
	}
	if _, ok := errors.AsType[*countersign.ForbiddenError](err); ok {
		return decisionError(err)
	}
	if errors.Is(err, countersign.ErrNotFound) {
		return errNotFound("no thread %q", threadID)
	}
	return err
}

// invalidMessage is the 400 INVALID_BODY of a message the engine refused
// as malformed, naming the field its words name (the engine's own words,
// "invalid call: id: …").
func invalidMessage(err error) *apiError {
	msg := strings.TrimPrefix(err.Error(), countersign.ErrInvalidCall.Error()+": ")
	for _, field := range []string{"id", "text"} {
		if rest, ok := strings.CutPrefix(msg, field+": "); ok {
			return errBadBody(field, rest)
		}
	}
	return errBadBody("", msg)
}

func (s *Server) handlePostMessage(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req messageRequest
	if err := readBody(w, r, &req, false); err != nil {
		return err
	}
	if req.Text == nil {
		return errBadBody("text", "required")
	}
	msgID := ""
	if req.ID != nil {
		if *req.ID == "" {
			return errBadBody("id", "must be 1 to 128 characters; leave it out for the server to choose one")
		}
		msgID = *req.ID
	}
	agentName := req.Agent
	if agentName == "" {
		agentName = s.defaultAgent
	}
	if agentName != "" && (s.agents == nil || !s.agents.HasAgent(agentName)) {
		if req.Agent != "" {
			return errBadBody("agent", "no agent named "+req.Agent)
		}
		agentName = "" // a default that is not configured: store the message
	}
	threadID := r.PathValue("thread_id")
	// A message, once taken, is not abandoned with its client.
	ctx := context.WithoutCancel(r.Context())
	ans, err := s.engine.PostMessage(ctx, &countersign.Message{Identity: id, ThreadID: threadID, ID: msgID, Text: *req.Text, Agent: agentName})
	if err != nil {
		return conversationError(err, threadID)
	}
	switch {
	case ans.Decision != nil:
		writeJSON(w, http.StatusOK, map[string]any{"thread_id": threadID, "text": ans.Reply,
			"proposal_decision": map[string]any{"status": string(ans.Decision.Status), "proposal": wireProposal(ans.Decision.Proposal)}})
		return nil
	case ans.Pending != nil:
		writeJSON(w, http.StatusOK, map[string]any{"thread_id": threadID, "proposal_decision": nil,
			"pending": ans.Pending, "text": ans.Reply})
		return nil
	case ans.Run == nil:
		writeJSON(w, http.StatusAccepted, map[string]any{"thread_id": threadID, "message": wireMessage(ans.Message), "run": nil})
		return nil
	}
	if wantsEventStream(r) {
		return s.streamRun(w, r, id, ans)
	}
	run := s.drive(ans.Run)
	msgs, err := s.runMessages(ctx, id, threadID, ans.Message, run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"thread_id": threadID, "run": wireRun(run), "messages": wireMessages(msgs)})
	return nil
}

// drive takes a run as far as it goes within maxRunDrive; the run belongs
// to this process, not to the request that started it.
func (s *Server) drive(r *cstype.Run) *cstype.Run {
	ctx, cancel := context.WithTimeout(s.base, maxRunDrive)
	defer cancel()
	got, err := s.agents.Drive(ctx, r)
	if err != nil {
		s.log.Warn("server: drive run", "run", r.ID, "err", err)
	}
	if got == nil {
		return r
	}
	return got
}

// runMessages are the messages a run added, after the user's that started
// it.
func (s *Server) runMessages(ctx context.Context, id countersign.Identity, threadID string, first *cstype.Message, run *cstype.Run) ([]*cstype.Message, error) {
	v, err := s.engine.Thread(ctx, id, threadID)
	if err != nil {
		return nil, threadError(err, threadID)
	}
	out := []*cstype.Message{first}
	for _, m := range v.Messages {
		if m.RunID == run.ID {
			out = append(out, m)
		}
	}
	return out, nil
}

func (s *Server) handleGetRun(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	threadID := r.PathValue("thread_id")
	run, err := s.engine.Run(r.Context(), id, threadID, r.PathValue("run_id"))
	if err != nil {
		return runError(err, threadID)
	}
	writeJSON(w, http.StatusOK, map[string]any{"run": wireRun(run)})
	return nil
}

func (s *Server) handleCancelRun(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	var req reasonRequest
	if err := readBody(w, r, &req, true); err != nil {
		return err
	}
	threadID := r.PathValue("thread_id")
	run, err := s.engine.CancelRun(context.WithoutCancel(r.Context()), id, threadID, r.PathValue("run_id"))
	if err != nil {
		return runError(err, threadID)
	}
	writeJSON(w, http.StatusOK, map[string]any{"run": wireRun(run)})
	return nil
}

func runError(err error, threadID string) error {
	switch {
	case agentRefused(err) != nil:
		return agentRefused(err)
	case errors.Is(err, countersign.ErrForbidden):
		return errForbidden("only the thread's owner may act in it")
	case errors.Is(err, countersign.ErrNotFound):
		if strings.HasPrefix(err.Error(), "run ") {
			return errNotFound("no such run in thread %q", threadID)
		}
		return errNotFound("no thread %q", threadID)
	}
	return err
}

// wantsEventStream reports whether the client asked for the run as a stream
// of AG-UI events.
func wantsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}
