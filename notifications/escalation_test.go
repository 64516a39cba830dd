package notifications_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/countersign/countersign/store/storetest"
)

// TestEscalationAndRemindersAreNotified: a target subscribed to
// proposal.escalated and proposal.reminder is sent one of each when the
// sweep escalates a stale proposal and reminds of it, and nothing for the
// events it did not subscribe to.
func TestEscalationAndRemindersAreNotified(t *testing.T) {
	clock := storetest.NewClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	st, err := sqlitestore.Open(t.Context(), t.TempDir()+"/cs.db", &sqlitestore.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	a, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name: "payments.refund",
		Execute: func(_ context.Context, _ *countersign.ExecuteRequest, in refundInput) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "rf_" + in.Customer}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := countersign.New(countersign.Options{
		Store: st, Actions: []*countersign.Action{a}, Logger: slog.New(slog.DiscardHandler), Now: clock.Now,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent,
			TTL: 2 * time.Hour, EscalateAfter: 30 * time.Minute, EscalateTo: []string{"role:manager"}, RemindEvery: 20 * time.Minute,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	d := newDeliverer(t, st, notifications.Target{URL: srv.URL, Secret: secret, Backoff: fastBackoff,
		Events: []cstype.EventType{cstype.EventEscalated, cstype.EventReminder}})
	id := propose(t, e, "call_esc")
	clock.Advance(30 * time.Minute)
	w, err := e.NewWorker(countersign.WorkerOptions{SweepBatch: 10})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := w.SweepOnce(t.Context()); err != nil || c.Escalated != 1 || c.Reminded != 1 {
		t.Fatalf("sweep: %+v, %v; want 1 escalated, 1 reminded", c, err)
	}
	for t.Context().Err() == nil {
		if _, err := d.DeliverDue(t.Context()); err != nil {
			t.Fatal(err)
		}
		if reqs, _ := rc.got(); len(reqs) >= 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, bodies := rc.got()
	var types []string
	for _, b := range bodies {
		var n struct {
			Type     string `json:"type"`
			Proposal struct {
				ID        string   `json:"id"`
				Approvers []string `json:"approvers"`
			} `json:"proposal"`
		}
		if err := json.Unmarshal(b, &n); err != nil {
			t.Fatalf("body %s: %v", b, err)
		}
		if n.Proposal.ID != id || !slices.Contains(n.Proposal.Approvers, "role:manager") {
			t.Fatalf("notification %s: want the escalated proposal", b)
		}
		types = append(types, n.Type)
	}
	slices.Sort(types)
	if !slices.Equal(types, []string{"proposal.escalated", "proposal.reminder"}) {
		t.Fatalf("notified %q, want one escalation and one reminder, and not the creation", types)
	}
}
