package server

import (
	"context"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/plaintext"
)

// interruptSchema is the responseSchema of an approval interrupt (docs/api.md,
// AG-UI): what a front end sends back to decide.
var interruptSchema = map[string]any{
	"type": "object", "required": []string{"approved"},
	"properties": map[string]any{
		"approved": map[string]any{"type": "boolean"},
		"reason":   map[string]any{"type": "string"},
		"remember": map[string]any{"enum": []string{"run", "thread"}},
	},
}

// runStream writes a run's messages as AG-UI events, each once, as the run
// writes them.
type runStream struct {
	w    *event.Writer
	sent map[string]bool
	// open holds the tool calls streamed without a result yet, so that an
	// interrupt names the call it holds.
	open map[string]bool
}

func now() int64 { return time.Now().UnixMilli() }

// messages writes the run's messages not written yet.
func (rs *runStream) messages(msgs []*cstype.Message, runID string) error {
	for _, m := range msgs {
		if m.RunID != runID || rs.sent[m.ID] {
			continue
		}
		rs.sent[m.ID] = true
		switch m.Role {
		case cstype.RoleAssistant:
			if m.Text != "" {
				for _, e := range []event.Event{
					&event.TextMessageStart{MessageID: m.ID, Role: event.RoleAssistant, Timestamp: now()},
					&event.TextMessageContent{MessageID: m.ID, Delta: m.Text, Timestamp: now()},
					&event.TextMessageEnd{MessageID: m.ID, Timestamp: now()},
				} {
					if err := rs.w.Write(e); err != nil {
						return err
					}
				}
			}
			for _, c := range m.ToolCalls {
				args := string(c.Input)
				if args == "" {
					args = "{}"
				}
				for _, e := range []event.Event{
					&event.ToolCallStart{ToolCallID: c.ID, ToolCallName: c.Action, ParentMessageID: m.ID, Timestamp: now()},
					&event.ToolCallArgs{ToolCallID: c.ID, Delta: args, Timestamp: now()},
					&event.ToolCallEnd{ToolCallID: c.ID, Timestamp: now()},
				} {
					if err := rs.w.Write(e); err != nil {
						return err
					}
				}
				rs.open[c.ID] = true
			}
		case cstype.RoleTool:
			delete(rs.open, m.ToolCallID)
			content := string(m.Result)
			if content == "" {
				content = m.Text
			}
			if err := rs.w.Write(&event.ToolCallResult{MessageID: m.ID, ToolCallID: m.ToolCallID, Content: content,
				Timestamp: now()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// streamRun answers a message that started a run with the run as AG-UI
// events: RUN_STARTED, the run's messages as it writes them, and
// RUN_FINISHED (success, or an interrupt naming the proposal a parked run
// waits for) or RUN_ERROR. The run is driven by this process whether or not
// the client stays.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, id countersign.Identity, ans *countersign.MessageAnswer) error {
	return s.streamRunAs(w, r, id, ans.Run, ans.Run.ThreadID, ans.Run.ID, nil)
}

// streamRunAs streams a run as AG-UI events whose RUN_STARTED and
// RUN_FINISHED name threadID and runID (the AG-UI endpoint echoes its
// input's). It either drives drive, a run this process just started, or
// follows follow, a parked run a resume decided: then the stream carries
// the run's continuation from its interrupt on, whoever drives it, and ends
// when the run ends or parks on another interrupt.
func (s *Server) streamRunAs(w http.ResponseWriter, r *http.Request, id countersign.Identity, drive *cstype.Run, threadID, runID string, follow *cstype.Run) error {
	run := drive
	if run == nil {
		run = follow
	}
	// The stream reads the run as the caller, through the engine's reads
	// for the thread's owner (Engine.ThreadRunState, WatchThreadRun), on
	// every change it shows.
	ctx := context.WithoutCancel(r.Context())
	state := func() (*countersign.RunState, error) {
		return s.engine.ThreadRunState(ctx, id, run.ThreadID, run.ID)
	}
	ew := event.NewWriter(w, nil)
	changed, stop, err := s.engine.WatchThreadRun(ctx, id, run.ThreadID, run.ID)
	if err != nil {
		if drive != nil {
			// The run this process just started goes on without a watcher.
			go s.drive(drive)
		}
		_ = ew.Write(&event.RunStarted{ThreadID: threadID, RunID: runID, ProtocolVersion: event.ProtocolVersion, Timestamp: now()})
		code, message := s.aguiError(r, err)
		_ = ew.Write(&event.RunError{Message: message, Code: code, Timestamp: now()})
		return nil
	}
	defer stop()
	// The stream, not the run, ends with the client or the credential that
	// opened it.
	open, closeStream := s.guardStream(r, id)
	defer closeStream()
	done := make(chan *cstype.Run, 1)
	if drive != nil {
		go func() { done <- s.drive(drive) }()
	}
	rs := &runStream{w: ew, sent: map[string]bool{}, open: map[string]bool{}}
	if err := ew.Write(&event.RunStarted{ThreadID: threadID, RunID: runID, ProtocolVersion: event.ProtocolVersion, Timestamp: now()}); err != nil {
		return nil // the client left; the run goes on
	}
	if follow != nil {
		st, err := state()
		if err != nil {
			return nil
		}
		rs.skipToInterrupt(st.Messages, follow)
	}
	// flush writes what the run wrote since, and reports the run's state
	// once it has stopped where a stream ends (when following: ended, or
	// parked on another interrupt).
	flush := func() (*countersign.RunState, error) {
		st, err := state()
		if err != nil {
			return nil, err
		}
		if err := rs.messages(st.Messages, run.ID); err != nil {
			return nil, err
		}
		r := st.Run
		if follow != nil && (r.Status.Ended() || (r.Status == cstype.RunParked && r.Awaiting != follow.Awaiting)) {
			return st, nil
		}
		return nil, nil
	}
	ping := time.NewTicker(s.keepAliveEvery)
	defer ping.Stop()
	poll := time.NewTicker(100 * time.Millisecond) // changes other processes make
	defer poll.Stop()
	deadline := time.After(maxRunDrive)
	// end writes what the run wrote last and the event that ends the
	// stream, from final, the run's state as it stopped.
	end := func(final *countersign.RunState) error {
		if err := rs.messages(final.Messages, run.ID); err != nil {
			return nil
		}
		e := s.runEnd(ctx, id, final, rs)
		switch e := e.(type) {
		case *event.RunFinished:
			e.ThreadID, e.RunID = threadID, runID
		}
		_ = ew.Write(e)
		return nil
	}
	for {
		select {
		case <-changed:
		case <-poll.C:
			if follow == nil {
				continue
			}
		case <-ping.C:
			if err := ew.Ping(); err != nil {
				return nil
			}
			continue
		case <-open.Done():
			return nil
		case final := <-done:
			st, err := state()
			if err != nil {
				return nil
			}
			// The run as this process left it, though another may have
			// taken it on since.
			st.Run = final
			return end(st)
		case <-deadline:
			st, err := state()
			if err != nil {
				return nil
			}
			return end(st)
		}
		final, err := flush()
		if err != nil {
			return nil
		}
		if final != nil {
			return end(final)
		}
	}
}

// skipToInterrupt marks as sent the run's messages up to the assistant
// message whose tool call the run parked on, so that a resumed stream
// starts with that call's result.
func (rs *runStream) skipToInterrupt(msgs []*cstype.Message, run *cstype.Run) {
	last := -1
	for i, m := range msgs {
		if m.RunID != run.ID {
			continue
		}
		if m.Role == cstype.RoleTool && m.ProposalID == run.Awaiting {
			break
		}
		if m.Role == cstype.RoleAssistant {
			last = i
		}
	}
	for i, m := range msgs {
		if i <= last && m.RunID == run.ID {
			rs.sent[m.ID] = true
		}
	}
}

// runEnd is the event that ends a run's stream, from the run's state as it
// stopped. A run that finished with client tool calls left to its caller
// names them (pendingToolCallIds).
func (s *Server) runEnd(ctx context.Context, id countersign.Identity, st *countersign.RunState, rs *runStream) event.Event {
	run := st.Run
	switch run.Status {
	case cstype.RunFinished:
		out := &event.Outcome{Type: event.OutcomeSuccess}
		for _, c := range st.PendingClientCalls() {
			out.PendingToolCallIDs = append(out.PendingToolCallIDs, c.ID)
		}
		return &event.RunFinished{ThreadID: run.ThreadID, RunID: run.ID, Outcome: out, Timestamp: now()}
	case cstype.RunCancelled:
		return &event.RunFinished{ThreadID: run.ThreadID, RunID: run.ID, Outcome: &event.Outcome{Type: event.OutcomeCancelled}, Timestamp: now()}
	case cstype.RunParked:
		in := event.Interrupt{ID: run.Awaiting, Reason: "tool_call", ResponseSchema: interruptSchema}
		for callID := range rs.open {
			in.ToolCallID = callID // unless the proposal says which, below
		}
		if p, err := s.engine.Proposal(ctx, id, run.Awaiting); err == nil {
			// The proposal's tool_call_id is the model's own id, the one
			// the run's TOOL_CALL_START named (docs/api.md, One tool-call
			// identity): of several calls streamed, it names the one that
			// waits.
			in.ToolCallID = p.ToolCallID
			// The message is for a person: plain text. The proposal in
			// the metadata is for programs, exact.
			in.Message, in.ExpiresAt = plaintext.Line(p.Confirmation.Title), p.ExpiresAt.UTC()
			in.Metadata = map[string]any{"proposal": wireProposal(p)}
		}
		return &event.RunFinished{ThreadID: run.ThreadID, RunID: run.ID, Timestamp: now(),
			Outcome: &event.Outcome{Type: event.OutcomeInterrupt, Interrupts: []event.Interrupt{in}}}
	case cstype.RunFailed:
		return &event.RunError{Message: run.Error, Code: "RUN_FAILED", Timestamp: now()}
	}
	return &event.RunError{Message: "the run is still running; follow it with GET /v1/threads/" + run.ThreadID + "/runs/" + run.ID,
		Code: "RUN_STILL_RUNNING", Timestamp: now()}
}
