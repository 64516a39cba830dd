package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/runhost"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/textdecision"
)

var (
	alice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	bob   = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
)

type harness struct {
	t        *testing.T
	store    store.Store
	engine   *countersign.Engine
	rt       *agent.Runtime
	executed atomic.Int64
}

func newHarness(t *testing.T, mode countersign.Mode, lang string, channels ...string) *harness {
	t.Helper()
	h := &harness{t: t, store: memstore.New(nil)}
	refund, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "payments.refund", Description: "Refund a payment",
		InputSchema: json.RawMessage(`{"type":"object","required":["amount","customer"],"properties":{"amount":{"type":"number"},"customer":{"type":"string"}}}`),
		Hooks: countersign.Hooks{Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			h.executed.Add(1)
			return &countersign.Receipt{ID: "rf_1"}, nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	vocab, err := textdecision.New(textdecision.Config{Language: lang})
	if err != nil {
		t.Fatal(err)
	}
	h.engine, err = countersign.New(countersign.Options{Store: h.store, Actions: []*countersign.Action{refund}, TextDecisions: vocab,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: mode, Channels: channels}}}})
	if err != nil {
		t.Fatal(err)
	}
	model, err := scripted.New(scripted.Config{Rules: []scripted.Rule{
		{Match: `(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)`, Say: "I'll ask for that refund.",
			Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`}},
		{Match: `.*`, Say: "I can refund payments."},
	}})
	if err != nil {
		t.Fatal(err)
	}
	h.rt, err = agent.NewRuntime(agent.RuntimeOptions{Engine: h.engine, Agents: []*agent.Agent{{Name: "demo", Model: model}}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) post(id countersign.Identity, text string, withAgent bool) *countersign.MessageAnswer {
	h.t.Helper()
	m := &countersign.Message{Identity: id, ThreadID: "th1", Text: text}
	if withAgent {
		m.Agent = "demo"
	}
	ans, err := h.engine.PostMessage(context.Background(), m)
	if err != nil {
		h.t.Fatalf("PostMessage(%q): %v", text, err)
	}
	return ans
}

func (h *harness) drive(r *cstype.Run) *cstype.Run {
	h.t.Helper()
	got, err := h.rt.Drive(context.Background(), r)
	if err != nil {
		h.t.Fatalf("Drive: %v", err)
	}
	return got
}

// resume claims the runs that are ready and drives them; it returns the
// one run it expects.
func (h *harness) resume() *cstype.Run {
	h.t.Helper()
	runs, err := h.engine.RunHost(runhost.Grant()).ClaimRuns(context.Background(), 10)
	if err != nil || len(runs) != 1 {
		h.t.Fatalf("ClaimRuns: %d runs, %v; want 1", len(runs), err)
	}
	return h.drive(runs[0])
}

func (h *harness) messages() []*cstype.Message {
	h.t.Helper()
	v, err := h.engine.Thread(context.Background(), alice, "th1")
	if err != nil {
		h.t.Fatal(err)
	}
	return v.Messages
}

func TestWaitModeParksAndResumesOnATextDecision(t *testing.T) {
	for _, tc := range []struct{ lang, yes string }{{"en", "yes"}, {"pt-BR", "sim"}, {"pt-BR", "YES!"}} {
		t.Run(tc.lang+"/"+tc.yes, func(t *testing.T) {
			h := newHarness(t, countersign.ModeWait, tc.lang)
			ans := h.post(alice, "refund 40 EUR to c_9", true)
			if ans.Run == nil || ans.IsDecision() {
				t.Fatalf("answer %+v, want a run", ans)
			}
			r := h.drive(ans.Run)
			if r.Status != cstype.RunParked || r.Awaiting == "" || len(r.ProposalIDs) != 1 || r.Steps != 1 {
				t.Fatalf("run %+v, want parked on its proposal", r)
			}
			// Parked: no other message is taken, but a decision is.
			if _, err := h.engine.PostMessage(context.Background(), &countersign.Message{Identity: alice, ThreadID: "th1", Text: "hello?", Agent: "demo"}); !errors.Is(err, countersign.ErrThreadBusy) {
				t.Fatalf("a message while parked: %v, want THREAD_BUSY", err)
			}
			dec := h.post(bob, tc.yes, false)
			if dec.Decision == nil || dec.Decision.Status != countersign.DecideApplied || dec.Reply == "" {
				t.Fatalf("text decision %+v", dec)
			}
			if d := dec.Decision.Proposal.Decisions; len(d) != 1 || d[0].Via != "text" || d[0].Actor != "bob" {
				t.Fatalf("decisions %+v, want bob's via text", d)
			}
			r = h.resume()
			if r.Status != cstype.RunFinished || h.executed.Load() != 1 {
				t.Fatalf("run %+v, %d executions; want finished after one", r, h.executed.Load())
			}
			var tool, last *cstype.Message
			for _, m := range h.messages() {
				if m.Role == cstype.RoleTool && m.RunID == r.ID {
					tool = m
				}
				if m.RunID == r.ID {
					last = m
				}
			}
			if tool == nil || !strings.Contains(string(tool.Result), `"status":"succeeded"`) {
				t.Fatalf("tool message %+v, want the call's success", tool)
			}
			if last == nil || last.Role != cstype.RoleAssistant || !strings.Contains(last.Text, "rf_1") {
				t.Fatalf("last message %+v, want the model's reply with the summary", last)
			}
			// The thread takes new messages again.
			h.post(alice, "thanks", true)
		})
	}
}

func TestRejectedCallGoesToTheModel(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	r := h.drive(h.post(alice, "refund 40 EUR to c_9", true).Run)
	if r.Status != cstype.RunParked {
		t.Fatalf("run %s, want parked", r.Status)
	}
	h.post(bob, "no", false)
	r = h.resume()
	if r.Status != cstype.RunFinished || h.executed.Load() != 0 {
		t.Fatalf("run %s, %d executions; want finished, none", r.Status, h.executed.Load())
	}
}

func TestIndependentCallEndsTheTurn(t *testing.T) {
	h := newHarness(t, countersign.ModeIndependent, "en")
	r := h.drive(h.post(alice, "refund 40 EUR to c_9", true).Run)
	if r.Status != cstype.RunFinished || r.Steps != 1 {
		t.Fatalf("run %+v, want finished after one model call", r)
	}
	msgs := h.messages()
	last := msgs[len(msgs)-1]
	if last.Role != cstype.RoleTool || !strings.Contains(string(last.Result), `"status":"pending"`) || !strings.Contains(string(last.Result), `"executed":false`) {
		t.Fatalf("last message %+v, want the pending receipt", last)
	}
}

func TestCrashedRunResumesWithoutExecutingTwice(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	r := h.drive(h.post(alice, "refund 40 EUR to c_9", true).Run)
	h.post(bob, "yes", false)
	runs, err := h.engine.RunHost(runhost.Grant()).ClaimRuns(context.Background(), 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("ClaimRuns: %v, %v", runs, err)
	}
	// The process that claimed it executes the call, then dies before it
	// records the result: the same call replays, and does not run again.
	st, err := h.engine.RunHost(runhost.Grant()).RunState(context.Background(), "acme", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var callID string
	for _, m := range st.Messages {
		for _, c := range m.ToolCalls {
			callID = c.ID
		}
	}
	if _, err := h.engine.Call(context.Background(), &countersign.Call{Identity: st.Identity, ThreadID: "th1", RunID: r.ID,
		ToolCallID: callID, FreshToolCallID: true, Action: "payments.refund", Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`)}); err != nil {
		t.Fatal(err)
	}
	if h.executed.Load() != 1 {
		t.Fatalf("%d executions, want 1", h.executed.Load())
	}
	// Its lease lapses; another process takes the run over.
	if _, err := h.store.UpdateRun(context.Background(), &store.UpdateRunParams{Tenant: "acme", ID: r.ID,
		Fence: cstype.Fence{Token: runs[0].Lease.Token, Generation: runs[0].Lease.Generation}, LeaseDuration: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	r = h.resume()
	if r.Status != cstype.RunFinished || h.executed.Load() != 1 {
		t.Fatalf("run %s, %d executions; want finished, still one", r.Status, h.executed.Load())
	}
}

func TestOnlyTheOwnerPosts(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	h.post(alice, "hello", false)
	_, err := h.engine.PostMessage(context.Background(), &countersign.Message{Identity: bob, ThreadID: "th1", Text: "hi there", Agent: "demo"})
	var fe *countersign.ForbiddenError
	if !errors.As(err, &fe) {
		t.Fatalf("bob posts in alice's thread: %v, want forbidden", err)
	}
	// A decision by someone who may not decide is forbidden too, and
	// decides nothing.
	r := h.drive(h.post(alice, "refund 40 EUR to c_9", true).Run)
	carol := countersign.Identity{Tenant: "acme", Actor: "carol"}
	if _, err := h.engine.PostMessage(context.Background(), &countersign.Message{Identity: carol, ThreadID: "th1", Text: "yes #" + r.Awaiting}); err == nil {
		t.Fatal("carol, who may not decide, decided by text")
	}
	if p, _ := h.engine.Proposal(context.Background(), alice, r.Awaiting); p.Status != cstype.StatusPending {
		t.Fatalf("proposal %s after a refused decision, want pending", p.Status)
	}
}

func TestMaxSteps(t *testing.T) {
	h := newHarness(t, countersign.ModeIndependent, "en")
	model, _ := scripted.New(scripted.Config{Rules: []scripted.Rule{{Match: `.*`, Say: "again",
		Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": 1, "customer": "c"}`}}}})
	rt, err := agent.NewRuntime(agent.RuntimeOptions{Engine: h.engine, Agents: []*agent.Agent{{Name: "demo", Model: model, MaxSteps: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rt.Drive(context.Background(), h.post(alice, "go", true).Run)
	if err != nil {
		t.Fatal(err)
	}
	// Independent: the turn ends with the receipt, within one step.
	if r.Status != cstype.RunFinished || r.Steps != 1 {
		t.Fatalf("run %+v", r)
	}
}

func TestTextDecisionNeedsTheTextChannel(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en", "api", "web")
	r := h.drive(h.post(alice, "refund 40 EUR to c_9", true).Run)
	_, err := h.engine.PostMessage(context.Background(), &countersign.Message{Identity: bob, ThreadID: "th1", Text: "yes"})
	var fe *countersign.ForbiddenError
	if !errors.As(err, &fe) {
		t.Fatalf("a text decision under a rule without the text channel: %v, want forbidden", err)
	}
	if p, _ := h.engine.Proposal(context.Background(), alice, r.Awaiting); p.Status != cstype.StatusPending {
		t.Fatalf("proposal %s, want pending", p.Status)
	}
	for _, m := range h.messages() {
		if m.Text == "yes" {
			t.Fatal("a refused decision was stored as a message")
		}
	}
}

func TestAssistantTextIsNeverADecision(t *testing.T) {
	h := newHarness(t, countersign.ModeWait, "en")
	model, _ := scripted.New(scripted.Config{Rules: []scripted.Rule{
		{Match: `(?i)refund`, Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": 1, "customer": "c"}`}},
		{Match: `.*`, Say: "yes"}}, AfterTool: "yes"})
	rt, _ := agent.NewRuntime(agent.RuntimeOptions{Engine: h.engine, Agents: []*agent.Agent{{Name: "demo", Model: model}}})
	r, err := rt.Drive(context.Background(), h.post(alice, "refund", true).Run)
	if err != nil || r.Status != cstype.RunParked {
		t.Fatalf("run %+v, %v", r, err)
	}
	if p, _ := h.engine.Proposal(context.Background(), alice, r.Awaiting); p.Status != cstype.StatusPending || len(p.Decisions) != 0 {
		t.Fatalf("the model's text decided: %+v", p.Decisions)
	}
}

// twoPhaseModel calls the refund on "refund" and on "go ahead", and
// answers a tool result with its status.
type twoPhaseModel struct{}

func (twoPhaseModel) Generate(_ context.Context, req *agent.Request) (*agent.Reply, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == agent.RoleTool {
		var out agent.ToolOutput
		_ = json.Unmarshal(last.Result, &out)
		return &agent.Reply{Text: out.Status}, nil
	}
	return &agent.Reply{ToolCalls: []agent.ToolCall{{ID: fmt.Sprintf("c%d", len(req.Messages)), Action: "payments.refund",
		Input: json.RawMessage(`{"amount":40,"customer":"c_9"}`)}}}, nil
}

func TestTwoPhaseRetriesWithTheEvidence(t *testing.T) {
	h := newHarness(t, countersign.ModeTwoPhase, "en")
	rt, err := agent.NewRuntime(agent.RuntimeOptions{Engine: h.engine, Agents: []*agent.Agent{{Name: "demo", Model: twoPhaseModel{}}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rt.Drive(context.Background(), h.post(alice, "refund 40 to c_9", true).Run)
	if err != nil || r.Status != cstype.RunFinished {
		t.Fatalf("run %+v, %v", r, err)
	}
	msgs := h.messages()
	if last := msgs[len(msgs)-1]; last.Text != "confirmation_required" {
		t.Fatalf("the model got %q, want confirmation_required", last.Text)
	}
	h.post(bob, "yes", false)
	r, err = rt.Drive(context.Background(), h.post(alice, "go ahead", true).Run)
	if err != nil || r.Status != cstype.RunFinished {
		t.Fatalf("run %+v, %v", r, err)
	}
	var last *cstype.Message
	for _, m := range h.messages() {
		if m.RunID == r.ID {
			last = m
		}
	}
	if last.Text != "succeeded" || h.executed.Load() != 1 {
		t.Fatalf("the retry got %q, %d executions; want succeeded once", last.Text, h.executed.Load())
	}
}
