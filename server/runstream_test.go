package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// threadReadFails is a store whose first thread read after a message that
// starts a run fails as an unreachable store's does: the read with which
// the run's stream asks the engine whether its caller may follow the run.
type threadReadFails struct {
	store.Store
	armed atomic.Bool
}

func (s *threadReadFails) PostMessage(ctx context.Context, params *store.PostMessageParams) (*store.PostMessageResult, error) {
	res, err := s.Store.PostMessage(ctx, params)
	if err == nil && params.Run != nil {
		s.armed.Store(true)
	}
	return res, err
}

func (s *threadReadFails) GetThread(ctx context.Context, params *store.GetThreadParams) (*cstype.Thread, error) {
	if s.armed.CompareAndSwap(true, false) {
		return nil, store.Unavailable(fmt.Errorf("connection refused"))
	}
	return s.Store.GetThread(ctx, params)
}

// TestRunStreamThatCannotWatch: a run's stream reads the run as its caller
// (Engine.WatchThreadRun, Engine.ThreadRunState). When that read fails the
// stream ends at once with RUN_ERROR, in the words every AG-UI refusal
// uses (UNAVAILABLE, no store's text), and the run it started goes on all
// the same: it finishes, and its reply is in the thread.
func TestRunStreamThatCannotWatch(t *testing.T) {
	t.Parallel()
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			st := &threadReadFails{Store: newStore(t, kind, nil)}
			h := aguiHarnessOn(t, kind, harnessOptions{store: st})
			evs := h.runAGUI("alice", userInput("tw", "r1", "m1", "hello"))
			if got := types(evs); got != "RUN_STARTED RUN_ERROR" {
				t.Fatalf("events %s, want RUN_STARTED RUN_ERROR", got)
			}
			if e := lastRunError(t, evs); e.Code != CodeUnavailable || e.Message != unavailableMessage {
				t.Fatalf("RUN_ERROR %s %q, want %s %q", e.Code, e.Message, CodeUnavailable, unavailableMessage)
			}
			if st.armed.Load() {
				t.Fatal("the stream never read the thread: the failure was not the stream's")
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				th := h.must(200, req{method: "GET", path: "/v1/threads/tw", token: "alice"}).json(t)
				runs, _ := th["runs"].([]any)
				if len(runs) == 1 && runs[0].(map[string]any)["status"] == "finished" {
					// Read again: the thread's messages and runs are two
					// reads, and the run may have finished between them.
					th = h.must(200, req{method: "GET", path: "/v1/threads/tw", token: "alice"}).json(t)
					msgs, _ := th["messages"].([]any)
					for _, m := range msgs {
						if m := m.(map[string]any); m["role"] == "assistant" && m["text"] == "I can refund payments." {
							return
						}
					}
					t.Fatalf("the thread holds %v, want the run's reply", msgs)
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run is %v after 10s, want finished", runs)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestRunStreamThatCannotWatchOverChat: the same on the chat route's run
// stream (POST /v1/threads/{id}/messages, Accept: text/event-stream).
func TestRunStreamThatCannotWatchOverChat(t *testing.T) {
	t.Parallel()
	st := &threadReadFails{Store: newStore(t, "mem", nil)}
	h := aguiHarnessOn(t, "mem", harnessOptions{store: st})
	evs := h.aguiStream(req{method: "POST", path: "/v1/threads/tc/messages", token: "alice",
		header: map[string]string{"Accept": "text/event-stream"}, body: map[string]any{"text": "hello", "agent": "demo"}})
	if e := lastRunError(t, evs); types(evs) != "RUN_STARTED RUN_ERROR" || e.Code != CodeUnavailable {
		t.Fatalf("events %s (%+v), want RUN_STARTED RUN_ERROR UNAVAILABLE", types(evs), e)
	}
}
