package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
)

// Agent credentials of the tests: each acts for an actor of acme whose
// roles would let a person decide, operate or approve, to show that the
// kind, not the roles, is what refuses them.
func init() {
	identities["agent_alice"] = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}, Kind: countersign.KindAgent}
	identities["agent_bob"] = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}, Kind: countersign.KindAgent}
	identities["agent_carol"] = countersign.Identity{Tenant: "acme", Actor: "carol", Roles: []string{"operator"}, Kind: countersign.KindAgent}
}

// agentRefusal checks a 403 AGENT_CANNOT_DECIDE.
func agentRefusal(t *testing.T, what string, resp *response) {
	t.Helper()
	if resp.status != 403 || resp.errorCode(t) != CodeAgentCannotDecide {
		t.Fatalf("%s: %d %s, want 403 AGENT_CANNOT_DECIDE", what, resp.status, resp.body)
	}
}

// TestMe answers who a credential is, its kind included.
func TestMe(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	for token, want := range map[string]string{"alice": "human", "agent_alice": "agent", "dave": "human"} {
		m := h.must(200, req{method: "GET", path: "/v1/me", token: token}).json(t)
		if m["kind"] != want || m["tenant"] != "acme" || m["actor"] == "" {
			t.Errorf("%s: GET /v1/me = %v, want kind %s", token, m, want)
		}
		if _, ok := m["roles"].([]any); !ok {
			t.Errorf("%s: roles = %v, want an array", token, m["roles"])
		}
	}
	h.must(401, req{method: "GET", path: "/v1/me"})
}

// TestAgentNeverDecides walks docs/api.md Part 3's rule over HTTP on every
// store: an agent credential calls and reads its actor's threads, and is
// refused every decision-shaped act with 403 AGENT_CANNOT_DECIDE before the
// proposal is looked up, with nothing stored; the visibility its actor has
// as an approver or an operator never extends to it.
func TestAgentNeverDecides(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		// alice's agent calls an action whose approver is the requester:
		// the request is the agent's, the decision alice's.
		call := h.call("agent_alice", map[string]any{
			"thread_id": "t1", "tool_call_id": "k1", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0,
		})
		id, _ := call["proposal_id"].(string)
		if call["status"] != "pending" || id == "" {
			t.Fatalf("agent's call: %v", call)
		}
		if p := call["proposal"].(map[string]any); p["requester"] != "alice" || p["requester_kind"] != "agent" {
			t.Fatalf("proposal requester %v kind %v, want alice, agent", p["requester"], p["requester_kind"])
		}

		// The agent may not approve or reject, not even its own actor's
		// call, and an unknown id answers the same (nothing looked up).
		agentRefusal(t, "agent approves", h.do(req{method: "POST", path: "/v1/proposals/" + id + "/approve", token: "agent_alice", body: map[string]any{}}))
		agentRefusal(t, "agent rejects", h.do(req{method: "POST", path: "/v1/proposals/" + id + "/reject", token: "agent_alice", body: map[string]any{}}))
		agentRefusal(t, "agent approves an unknown id", h.do(req{method: "POST", path: "/v1/proposals/prp_nope/approve", token: "agent_alice", body: map[string]any{}}))
		// Nor answer in the conversation ("yes" would be a text decision).
		agentRefusal(t, "agent posts yes", h.do(req{method: "POST", path: "/v1/threads/t1/messages", token: "agent_alice", body: map[string]any{"text": "yes"}}))
		p := h.must(200, req{method: "GET", path: "/v1/proposals/" + id, token: "agent_alice"}).json(t)
		if p["status"] != "pending" || len(p["decisions"].([]any)) != 0 {
			t.Fatalf("after the agent's refusals: status %v decisions %v, want pending with none", p["status"], p["decisions"])
		}

		// alice herself decides; the decision records her kind.
		d := h.decide(200, "alice", id, "approve", map[string]any{}, nil)
		ds := d["proposal"].(map[string]any)["decisions"].([]any)
		if len(ds) != 1 || ds[0].(map[string]any)["actor_kind"] != "human" || ds[0].(map[string]any)["actor"] != "alice" {
			t.Fatalf("decisions = %v, want alice's as a human", ds)
		}

		// bob's agent: bob is finance and sees alice's refund; his agent
		// neither sees nor decides it.
		rid := h.pending("k2", "c_k2")
		h.must(200, req{method: "GET", path: "/v1/proposals/" + rid, token: "bob"})
		if r := h.do(req{method: "GET", path: "/v1/proposals/" + rid, token: "agent_bob"}); r.status != 403 && r.status != 404 {
			t.Errorf("bob's agent reads alice's refund: %d %s", r.status, r.body)
		}
		list := h.must(200, req{method: "GET", path: "/v1/proposals?status=pending", token: "agent_bob"}).json(t)
		if items := list["proposals"].([]any); len(items) != 0 {
			t.Errorf("bob's agent lists %d proposals, want none: %v", len(items), items)
		}
		agentRefusal(t, "bob's agent approves", h.do(req{method: "POST", path: "/v1/proposals/" + rid + "/approve", token: "agent_bob", body: map[string]any{}}))

		// carol's agent: carol is an operator; her agent is not.
		agentRefusal(t, "operator's agent reads the audit log", h.do(req{method: "GET", path: "/v1/audit", token: "agent_carol"}))
		agentRefusal(t, "operator's agent lists notifications", h.do(req{method: "GET", path: "/v1/notifications", token: "agent_carol"}))
		agentRefusal(t, "operator's agent resolves", h.do(req{method: "POST", path: "/v1/proposals/" + rid + "/resolve", token: "agent_carol",
			body: map[string]any{"outcome": "succeeded", "note": "checked"}}))

		// A grant: bob approves with remember; alice's agent sees it (its
		// actor requested it) and may not revoke it.
		h.decide(200, "bob", rid, "approve", map[string]any{"remember": "thread"}, nil)
		grants := h.must(200, req{method: "GET", path: "/v1/grants", token: "agent_alice"}).json(t)["grants"].([]any)
		if len(grants) == 0 {
			t.Fatal("alice's agent sees no grant of alice's")
		}
		gid := grants[0].(map[string]any)["id"].(string)
		agentRefusal(t, "agent revokes a grant", h.do(req{method: "DELETE", path: "/v1/grants/" + gid, token: "agent_alice"}))
		if g := h.must(200, req{method: "GET", path: "/v1/grants", token: "alice"}).json(t)["grants"].([]any); len(g) == 0 || g[0].(map[string]any)["revoked_at"] != nil {
			t.Errorf("after the agent's refusal the grant is %v", g)
		}

		// What an agent may do: cancel its actor's pending call.
		cid := h.call("agent_alice", map[string]any{
			"thread_id": "t1", "tool_call_id": "k3", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0,
		})["proposal_id"].(string)
		if c := h.must(200, req{method: "POST", path: "/v1/proposals/" + cid + "/cancel", token: "agent_alice", body: map[string]any{}}).json(t); c["proposal"].(map[string]any)["status"] != "cancelled" {
			t.Errorf("agent cancels its own call: %v", c)
		}
	})
}

