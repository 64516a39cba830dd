package server

import (
	"bytes"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// notOwner checks a refusal of dave (an actor of alice's tenant without
// roles) acting in alice's thread: 403 FORBIDDEN, and nothing in the body
// of what the thread holds.
func notOwner(t *testing.T, what string, resp *response, secrets ...string) {
	t.Helper()
	if resp.status != 403 || resp.errorCode(t) != CodeForbidden {
		t.Fatalf("%s: %d %s, want 403 FORBIDDEN", what, resp.status, resp.body)
	}
	for _, s := range secrets {
		if s != "" && bytes.Contains(resp.body, []byte(s)) {
			t.Errorf("%s: the refusal reveals %q: %s", what, s, resp.body)
		}
	}
	m := resp.json(t)
	for _, k := range []string{"proposal", "proposal_id", "confirmation_id", "result", "receipt", "input", "operation_id"} {
		if _, ok := m[k]; ok {
			t.Errorf("%s: the refusal carries %q: %s", what, k, resp.body)
		}
	}
}

// TestThreadOwnershipOnEveryRoute walks the review's findings over HTTP:
// another actor of the tenant who repeats the owner's calls, presents her
// evidence, or reads her thread gets 403 and learns nothing; nothing of his
// runs; outcomes land only in their own thread.
func TestThreadOwnershipOnEveryRoute(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		postAs := func(token string, body map[string]any) *response {
			return h.do(req{method: "POST", path: "/v1/calls", token: token, body: body})
		}
		// Dave listens from the start.
		daveStream := h.stream(t, "dave", "")
		// Alice's pending refund in her thread t1.
		body := refund("own_1", "c_owned", 40)
		first := h.call("alice", body)
		pid, _ := first["proposal_id"].(string)
		if first["status"] != "pending" || pid == "" {
			t.Fatalf("alice's call: %v", first)
		}
		p := first["proposal"].(map[string]any)
		op, _ := p["operation_id"].(string)
		secrets := []string{pid, op, "c_owned", "rf_c_owned"}

		// Dave repeats her call body: refused, before and after approval.
		notOwner(t, "dave repeats a pending call", postAs("dave", body), secrets...)
		h.decide(200, "bob", pid, "approve", map[string]any{"remember": "thread"}, nil)
		notOwner(t, "dave repeats an approved call", postAs("dave", body), secrets...)
		got := h.must(200, req{method: "GET", path: "/v1/proposals/" + pid, token: "alice"}).json(t)
		if got["status"] != "approved" || got["outcome"] != nil {
			t.Fatalf("after dave's repeat alice's proposal is %v (outcome %v): his repeat ran it", got["status"], got["outcome"])
		}
		evs, _ := h.must(200, req{method: "GET", path: "/v1/proposals/" + pid + "/events", token: "alice"}).json(t)["events"].([]any)
		for _, e := range evs {
			if e.(map[string]any)["type"] == "proposal.claimed" {
				t.Fatalf("dave's repeat claimed alice's approval: %v", evs)
			}
		}
		// Dave's new tool call with her input in her thread: refused too.
		other := maps.Clone(body)
		other["tool_call_id"] = "own_dave"
		notOwner(t, "dave's own tool call in alice's thread", postAs("dave", other), secrets...)
		// An allowed read in her thread does not make him its owner.
		read := map[string]any{"thread_id": "t1", "tool_call_id": "own_read", "action": "notes.read", "input": map[string]any{"id": "n1"}}
		notOwner(t, "dave's allowed read in alice's thread", postAs("dave", read), secrets...)

		// Alice resumes and executes; dave's repeat still learns nothing.
		done := h.call("alice", body)
		if done["status"] != "succeeded" || done["receipt"] != "rf_c_owned" {
			t.Fatalf("alice's resumed call: %v", done)
		}
		notOwner(t, "dave repeats a settled call", postAs("dave", body), secrets...)

		// Reads: dave may neither read her thread nor her proposal; her
		// approver bob sees the proposal, not her conversation.
		for _, path := range []string{"/v1/threads/t1", "/v1/proposals/" + pid, "/v1/proposals/" + pid + "/events",
			"/v1/proposals/" + pid + "?wait_seconds=0.1"} {
			notOwner(t, "dave GET "+path, h.do(req{method: "GET", path: path, token: "dave"}), secrets...)
		}
		notOwner(t, "bob GET her thread", h.do(req{method: "GET", path: "/v1/threads/t1", token: "bob"}), "c_owned", "rf_c_owned")
		h.must(200, req{method: "GET", path: "/v1/proposals/" + pid, token: "bob"})
		// Listing her thread is refused to dave, who may decide nothing in
		// it, and his own listing holds none of hers.
		notOwner(t, "dave lists her thread", h.do(req{method: "GET", path: "/v1/threads/t1/proposals", token: "dave"}), secrets...)
		for _, path := range []string{"/v1/proposals", "/v1/proposals?thread_id=t1"} {
			resp := h.must(200, req{method: "GET", path: path, token: "dave"})
			if got := ids(t, resp); len(got) != 0 {
				t.Errorf("dave lists %s: %v", path, got)
			}
		}
		// Nor may he act on it, or on the grant bob's approval left her.
		for _, verb := range []string{"approve", "reject", "cancel"} {
			notOwner(t, "dave "+verb, h.do(req{method: "POST", path: "/v1/proposals/" + pid + "/" + verb, token: "dave"}), "c_owned", "rf_c_owned")
		}
		notOwner(t, "dave resolve", h.do(req{method: "POST", path: "/v1/proposals/" + pid + "/resolve", token: "dave",
			body: map[string]any{"outcome": "failed", "note": "x"}}), "c_owned", "rf_c_owned")
		gs, _ := h.must(200, req{method: "GET", path: "/v1/grants", token: "alice"}).json(t)["grants"].([]any)
		if len(gs) != 1 {
			t.Fatalf("alice's grants: %v", gs)
		}
		grant, _ := gs[0].(map[string]any)["id"].(string)
		for _, path := range []string{"/v1/grants", "/v1/grants?thread_id=t1"} {
			if l, _ := h.must(200, req{method: "GET", path: path, token: "dave"}).json(t)["grants"].([]any); len(l) != 0 {
				t.Errorf("dave GET %s: %v", path, l)
			}
		}
		notOwner(t, "dave revokes her grant", h.do(req{method: "DELETE", path: "/v1/grants/" + grant, token: "dave"}), "c_owned")

		// Outcomes land in their own thread only: alice's conversation holds
		// hers; dave's thread (his own read made him its owner) holds none.
		mine := h.call("dave", map[string]any{"thread_id": "t_dave", "tool_call_id": "d_read", "action": "notes.read", "input": map[string]any{"id": "n2"}})
		if mine["status"] != "succeeded" {
			t.Fatalf("dave's read in his own thread: %v", mine)
		}
		th := h.must(200, req{method: "GET", path: "/v1/threads/t1", token: "alice"})
		if !bytes.Contains(th.body, []byte(pid)) || !bytes.Contains(th.body, []byte("rf_c_owned")) {
			t.Errorf("alice's thread lacks her outcome: %s", th.body)
		}
		dt := h.must(200, req{method: "GET", path: "/v1/threads/t_dave", token: "dave"})
		want(t, "t_dave's owner", dt.json(t)["thread"].(map[string]any)["owner"], "dave")
		for _, s := range secrets {
			if bytes.Contains(dt.body, []byte(s)) {
				t.Errorf("dave's thread holds alice's %q: %s", s, dt.body)
			}
		}
		// Dave's stream carried nothing of hers: its first event is his
		// own proposal, in his own thread.
		mineP := h.call("dave", map[string]any{"thread_id": "t_dave", "tool_call_id": "d_pay", "action": "payments.refund",
			"input": map[string]any{"amount": 1, "customer": "c_dave"}, "wait_seconds": 0})
		ev := next(t, daveStream)
		if ev.proposal(t)["id"] != mineP["proposal_id"] {
			t.Errorf("dave's first event: %s %s", ev.name, ev.data)
		}
		for _, s := range secrets {
			if bytes.Contains([]byte(ev.data), []byte(s)) {
				t.Errorf("dave's stream carries %q", s)
			}
		}
		// Alice cannot call into the thread dave took first.
		notOwner(t, "alice in dave's thread", postAs("alice", map[string]any{"thread_id": "t_dave", "tool_call_id": "a_in_d",
			"action": "notes.read", "input": map[string]any{"id": "n3"}}), "n2")
	})
}

