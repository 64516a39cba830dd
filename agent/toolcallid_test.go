package agent_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/runhost"
)

// idModel calls the refund under the ids it is given, all in one reply, and
// answers a tool result with its status and code.
type idModel struct{ ids []string }

func (m idModel) Generate(_ context.Context, req *agent.Request) (*agent.Reply, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == agent.RoleTool {
		var out agent.ToolOutput
		_ = json.Unmarshal(last.Result, &out)
		return &agent.Reply{Text: out.Status + " " + out.Code}, nil
	}
	reply := &agent.Reply{}
	for _, id := range m.ids {
		reply.ToolCalls = append(reply.ToolCalls, agent.ToolCall{ID: id, Action: "payments.refund",
			Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`)})
	}
	return reply, nil
}

func (h *harness) runtime(m agent.Model) *agent.Runtime {
	h.t.Helper()
	rt, err := agent.NewRuntime(agent.RuntimeOptions{Engine: h.engine, Agents: []*agent.Agent{{Name: "demo", Model: m}}})
	if err != nil {
		h.t.Fatal(err)
	}
	return rt
}

// callsOf returns the tool calls of run's assistant messages and its tool
// messages.
func (h *harness) callsOf(runID string) (calls []cstype.ToolCall, results []*cstype.Message) {
	h.t.Helper()
	for _, m := range h.messages() {
		if m.RunID != runID {
			continue
		}
		calls = append(calls, m.ToolCalls...)
		if m.Role == cstype.RoleTool {
			results = append(results, m)
		}
	}
	return calls, results
}

func (h *harness) threadProposals() []*cstype.Proposal {
	h.t.Helper()
	page, err := h.engine.ThreadProposals(context.Background(), alice, "th1", countersign.ListParams{})
	if err != nil {
		h.t.Fatal(err)
	}
	return page.Proposals
}

var mintedCallID = regexp.MustCompile(`^call_[0-9a-f]{24}$`)

// TestProposalCarriesTheModelsToolCallID: the scripted model mints its
// ids, and the proposal, the assistant message's call and the tool
// message's answer all carry that same string.
func TestProposalCarriesTheModelsToolCallID(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	r := h.drive(h.post(alice, "refund 40 EUR to c_9", true).Run)
	if r.Status != cstype.RunParked {
		t.Fatalf("run %s, want parked", r.Status)
	}
	calls, _ := h.callsOf(r.ID)
	if len(calls) != 1 || !mintedCallID.MatchString(calls[0].ID) {
		t.Fatalf("calls %+v, want one with a minted id (call_ and 24 hex)", calls)
	}
	p, err := h.engine.Proposal(context.Background(), alice, r.Awaiting)
	if err != nil {
		t.Fatal(err)
	}
	if p.ToolCallID != calls[0].ID || p.RunID != r.ID {
		t.Fatalf("proposal tool_call_id %q run %q, want the model's %q in run %q", p.ToolCallID, p.RunID, calls[0].ID, r.ID)
	}
	h.post(bob, "yes", false)
	r = h.resume()
	_, results := h.callsOf(r.ID)
	if r.Status != cstype.RunFinished || len(results) != 1 || results[0].ToolCallID != calls[0].ID || results[0].ProposalID != p.ID {
		t.Fatalf("run %s, results %+v; want finished with the result of %q", r.Status, results, calls[0].ID)
	}

	// The next run's call gets an id of its own.
	r2 := h.drive(h.post(alice, "refund 41 EUR to c_9", true).Run)
	calls2, _ := h.callsOf(r2.ID)
	if len(calls2) != 1 || calls2[0].ID == calls[0].ID || !mintedCallID.MatchString(calls2[0].ID) {
		t.Fatalf("second run's calls %+v, want a new minted id", calls2)
	}
}

// TestToolCallIDReusedAcrossRuns: a model that calls under the id an
// earlier run of the thread used gets TOOL_CALL_ID_REUSED as the result,
// and nothing is replayed, proposed or executed.
func TestToolCallIDReusedAcrossRuns(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	rt := h.runtime(idModel{ids: []string{"dup_1"}})
	r, err := rt.Drive(context.Background(), h.post(alice, "refund 40 to c_9", true).Run)
	if err != nil || r.Status != cstype.RunParked {
		t.Fatalf("run %+v, %v; want parked", r, err)
	}
	h.post(bob, "yes", false)
	runs, err := h.engine.RunHost(runhost.Grant()).ClaimRuns(context.Background(), 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("ClaimRuns: %d, %v", len(runs), err)
	}
	if r, err = rt.Drive(context.Background(), runs[0]); err != nil || r.Status != cstype.RunFinished || h.executed.Load() != 1 {
		t.Fatalf("run %+v, %v, %d executions; want finished after one", r, err, h.executed.Load())
	}

	// The second run reuses the id: the first call's record is not its
	// own, so it is neither replayed nor executed again.
	r2, err := rt.Drive(context.Background(), h.post(alice, "refund 40 to c_9 again", true).Run)
	if err != nil || r2.Status != cstype.RunFinished {
		t.Fatalf("second run %+v, %v; want finished", r2, err)
	}
	_, results := h.callsOf(r2.ID)
	if len(results) != 1 || results[0].ToolCallID != "dup_1" || results[0].ProposalID != "" {
		t.Fatalf("second run's results %+v, want one for dup_1 naming no proposal", results)
	}
	var out agent.ToolOutput
	if err := json.Unmarshal(results[0].Result, &out); err != nil {
		t.Fatal(err)
	}
	if out.Status != "error" || out.Code != "TOOL_CALL_ID_REUSED" || out.Executed == nil || *out.Executed || out.ProposalID != "" {
		t.Fatalf("result %s, want the TOOL_CALL_ID_REUSED tool error", results[0].Result)
	}
	if h.executed.Load() != 1 || len(h.threadProposals()) != 1 || len(r2.ProposalIDs) != 0 {
		t.Fatalf("%d executions, %d proposals, run proposals %v; want the first call's only", h.executed.Load(), len(h.threadProposals()), r2.ProposalIDs)
	}
	// The model read the refusal.
	msgs := h.messages()
	if last := msgs[len(msgs)-1]; last.Role != cstype.RoleAssistant || last.Text != "error TOOL_CALL_ID_REUSED" {
		t.Fatalf("last message %+v, want the model's reply to the refusal", last)
	}
}

// TestToolCallIDOfACallOutsideRuns: an id that a call made without a run
// (POST /v1/calls) recorded in the thread is not a run's to replay: the
// engine refuses it, though the call is approved and a replay would run
// it.
func TestToolCallIDOfACallOutsideRuns(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	res, err := h.engine.Call(context.Background(), &countersign.Call{Identity: alice, ThreadID: "th1", ToolCallID: "ext_1",
		Action: "payments.refund", Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`), WaitTimeout: 1})
	if err != nil || res.Status != countersign.ResultPending {
		t.Fatalf("call: %+v, %v; want pending", res, err)
	}
	if _, err := h.engine.Decide(context.Background(), &countersign.Decision{Identity: bob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
		t.Fatal(err)
	}
	rt := h.runtime(idModel{ids: []string{"ext_1"}})
	r, err := rt.Drive(context.Background(), h.post(alice, "refund 40 to c_9", true).Run)
	if err != nil || r.Status != cstype.RunFinished {
		t.Fatalf("run %+v, %v; want finished", r, err)
	}
	_, results := h.callsOf(r.ID)
	if len(results) != 1 || results[0].ProposalID != "" {
		t.Fatalf("results %+v, want one naming no proposal", results)
	}
	var out agent.ToolOutput
	if err := json.Unmarshal(results[0].Result, &out); err != nil || out.Code != "TOOL_CALL_ID_REUSED" {
		t.Fatalf("result %s, %v; want TOOL_CALL_ID_REUSED", results[0].Result, err)
	}
	if p, _ := h.engine.Proposal(context.Background(), alice, res.ProposalID); h.executed.Load() != 0 || p.Status != cstype.StatusApproved {
		t.Fatalf("%d executions, proposal %s; want none, still approved", h.executed.Load(), p.Status)
	}
}

// TestToolCallIDEmptyOrTwiceInOneReply: a call without an id gets a minted
// one, which its proposal carries; two calls of one reply under one id fail
// the run before anything is called.
func TestToolCallIDEmptyOrTwiceInOneReply(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		h := newHarness(t, countersign.ModeWait, "en")
		r, err := h.runtime(idModel{ids: []string{""}}).Drive(context.Background(), h.post(alice, "refund", true).Run)
		if err != nil || r.Status != cstype.RunParked {
			t.Fatalf("run %+v, %v; want parked", r, err)
		}
		calls, _ := h.callsOf(r.ID)
		p, err := h.engine.Proposal(context.Background(), alice, r.Awaiting)
		if err != nil {
			t.Fatal(err)
		}
		if len(calls) != 1 || !mintedCallID.MatchString(calls[0].ID) || p.ToolCallID != calls[0].ID {
			t.Fatalf("calls %+v, proposal's %q; want one minted id on both", calls, p.ToolCallID)
		}
	})
	t.Run("twice", func(t *testing.T) {
		h := newHarness(t, countersign.ModeWait, "en")
		r, err := h.runtime(idModel{ids: []string{"c1", "c1"}}).Drive(context.Background(), h.post(alice, "refund", true).Run)
		if err != nil || r.Status != cstype.RunFailed || r.Error != `model: two tool calls with id "c1" in one reply` {
			t.Fatalf("run %+v, %v; want failed naming the id", r, err)
		}
		if n := len(h.threadProposals()); n != 0 {
			t.Fatalf("%d proposals, want none", n)
		}
	})
}