// TestAgentCannotSignInOrAct checks the engine's refusals directly for
// the acts with no HTTP route of their own here (the inbox's sign-in and
// an AG-UI resume go through them).
func TestAgentCannotSignInOrAct(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	_, _, err := h.engine.StartSession(context.Background(), &countersign.StartSessionParams{
		Identity: identities["agent_alice"], Credential: "k", TTL: 60e9,
	})
	if _, ok := err.(*countersign.AgentCannotDecideError); !ok {
		t.Errorf("an agent signs in: %v, want *AgentCannotDecideError", err)
	}
	for _, act := range []countersign.Act{countersign.ActResume, countersign.ActAnswerElicitation, countersign.ActRegisterPasskey} {
		if err := h.engine.MayAct(identities["agent_alice"], act); err == nil {
			t.Errorf("an agent may %s", act)
		}
		if err := h.engine.MayAct(identities["alice"], act); err != nil {
			t.Errorf("a person may not %s: %v", act, err)
		}
	}
}

// TestAGUIAgentOnlyDeliversToolResults: on AG-UI an agent credential
// neither resumes an interrupt (its actor's own) nor posts a user message;
// each ends in RUN_ERROR AGENT_CANNOT_DECIDE and changes nothing.
func TestAGUIAgentOnlyDeliversToolResults(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	in := h.interrupted("ka1", "refund 40 EUR to c_agent")
	for name, input := range map[string]map[string]any{
		"a resume":       resumeInput("ka1", "r2", approved(in.ID)),
		"a user message": userInput("ka1", "r3", "m_agent", "yes"),
	} {
		evs := h.aguiStream(req{method: "POST", path: "/v1/agui", token: "agent_alice", body: input})
		if e, ok := evs[len(evs)-1].(*event.RunError); !ok || e.Code != CodeAgentCannotDecide {
			t.Fatalf("%s by an agent: %s, want RUN_ERROR AGENT_CANNOT_DECIDE", name, types(evs))
		}
		if p := h.must(200, req{method: "GET", path: "/v1/proposals/" + in.ID, token: "alice"}).json(t); p["status"] != "pending" {
			t.Fatalf("%s by an agent: the proposal is %v, want pending", name, p["status"])
		}
	}
}

