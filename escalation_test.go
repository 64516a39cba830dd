package countersign_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store/sqlitestore"
)

var tMona = countersign.Identity{Tenant: "acme", Actor: "mona", Roles: []string{"manager"}}

// escalationRules ask finance for refunds, add the managers after 30
// minutes, and remind every 10.
var escalationRules = []countersign.Rule{{
	Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, TTL: 2 * time.Hour,
	EscalateAfter: 30 * time.Minute, EscalateTo: []string{"role:manager"}, RemindEvery: 10 * time.Minute,
}}

func eventsOf(t *testing.T, e *countersign.Engine, id countersign.Identity, pid string, typ cstype.EventType) int {
	t.Helper()
	evs, err := e.ProposalEvents(context.Background(), id, pid)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestEscalationAddsApproversOnceAndRemindsWhilePending: a refund nobody
// in finance decides gains the managers as approvers after escalate_after,
// once; a manager could neither see nor decide it before and may after;
// reminders follow the schedule while it is pending, and stop once it is
// decided. On every store.
func TestEscalationAddsApproversOnceAndRemindsWhilePending(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open, rules: escalationRules})
		ctx := context.Background()
		res := h.call(refundCall("c_esc", countersign.ModeWait, `{"amount": 40, "customer": "c_9"}`))
		if res.Status != countersign.ResultPending {
			t.Fatalf("call %s, want pending", res.Status)
		}
		pid := res.ProposalID
		p, err := h.engine.Proposal(ctx, tBob, pid)
		if err != nil || p.EscalateAt == nil || !p.EscalateAt.Equal(h.clock.Now().Add(30*time.Minute)) || p.RemindEvery != 10*time.Minute {
			t.Fatalf("proposal %+v, %v: want escalation and reminders scheduled", p, err)
		}
		if _, err := h.engine.Proposal(ctx, tMona, pid); !errors.Is(err, countersign.ErrForbidden) {
			t.Fatalf("a manager read it before the escalation: %v", err)
		}
		if page, err := h.engine.List(ctx, tMona, countersign.ListParams{}); err != nil || len(page.Proposals) != 0 {
			t.Fatalf("a manager listed it before the escalation: %+v, %v", page, err)
		}

		// +10m: a reminder, no escalation.
		h.clock.Advance(10 * time.Minute)
		if esc, rem, err := h.engine.SweepEscalations(ctx, 10); err != nil || esc != 0 || rem != 1 {
			t.Fatalf("sweep at +10m: %d escalated, %d reminded, %v; want 0, 1", esc, rem, err)
		}
		// +30m: escalated, and one reminder for the two due since.
		h.clock.Advance(20 * time.Minute)
		if esc, rem, err := h.engine.SweepEscalations(ctx, 10); err != nil || esc != 1 || rem != 1 {
			t.Fatalf("sweep at +30m: %d escalated, %d reminded, %v; want 1, 1", esc, rem, err)
		}
		p, err = h.engine.Proposal(ctx, tMona, pid)
		if err != nil || !slices.Equal(p.Approvers, []string{"role:finance", "role:manager"}) || p.Status != cstype.StatusPending {
			t.Fatalf("after escalation, as a manager: %+v, %v", p, err)
		}
		// It is in the managers' inbox now.
		page, err := h.engine.List(ctx, tMona, countersign.ListParams{Statuses: []cstype.Status{cstype.StatusPending}})
		if err != nil || len(page.Proposals) != 1 || page.Proposals[0].ID != pid {
			t.Fatalf("the manager's pending list: %+v, %v; want the escalated proposal", page, err)
		}
		// Later sweeps do not escalate again.
		h.clock.Advance(5 * time.Minute)
		if esc, rem, err := h.engine.SweepEscalations(ctx, 10); err != nil || esc != 0 || rem != 0 {
			t.Fatalf("sweep at +35m: %d escalated, %d reminded, %v; want nothing", esc, rem, err)
		}
		if n := eventsOf(t, h.engine, tBob, pid, cstype.EventEscalated); n != 1 {
			t.Fatalf("%d escalations, want 1", n)
		}
		// The manager decides; the reminders stop.
		if dr := h.decide(tMona, pid, countersign.Approve); dr.Status != countersign.DecideApplied {
			t.Fatalf("the manager's approval: %s", dr.Status)
		}
		h.clock.Advance(time.Hour)
		if _, rem, err := h.engine.SweepEscalations(ctx, 10); err != nil || rem != 0 {
			t.Fatalf("a decided proposal reminded: %d, %v", rem, err)
		}
		// At +10m, and at +30m one for the backlog (+20m and +30m): the
		// next was due at +40m, after the decision.
		if n := eventsOf(t, h.engine, tBob, pid, cstype.EventReminder); n != 2 {
			t.Fatalf("%d reminders, want 2", n)
		}
	})
}

// TestEscalationSurvivesARestart: the due times are the proposal's, so an
// engine that starts on the store later escalates and reminds on schedule.
func TestEscalationSurvivesARestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "restart.db")
	clock := newClock()
	open := func() (*countersign.Engine, func()) {
		s, err := sqlitestore.Open(context.Background(), path, &sqlitestore.Options{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		e, err := countersign.New(countersign.Options{Store: s, Now: clock.Now, Policy: &countersign.Policy{Rules: escalationRules},
			Actions: []*countersign.Action{mustAction(t, refundSpec(newBackend()))}})
		if err != nil {
			t.Fatal(err)
		}
		return e, func() { _ = s.Close() }
	}
	e, stop := open()
	c := refundCall("c_restart", countersign.ModeWait, `{"amount": 5, "customer": "c_1"}`)
	c.WaitTimeout = time.Millisecond
	res, err := e.Call(context.Background(), c)
	if err != nil || res.Status != countersign.ResultPending {
		t.Fatalf("call: %+v, %v", res, err)
	}
	stop()
	clock.Advance(45 * time.Minute)
	e, stop = open()
	defer stop()
	esc, rem, err := e.SweepEscalations(context.Background(), 10)
	if err != nil || esc != 1 || rem != 1 {
		t.Fatalf("after the restart: %d escalated, %d reminded, %v; want 1, 1", esc, rem, err)
	}
	if _, err := e.Proposal(context.Background(), tMona, res.ProposalID); err != nil {
		t.Fatalf("the manager cannot see it after the escalation: %v", err)
	}
}
