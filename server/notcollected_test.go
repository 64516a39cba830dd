package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/runhost"
	"github.com/countersign/countersign/store/storetest"
)

// docs/api.md Part 3, "Approved, not yet collected": an approval that only the
// agent's next call runs says so in the approve answer (awaiting_caller),
// and when the deadline passes without that call it ends expired,
// not_collected, every message saying the agent did not call again, never
// that it expired before it was approved. Each test has its own clock, moved
// rather than waited out.

// notCollectedHarness is a server on a fake clock of its own, with a worker
// sweeping expiries.
func notCollectedHarness(t *testing.T, kind string) (*harness, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(time.Now())
	return newHarness(t, kind, harnessOptions{now: clock.Now, worker: true}), clock
}

// forAllStoresAt runs fn on every store, each with its own clock.
func forAllStoresAt(t *testing.T, fn func(t *testing.T, h *harness, clock *storetest.Clock)) {
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h, clock := notCollectedHarness(t, kind)
			fn(t, h, clock)
		})
	}
}

// approve approves id as bob and returns the answer.
func (h *harness) approve(id string) map[string]any {
	h.t.Helper()
	return h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "bob"}).json(h.t)
}

// proposalOf reads a proposal as alice.
func (h *harness) proposalOf(id string) map[string]any {
	h.t.Helper()
	return h.must(200, req{method: "GET", path: "/v1/proposals/" + id, token: "alice"}).json(h.t)
}