// TestInvalidRemember: remember with a scope the rule does not allow, or
// "run" on a proposal made outside a run, is 400 INVALID_REMEMBER and
// decides nothing (a run grant of a call without a run would otherwise
// cover every call of the thread made outside a run).
func TestInvalidRemember(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		noRun := refund("ir1", "c_ir1", 40)
		delete(noRun, "run_id")
		id, _ := h.call("alice", noRun)["proposal_id"].(string)
		flaky, _ := h.call("alice", map[string]any{
			"thread_id": "t1", "tool_call_id": "ir2", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0,
		})["proposal_id"].(string)
		for _, c := range []struct{ who, id, scope string }{
			{"bob", id, "run"},         // the call named no run
			{"alice", flaky, "thread"}, // the rule allows no remembering
			{"alice", flaky, "run"},
		} {
			r := h.do(req{method: "POST", path: "/v1/proposals/" + c.id + "/approve", token: c.who, body: map[string]any{"remember": c.scope}})
			if r.status != 400 || r.errorCode(t) != CodeInvalidRemember {
				t.Fatalf("remember %s on %s: %d %s, want 400 INVALID_REMEMBER", c.scope, c.id, r.status, r.body)
			}
			if p := h.must(200, req{method: "GET", path: "/v1/proposals/" + c.id, token: "alice"}).json(t); p["status"] != "pending" || len(p["decisions"].([]any)) != 0 {
				t.Fatalf("after INVALID_REMEMBER: %v %v", p["status"], p["decisions"])
			}
		}
		// The scope the proposal can have is taken.
		h.decide(200, "bob", id, "approve", map[string]any{"remember": "thread"}, nil)
	})
}

// TestAuditActorKinds: each audit event records the kind of credential
// behind it (docs/api.md Part 3), over HTTP on every store: an agent's call is
// created by an agent, a person's approval is a human's, the agent's
// cancellation an agent's, an operator's resolution a human's; the events
// no credential is behind (a claim, a settlement) have no actor_kind member
// at all, not null. The chain as GET /v1/audit answers it, mixing both,
// verifies as it is, and a proposal's trail shows the same kinds.
func TestAuditActorKinds(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		body := map[string]any{"thread_id": "t1", "tool_call_id": "ak1", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0}
		id, _ := h.call("agent_alice", body)["proposal_id"].(string)
		if id == "" {
			t.Fatal("the agent's call made no proposal")
		}
		h.decide(200, "alice", id, "approve", map[string]any{}, nil)
		// The agent runs the approved call: it fails uncertainly (unknown),
		// and an operator resolves it.
		if res := h.call("agent_alice", body); res["status"] != "unknown" {
			t.Fatalf("the agent's run of the approved call: %v, want unknown", res["status"])
		}
		h.must(200, req{method: "POST", path: "/v1/proposals/" + id + "/resolve", token: "carol", body: map[string]any{"outcome": "succeeded", "note": "seen"}})
		cid, _ := h.call("agent_alice", map[string]any{
			"thread_id": "t1", "tool_call_id": "ak2", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0,
		})["proposal_id"].(string)
		h.must(200, req{method: "POST", path: "/v1/proposals/" + cid + "/cancel", token: "agent_alice", body: map[string]any{}})
		hid := h.pending("ak3", "c_ak3") // alice's own call, as a person

		want := map[string]map[string]string{ // proposal, event type: kind ("" for none)
			id:  {"proposal.created": "agent", "proposal.decided": "human", "proposal.claimed": "", "proposal.settled": "", "proposal.resolved": "human"},
			cid: {"proposal.created": "agent", "proposal.cancelled": "agent"},
			hid: {"proposal.created": "human"},
		}
		evs, err := h.store.ListEvents(t.Context(), &store.ListEventsParams{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		h.runSealer()
		var whole auditAnswer
		for whole = h.audit("carol", ""); len(whole.Events) < len(evs); whole = h.audit("carol", "") {
			select {
			case <-t.Context().Done():
				t.Fatalf("the chain holds %d events, want %d", len(whole.Events), len(evs))
			case <-time.After(5 * time.Millisecond):
			}
		}
		var v auditchain.Verifier
		seen := map[string]map[string]bool{}
		for _, raw := range whole.Events {
			if err := v.Line(raw); err != nil {
				t.Fatalf("verify the answer: %v", err)
			}
			var e map[string]any
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			pid, typ := e["proposal_id"].(string), e["type"].(string)
			kinds, ok := want[pid]
			if !ok {
				continue
			}
			wk, ok := kinds[typ]
			if !ok {
				t.Errorf("unexpected event %s", raw)
				continue
			}
			if seen[pid] == nil {
				seen[pid] = map[string]bool{}
			}
			seen[pid][typ] = true
			got, present := e["actor_kind"]
			switch {
			case wk == "" && present:
				t.Errorf("%s of %s has actor_kind %v, want the member absent: %s", typ, pid, got, raw)
			case wk != "" && got != wk:
				t.Errorf("%s of %s has actor_kind %v, want %s: %s", typ, pid, got, wk, raw)
			}
		}
		if _, err := v.Finish(); err != nil {
			t.Fatal(err)
		}
		for pid, kinds := range want {
			for typ := range kinds {
				if !seen[pid][typ] {
					t.Errorf("the chain has no %s of %s", typ, pid)
				}
			}
		}
		// A proposal's trail shows the kinds too.
		trail := h.must(200, req{method: "GET", path: "/v1/proposals/" + cid + "/events", token: "alice"}).json(t)["events"].([]any)
		if len(trail) != 2 || trail[0].(map[string]any)["actor_kind"] != "agent" || trail[1].(map[string]any)["actor_kind"] != "agent" {
			t.Errorf("the cancelled call's trail = %v, want created and cancelled by an agent", trail)
		}
	})
}