// TestToolCallIDReusedWithinARun: a later step of the same run that names
// the id its earlier step used is refused too, while a run's crash replay
// of the call it has not answered yet is not
// (TestCrashedRunResumesWithoutExecutingTwice).
func TestToolCallIDReusedWithinARun(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	rt := h.runtime(againModel{})
	r, err := rt.Drive(context.Background(), h.post(alice, "refund", true).Run)
	if err != nil || r.Status != cstype.RunParked {
		t.Fatalf("run %+v, %v; want parked", r, err)
	}
	h.post(bob, "yes", false)
	runs, err := h.engine.RunHost(runhost.Grant()).ClaimRuns(context.Background(), 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("ClaimRuns: %d, %v", len(runs), err)
	}
	if r, err = rt.Drive(context.Background(), runs[0]); err != nil || r.Status != cstype.RunFinished {
		t.Fatalf("run %+v, %v; want finished", r, err)
	}
	_, results := h.callsOf(r.ID)
	if len(results) != 2 {
		t.Fatalf("results %+v, want two", results)
	}
	var first, second agent.ToolOutput
	_ = json.Unmarshal(results[0].Result, &first)
	_ = json.Unmarshal(results[1].Result, &second)
	if first.Status != "succeeded" || second.Code != "TOOL_CALL_ID_REUSED" || h.executed.Load() != 1 || len(h.threadProposals()) != 1 {
		t.Fatalf("results %s then %s, %d executions, %d proposals; want succeeded, then reused, one of each",
			results[0].Result, results[1].Result, h.executed.Load(), len(h.threadProposals()))
	}
}