// awaitStatus polls a proposal until it has status, or fails after 10s.
func (h *harness) awaitStatus(id, status string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := h.proposalOf(id)
		if p["status"] == status {
			return p
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("proposal %s is %v, want %s", id, p["status"], status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requireNotCollected checks that proposal id ended expired, not_collected,
// in the proposal and in its thread's outcome message, worded as an approval
// the agent did not collect.
func requireNotCollected(t *testing.T, h *harness, id, thread string) {
	t.Helper()
	p := h.awaitStatus(id, "expired")
	o, _ := p["outcome"].(map[string]any)
	deadline := p["expires_at"].(string)
	wantText := "was approved, but the agent did not call again before "
	if o == nil || o["reason"] != "not_collected" || o["executed"] != false {
		t.Fatalf("outcome %v, want reason not_collected, not executed", o)
	}
	if s, _ := o["summary"].(string); !strings.Contains(s, wantText) || strings.Contains(s, "before it was approved") {
		t.Errorf("summary %q, want it to say %q", s, wantText)
	}
	if at, err := time.Parse(time.RFC3339Nano, deadline); err != nil || !strings.Contains(o["summary"].(string), at.UTC().Format(time.RFC3339)) {
		t.Errorf("summary %q does not name the deadline %s (%v)", o["summary"], deadline, err)
	}
	th := h.must(200, req{method: "GET", path: "/v1/threads/" + thread, token: "alice"}).json(t)
	var found bool
	for _, m := range th["messages"].([]any) {
		m := m.(map[string]any)
		mo, _ := m["outcome"].(map[string]any)
		if mo == nil || mo["proposal_id"] != id {
			continue
		}
		found = true
		text, _ := m["text"].(string)
		if mo["reason"] != "not_collected" || !strings.Contains(text, wantText) || strings.Contains(text, "before it was approved") {
			t.Errorf("outcome message %v, want reason not_collected and text saying %q", m, wantText)
		}
	}
	if !found {
		t.Errorf("thread %s has no outcome message for %s: %v", thread, id, th["messages"])
	}
}

// claims counts the proposal.claimed events of a proposal: its executions.
func (h *harness) claims(id string) int {
	h.t.Helper()
	evs := h.must(200, req{method: "GET", path: "/v1/proposals/" + id + "/events", token: "alice"}).json(h.t)
	n := 0
	for _, e := range evs["events"].([]any) {
		if e.(map[string]any)["type"] == "proposal.claimed" {
			n++
		}
	}
	return n
}

func TestApprovedWaitCallNeverCollectedEndsNotCollected(t *testing.T) {
	t.Parallel()
	forAllStoresAt(t, func(t *testing.T, h *harness, clock *storetest.Clock) {
		body := refund("call_nc", "c_nc", 40)
		id := h.pending("call_nc", "c_nc") // wait_seconds 0: the caller left at once
		d := h.approve(id)
		want(t, "decision", d["status"], "applied")
		want(t, "awaiting_caller", d["awaiting_caller"], true)
		want(t, "proposal status", d["proposal"].(map[string]any)["status"], "approved")
		clock.Advance(time.Hour) // past the rule's 10-minute TTL; the worker sweeps
		requireNotCollected(t, h, id, "t1")
		// The call made again now is told how it ended, and runs nothing.
		res := h.call("alice", body)
		want(t, "late call", res["status"], "expired")
		want(t, "executed", res["executed"], false)
		if n := h.claims(id); n != 0 {
			t.Errorf("%d claims, want none", n)
		}
	})
}

func TestApprovedWaitCallCollectedByTheRepeatedCallRunsOnce(t *testing.T) {
	t.Parallel()
	forAllStoresAt(t, func(t *testing.T, h *harness, clock *storetest.Clock) {
		body := refund("call_col", "c_col", 40)
		id := h.pending("call_col", "c_col")
		want(t, "awaiting_caller", h.approve(id)["awaiting_caller"], true)
		res := h.call("alice", body)
		want(t, "collected", res["status"], "succeeded")
		want(t, "receipt", res["receipt"], "rf_c_col")
		again := h.call("alice", body)
		want(t, "replayed", again["status"], "succeeded")
		want(t, "same receipt", again["receipt"], "rf_c_col")
		clock.Advance(time.Hour)
		want(t, "after the deadline", h.proposalOf(id)["status"], "succeeded")
		if n := h.claims(id); n != 1 {
			t.Errorf("%d claims, want exactly one execution", n)
		}
		// An answer about an approval that ran carries no awaiting_caller.
		if v, ok := h.approve(id)["awaiting_caller"]; ok {
			t.Errorf("approving a settled proposal answers awaiting_caller %v", v)
		}
	})
}

func TestApprovedTwoPhaseAwaitsTheAgent(t *testing.T) {
	t.Parallel()
	forAllStoresAt(t, func(t *testing.T, h *harness, clock *storetest.Clock) {
		first := func(tool, customer string) (map[string]any, string, string) {
			body := refund(tool, customer, 15)
			body["mode"] = "two_phase"
			res := h.call("alice", body)
			want(t, "first call", res["status"], "confirmation_required")
			return body, res["proposal_id"].(string), res["confirmation_id"].(string)
		}
		// Confirmed by the agent: it runs once.
		body, id, cid := first("call_2p", "c_2p")
		want(t, "awaiting_caller", h.approve(id)["awaiting_caller"], true)
		body["evidence"] = cid
		want(t, "confirmed", h.call("alice", body)["status"], "succeeded")
		want(t, "replayed", h.call("alice", body)["status"], "succeeded")
		if n := h.claims(id); n != 1 {
			t.Errorf("%d claims, want one", n)
		}
		// Never confirmed: not_collected.
		_, lapsed, _ := first("call_2p_nc", "c_2p_nc")
		want(t, "awaiting_caller", h.approve(lapsed)["awaiting_caller"], true)
		clock.Advance(time.Hour)
		requireNotCollected(t, h, lapsed, "t1")
		want(t, "the confirmed one", h.proposalOf(id)["status"], "succeeded")
	})
}

func TestApprovedWhileTheCallWaitsIsNotAwaitingTheCaller(t *testing.T) {
	t.Parallel()
	forAllStoresAt(t, func(t *testing.T, h *harness, _ *storetest.Clock) {
		body := refund("call_w", "c_w", 40)
		body["wait_seconds"] = 30
		done := make(chan *response, 1)
		go func() { done <- h.do(req{method: "POST", path: "/v1/calls", token: "alice", body: body}) }()
		// The call's proposal, once it waits on it.
		var id string
		deadline := time.Now().Add(10 * time.Second)
		for id == "" || !h.engine.CallWaiting("acme", id) {
			if time.Now().After(deadline) {
				t.Fatalf("the call did not start waiting (proposal %q)", id)
			}
			// 404 until the call made the thread.
			if r := h.do(req{method: "GET", path: "/v1/threads/t1/proposals", token: "alice"}); r.status == 200 {
				if ps := r.json(t)["proposals"].([]any); len(ps) == 1 {
					id = ps[0].(map[string]any)["id"].(string)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		d := h.approve(id)
		want(t, "decision", d["status"], "applied")
		if v, ok := d["awaiting_caller"]; ok {
			t.Errorf("awaiting_caller = %v while the call waits, want it absent", v)
		}
		select {
		case r := <-done:
			if r.status != 200 {
				t.Fatalf("the waiting call answered %d: %s", r.status, r.body)
			}
			want(t, "the waiting call", r.json(t)["status"], "succeeded")
		case <-time.After(20 * time.Second):
			t.Fatal("the waiting call did not execute the approval")
		}
	})
}

// A built-in run's call is made again by the runtime (a parked run goes on
// once its proposal is decided): its approval awaits no caller, and even if
// it lapses (no runtime got to it in time) it is not not_collected.
func TestApprovedParkedRunIsNotAwaitingTheCaller(t *testing.T) {
	t.Parallel()
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			clock := storetest.NewClock(time.Now())
			h, rt := chatHarnessAt(t, kind, clock.Now)
			run := h.must(200, req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: say("refund 40 EUR to c_9")}).json(t)["run"].(map[string]any)
			if run["status"] != "parked" {
				t.Fatalf("run %v, want parked", run)
			}
			id := run["proposal_ids"].([]any)[0].(string)
			d := h.approve(id)
			want(t, "decision", d["status"], "applied")
			if v, ok := d["awaiting_caller"]; ok {
				t.Errorf("awaiting_caller = %v for a parked run's proposal, want it absent", v)
			}
			// The runtime comes back only after the deadline.
			clock.Advance(time.Hour)
			runs, err := h.engine.RunHost(runhost.Grant()).ClaimRuns(context.Background(), 4)
			if err != nil || len(runs) != 1 {
				t.Fatalf("ClaimRuns: %v, %v", runs, err)
			}
			if _, err := rt.Drive(context.Background(), runs[0]); err != nil {
				t.Fatal(err)
			}
			p := h.proposalOf(id)
			o, _ := p["outcome"].(map[string]any)
			if p["status"] != "expired" || o == nil || o["reason"] != nil {
				t.Fatalf("proposal %v, outcome %v: want expired without a reason", p["status"], o)
			}
			if s, _ := o["summary"].(string); !strings.Contains(s, "was approved, but it did not run before") {
				t.Errorf("summary %q, want it to say the approval was not executed in time", s)
			}
		})
	}
}
