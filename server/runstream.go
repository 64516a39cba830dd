package server

import (
	"context"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/store"
)

// interruptSchema is the responseSchema of an approval interrupt (API.md,
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
func (rs *runStream) messages(msgs []*store.Message, runID string) error {
	for _, m := range msgs {
		if m.RunID != runID || rs.sent[m.ID] {
			continue
		}
		rs.sent[m.ID] = true
		switch m.Role {
		case store.RoleAssistant:
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
		case store.RoleTool:
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
	run := ans.Run
	changed, stop := s.engine.WatchRun(id.Tenant, run.ID)
	defer stop()
	done := make(chan *store.Run, 1)
	go func() { done <- s.drive(run) }()

	ew := event.NewWriter(w, nil)
	rs := &runStream{w: ew, sent: map[string]bool{}, open: map[string]bool{}}
	if err := ew.Write(&event.RunStarted{ThreadID: run.ThreadID, RunID: run.ID, ProtocolVersion: event.ProtocolVersion, Timestamp: now()}); err != nil {
		return nil // the client left; the run goes on
	}
	ctx := context.WithoutCancel(r.Context())
	flush := func() error {
		st, err := s.engine.RunState(ctx, id.Tenant, run.ID)
		if err != nil {
			return err
		}
		return rs.messages(st.Messages, run.ID)
	}
	ping := time.NewTicker(s.keepAliveEvery)
	defer ping.Stop()
	for {
		select {
		case <-changed:
			if err := flush(); err != nil {
				return nil
			}
		case <-ping.C:
			if err := ew.Ping(); err != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case final := <-done:
			if err := flush(); err != nil {
				return nil
			}
			_ = ew.Write(s.runEnd(ctx, id, final, rs))
			return nil
		}
	}
}

// runEnd is the event that ends a run's stream.
func (s *Server) runEnd(ctx context.Context, id countersign.Identity, run *store.Run, rs *runStream) event.Event {
	switch run.Status {
	case store.RunFinished:
		return &event.RunFinished{ThreadID: run.ThreadID, RunID: run.ID, Outcome: &event.Outcome{Type: event.OutcomeSuccess}, Timestamp: now()}
	case store.RunCancelled:
		return &event.RunFinished{ThreadID: run.ThreadID, RunID: run.ID, Outcome: &event.Outcome{Type: event.OutcomeCancelled}, Timestamp: now()}
	case store.RunParked:
		in := event.Interrupt{ID: run.Awaiting, Reason: "tool_call", ResponseSchema: interruptSchema}
		for callID := range rs.open {
			in.ToolCallID = callID
		}
		if p, err := s.engine.Proposal(ctx, id, run.Awaiting); err == nil {
			in.Message, in.ExpiresAt = p.Confirmation.Title, p.ExpiresAt.UTC()
			in.Metadata = map[string]any{"proposal": wireProposal(p)}
		}
		return &event.RunFinished{ThreadID: run.ThreadID, RunID: run.ID, Timestamp: now(),
			Outcome: &event.Outcome{Type: event.OutcomeInterrupt, Interrupts: []event.Interrupt{in}}}
	case store.RunFailed:
		return &event.RunError{Message: run.Error, Code: "RUN_FAILED", Timestamp: now()}
	}
	return &event.RunError{Message: "the run is still running; follow it with GET /v1/threads/" + run.ThreadID + "/runs/" + run.ID,
		Code: "RUN_STILL_RUNNING", Timestamp: now()}
}