// TestThreadOwnershipOfEvidence: dave repeating alice's two-phase call gets
// no confirmation id, and cannot spend hers: not in her thread, not in his
// own (where his input is his own to see). She still can, once.
func TestThreadOwnershipOfEvidence(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		body := refund("ev_1", "c_evid", 5)
		body["mode"] = "two_phase"
		first := h.call("alice", body)
		cid, _ := first["confirmation_id"].(string)
		pid, _ := first["proposal_id"].(string)
		if first["status"] != "confirmation_required" || cid == "" {
			t.Fatalf("alice's two-phase call: %v", first)
		}
		secrets := []string{cid, pid, "c_evid", "rf_c_evid"}
		notOwner(t, "dave repeats the two-phase call", h.do(req{method: "POST", path: "/v1/calls", token: "dave", body: body}), secrets...)
		h.decide(200, "bob", pid, "approve", nil, nil)

		// Dave presents her evidence: in her thread (a repeat, or a new tool
		// call), and in a thread of his own with the same input.
		spend := func(token, thread, toolCall string) *response {
			b := maps.Clone(body)
			b["thread_id"], b["tool_call_id"], b["evidence"] = thread, toolCall, cid
			return h.do(req{method: "POST", path: "/v1/calls", token: token, body: b})
		}
		notOwner(t, "dave spends her evidence on her tool call", spend("dave", "t1", "ev_1"), secrets...)
		notOwner(t, "dave spends her evidence on a new tool call in her thread", spend("dave", "t1", "ev_dave"), secrets...)
		own := spend("dave", "t_dave_ev", "ev_dave2")
		if own.status != 200 {
			t.Fatalf("dave's evidence in his own thread: %d %s", own.status, own.body)
		}
		// Her evidence does not authorise his call: it stays his own
		// two-phase call, asking for its own confirmation.
		if m := own.json(t); m["status"] == "succeeded" || m["executed"] == true {
			t.Errorf("dave's evidence in his own thread executed: %v", m)
		}
		for _, s := range []string{cid, pid, "rf_c_evid"} {
			if bytes.Contains(own.body, []byte(s)) {
				t.Errorf("dave's answer in his own thread reveals %q: %s", s, own.body)
			}
		}
		if p := h.must(200, req{method: "GET", path: "/v1/proposals/" + pid, token: "alice"}).json(t); p["status"] != "approved" {
			t.Fatalf("after dave's attempts alice's proposal is %v", p["status"])
		}
		// The evidence is still hers to spend, once.
		b := maps.Clone(body)
		b["evidence"] = cid
		if res := h.call("alice", b); res["status"] != "succeeded" || res["receipt"] != "rf_c_evid" {
			t.Fatalf("alice spends her evidence: %v", res)
		}
	})
}