// againModel calls the refund as "same" until two tool results are in.
type againModel struct{}

func (againModel) Generate(_ context.Context, req *agent.Request) (*agent.Reply, error) {
	tools := 0
	for _, m := range req.Messages {
		if m.Role == agent.RoleTool {
			tools++
		}
	}
	if tools >= 2 {
		return &agent.Reply{Text: "done"}, nil
	}
	return &agent.Reply{ToolCalls: []agent.ToolCall{{ID: "same", Action: "payments.refund",
		Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`)}}}, nil
}

// TestRunParkedBeforeTheOneIdentityGoesOn: a run that parked on a proposal
// recorded under "RUN_ID/MODEL_ID" (before a call's id was the model's
// own) goes on with that proposal once it is decided: its approval
// executes once, and nothing is proposed again.
func TestRunParkedBeforeTheOneIdentityGoesOn(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	ctx := context.Background()
	r := h.post(alice, "refund", true).Run
	fence := cstype.Fence{Token: r.Lease.Token, Generation: r.Lease.Generation}
	// What the runtime wrote then: the reply, the call under the run's
	// prefix, the park.
	input := json.RawMessage(`{"amount":40,"customer":"c_9"}`)
	if _, err := h.engine.RunHost(runhost.Grant()).UpdateRun(ctx, &countersign.RunUpdate{Tenant: "acme", ID: r.ID, Fence: fence, Steps: 1,
		LeaseDuration: h.engine.LeaseDuration(), Messages: []*cstype.Message{{ID: "msg_old", Role: cstype.RoleAssistant,
			ToolCalls: []cstype.ToolCall{{ID: "call_1", Action: "payments.refund", Input: input}}}}}); err != nil {
		t.Fatal(err)
	}
	st, err := h.engine.RunHost(runhost.Grant()).RunState(ctx, "acme", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.engine.Call(ctx, &countersign.Call{Identity: st.Identity, ThreadID: "th1", RunID: r.ID, ToolCallID: r.ID + "/call_1",
		Action: "payments.refund", Input: input, WaitTimeout: 1})
	if err != nil || res.Status != countersign.ResultPending {
		t.Fatalf("call: %+v, %v", res, err)
	}
	if _, err := h.engine.RunHost(runhost.Grant()).UpdateRun(ctx, &countersign.RunUpdate{Tenant: "acme", ID: r.ID, Fence: fence, To: cstype.RunParked,
		Awaiting: res.ProposalID, ProposalIDs: []string{res.ProposalID}}); err != nil {
		t.Fatal(err)
	}
	h.post(bob, "yes", false)
	runs, err := h.engine.RunHost(runhost.Grant()).ClaimRuns(ctx, 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("ClaimRuns: %d, %v", len(runs), err)
	}
	if r, err = h.runtime(idModel{}).Drive(ctx, runs[0]); err != nil || r.Status != cstype.RunFinished {
		t.Fatalf("run %+v, %v; want finished", r, err)
	}
	_, results := h.callsOf(r.ID)
	if len(results) != 1 || results[0].ToolCallID != "call_1" || results[0].ProposalID != res.ProposalID {
		t.Fatalf("results %+v, want call_1's, of the parked proposal", results)
	}
	if h.executed.Load() != 1 || len(h.threadProposals()) != 1 {
		t.Fatalf("%d executions, %d proposals; want the parked proposal executed once", h.executed.Load(), len(h.threadProposals()))
	}
}
