package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign"
)

// recordingHandler keeps every log record.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// find returns the attributes of the first record with msg, as strings.
func (h *recordingHandler) find(msg string) (slog.Level, map[string]string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Message != msg {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		return r.Level, attrs, true
	}
	return 0, nil, false
}

// TestExecutionFailuresAreLogged: an execution that fails, or whose outcome
// nobody knows, is logged (WARN, ERROR) with its proposal and the reason; a
// failing backend is never silent.
func TestExecutionFailuresAreLogged(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		err    error
		msg    string
		level  slog.Level
		status string
	}{
		{"definite", countersign.NotApplied(errors.New("card declined by the bank")), "execution failed", slog.LevelWarn, "failed"},
		{"uncertain", errors.New("connection reset after the request was sent"), "execution outcome uncertain", slog.LevelError, "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			logs := &recordingHandler{}
			spec := refundSpec(newBackend())
			spec.Hooks.Execute = func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) { return nil, c.err }
			spec.Hooks.Reconcile = nil
			e, err := countersign.New(countersign.Options{
				Store: openMemory(t, nil), Logger: slog.New(logs),
				Actions: []*countersign.Action{mustAction(t, spec)},
				Policy:  &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAllow}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Call(context.Background(), &countersign.Call{
				Identity: tAlice, ThreadID: "t1", ToolCallID: "log_1", Action: "payments.refund",
				Input: json.RawMessage(`{"amount": 40, "customer": "c_log"}`), Mode: countersign.ModeWait,
			})
			if err != nil || res.Proposal == nil {
				t.Fatalf("call: %v %+v", err, res)
			}
			level, attrs, ok := logs.find(c.msg)
			if !ok {
				t.Fatalf("no %q log line for proposal %s (status %s)", c.msg, res.Proposal.ID, res.Proposal.Status)
			}
			if level != c.level || attrs["proposal"] != res.Proposal.ID || attrs["action"] != "payments.refund" || attrs["status"] != c.status ||
				!strings.Contains(attrs["reason"], strings.TrimPrefix(c.err.Error(), "not applied: ")) {
				t.Errorf("log %s %v, want %s with the proposal %s, its action, status %s and the reason", level, attrs, c.level, res.Proposal.ID, c.status)
			}
		})
	}
}