// TestCallErrorOwnership: the store's refusal of a record in another
// actor's thread (the loser of a race for a new thread id) is the same 403
// as the engine's.
func TestCallErrorOwnership(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		fmt.Errorf("call: create proposal: %w", cstype.ErrNotThreadOwner),
		fmt.Errorf("call: %w", &countersign.ForbiddenError{Actor: "dave", Reason: "only the thread's owner may make calls in it"}),
	} {
		ae, ok := callError(err).(*apiError)
		if !ok || ae.status != 403 || ae.code != CodeForbidden {
			t.Errorf("callError(%v) = %v, want 403 FORBIDDEN", err, callError(err))
		}
	}
}

// TestAllowedWriteOverHTTP: an allowed write answers with its record (no
// approvers, no decisions, quorum 0) in the documented shape; repeating it
// replays the outcome with the same operation id and runs nothing; another
// actor's repeat is refused and runs nothing.
func TestAllowedWriteOverHTTP(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		thread := "t_memo"
		body := map[string]any{"thread_id": thread, "tool_call_id": "memo_1", "action": "memo.write", "input": map[string]any{"text": "hi"}}
		first := h.call("alice", body)
		p, _ := first["proposal"].(map[string]any)
		if first["status"] != "succeeded" || first["executed"] != true || p == nil {
			t.Fatalf("allowed write: %v", first)
		}
		if as, _ := p["approvers"].([]any); len(as) != 0 || p["quorum"] != float64(0) || len(p["decisions"].([]any)) != 0 || p["status"] != "succeeded" {
			t.Errorf("allowed write's record: approvers %v, quorum %v, decisions %v, status %v", p["approvers"], p["quorum"], p["decisions"], p["status"])
		}
		again := h.call("alice", body)
		if again["receipt"] != first["receipt"] || again["proposal"].(map[string]any)["operation_id"] != p["operation_id"] {
			t.Errorf("repeat: %v, want the recorded outcome of %v", again, first)
		}
		notOwner(t, "dave repeats the allowed write", h.do(req{method: "POST", path: "/v1/calls", token: "dave", body: body}),
			p["id"].(string), p["operation_id"].(string), first["receipt"].(string))
		if got := h.must(200, req{method: "GET", path: "/v1/threads/" + thread + "/proposals", token: "alice"}); len(ids(t, got)) != 1 {
			t.Errorf("the allowed write's record is not listed in its thread: %s", got.body)
		}
		if n, ok := memoWrites.Load(p["operation_id"]); !ok || n.(*atomic.Int64).Load() != 1 {
			t.Errorf("memo.write ran %v times for its operation, want once", n)
		}
	})
}
