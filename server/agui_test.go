package server

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/agui/event"
)

// aguiHarness is a server whose default agent is the demo's scripted one,
// under a policy where a thread's owner approves their own refunds (so
// that the owner, who alone runs on a thread, may resume an interrupt), and
// whose agent runtime's Work loop resumes parked runs.
func aguiHarness(t testing.TB) *harness { return aguiHarnessAt(t, nil) }

// aguiHarnessAt is aguiHarness on the clock now (nil: time.Now).
func aguiHarnessAt(t testing.TB, now func() time.Time) *harness {
	t.Helper()
	return aguiHarnessOn(t, "mem", harnessOptions{now: now})
}

// aguiHarnessOn is aguiHarness on a store of kind, with ho's clock and
// store.
func aguiHarnessOn(t testing.TB, kind string, ho harnessOptions) *harness {
	t.Helper()
	var rt *agent.Runtime
	h := newHarness(t, kind, harnessOptions{now: ho.now, store: ho.store,
		engine: func(o *countersign.Options) {
			o.Policy = &countersign.Policy{Rules: []countersign.Rule{
				{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"requester"}},
				// A memo is bob's (finance) to approve, not its requester's.
				{Match: "memo.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}},
			}}
		},
		server: func(o *Options) {
			model, err := scripted.New(scripted.Config{Rules: []scripted.Rule{
				// A refund to any text at all, invisible characters included.
				{Match: `^pay (?P<amount>\d+) to (?P<customer>.+)$`,
					Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`}},
				{Match: `(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)`, Say: "I'll ask for that refund.",
					Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`}},
				{Match: `(?i)^memo (?P<text>\w+)`, Call: &scripted.Call{Action: "memo.write", Input: `{"text": "{text}"}`}},
				{Match: `(?i)weather in (?P<city>\w+)`, Say: "Let me look.",
					Call: &scripted.Call{ClientTool: "get_weather", Input: `{"city": "{city}"}`}},
				{Match: `.*`, Say: "I can refund payments."},
			}, AfterTool: "Done: {summary}"})
			if err != nil {
				t.Fatal(err)
			}
			rt, err = agent.NewRuntime(agent.RuntimeOptions{Engine: o.Engine, Agents: []*agent.Agent{{Name: "demo", Model: model}}, Logger: discard()})
			if err != nil {
				t.Fatal(err)
			}
			o.Agents, o.DefaultAgent = rt, "demo"
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Work(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// runAGUI posts a RunAgentInput as token and returns the events, checked
// against AG-UI's ordering rules.
func (h *harness) runAGUI(token string, input map[string]any) []event.Event {
	h.t.Helper()
	return h.aguiStream(req{method: "POST", path: "/v1/agui", token: token, body: input})
}

// aguiStream is runAGUI for any request (one the OpenAPI document does not
// allow, marked invalid).
func (h *harness) aguiStream(r req) []event.Event {
	h.t.Helper()
	resp := h.must(200, r)
	if ct := resp.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		h.t.Fatalf("Content-Type %q", ct)
	}
	evs, err := event.Decode(bytes.NewReader(resp.body))
	if err != nil {
		h.t.Fatalf("decode: %v\n%s", err, resp.body)
	}
	if err := event.Verify(evs); err != nil {
		h.t.Fatalf("the stream breaks AG-UI's rules: %v\n%s", err, resp.body)
	}
	return evs
}

func types(evs []event.Event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type())
	}
	return strings.Join(out, " ")
}

func userInput(thread, run, msgID, text string) map[string]any {
	return map[string]any{"threadId": thread, "runId": run,
		"messages": []any{map[string]any{"id": msgID, "role": "user", "content": text}}}
}

func TestAGUIInterruptAndResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		resume  map[string]any
		outcome string
	}{
		{"approved", map[string]any{"status": "resolved", "payload": map[string]any{"approved": true}}, `"status":"succeeded"`},
		{"rejected", map[string]any{"status": "resolved", "payload": map[string]any{"approved": false, "reason": "no"}}, `"status":"rejected"`},
		{"cancelled", map[string]any{"status": "cancelled"}, `"status":"rejected"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := aguiHarness(t)
			evs := h.runAGUI("alice", userInput("ag1", "client_run_1", "m1", "refund 40 EUR to c_9"))
			start, fin := evs[0].(*event.RunStarted), evs[len(evs)-1].(*event.RunFinished)
			if start.ThreadID != "ag1" || start.RunID != "client_run_1" || fin.RunID != "client_run_1" {
				t.Fatalf("RUN_STARTED/RUN_FINISHED must echo the input's ids: %+v %+v", start, fin)
			}
			if fin.Outcome == nil || fin.Outcome.Type != event.OutcomeInterrupt || len(fin.Outcome.Interrupts) != 1 {
				t.Fatalf("events %s, outcome %+v: want an interrupt", types(evs), fin.Outcome)
			}
			in := fin.Outcome.Interrupts[0]
			resume := map[string]any{"interruptId": in.ID}
			for k, v := range tc.resume {
				resume[k] = v
			}
			next := map[string]any{"threadId": "ag1", "runId": "client_run_2",
				"messages": []any{map[string]any{"id": "m1", "role": "user", "content": "refund 40 EUR to c_9"}},
				"resume":   []any{resume}}
			evs = h.runAGUI("alice", next)
			got := types(evs)
			if !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT") || !strings.HasSuffix(got, "RUN_FINISHED") {
				t.Fatalf("resumed stream %s, want the original call's result first and a finish", got)
			}
			res := evs[1].(*event.ToolCallResult)
			if res.ToolCallID != in.ToolCallID || !strings.Contains(res.Content, tc.outcome) {
				t.Fatalf("TOOL_CALL_RESULT %+v, want %s on call %s", res, tc.outcome, in.ToolCallID)
			}
			if fin := evs[len(evs)-1].(*event.RunFinished); fin.Outcome.Type != event.OutcomeSuccess || fin.RunID != "client_run_2" {
				t.Fatalf("RUN_FINISHED %+v", fin)
			}
			p, err := h.engine.Proposal(context.Background(), identities["alice"], in.ID)
			if err != nil || len(p.Decisions) != 1 || p.Decisions[0].Via != "agui" {
				t.Fatalf("decisions %+v (%v), want one via agui", p.Decisions, err)
			}
		})
	}
}

func TestAGUIResumeRefusals(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	evs := h.runAGUI("alice", userInput("ag2", "r1", "m1", "refund 40 EUR to c_9"))
	in := evs[len(evs)-1].(*event.RunFinished).Outcome.Interrupts[0]
	for name, tc := range map[string]struct {
		token  string
		resume map[string]any
		code   string
	}{
		"bad payload":      {"alice", map[string]any{"interruptId": in.ID, "status": "resolved", "payload": map[string]any{"approve": true}}, "INVALID_RESUME"},
		"no payload":       {"alice", map[string]any{"interruptId": in.ID, "status": "resolved"}, "INVALID_RESUME"},
		"bad remember":     {"alice", map[string]any{"interruptId": in.ID, "status": "resolved", "payload": map[string]any{"approved": true, "remember": "forever"}}, "INVALID_RESUME"},
		"unknown id":       {"alice", map[string]any{"interruptId": "prp_nope", "status": "cancelled"}, "INVALID_RESUME"},
		"another's thread": {"bob", map[string]any{"interruptId": in.ID, "status": "resolved", "payload": map[string]any{"approved": true}}, "FORBIDDEN"},
	} {
		evs := h.runAGUI(tc.token, map[string]any{"threadId": "ag2", "runId": "r2", "messages": []any{}, "resume": []any{tc.resume}})
		re, ok := evs[len(evs)-1].(*event.RunError)
		if !ok || re.Code != tc.code {
			t.Errorf("%s: events %s, last %+v; want RUN_ERROR %s", name, types(evs), evs[len(evs)-1], tc.code)
		}
	}
	if p, _ := h.engine.Proposal(context.Background(), identities["alice"], in.ID); len(p.Decisions) != 0 {
		t.Fatalf("a refused resume decided: %+v", p.Decisions)
	}
}

func TestAGUITextDecisionIsAShortRun(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	evs := h.runAGUI("alice", userInput("ag3", "r1", "m1", "refund 40 EUR to c_9"))
	in := evs[len(evs)-1].(*event.RunFinished).Outcome.Interrupts[0]
	evs = h.runAGUI("alice", map[string]any{"threadId": "ag3", "runId": "r2", "messages": []any{
		map[string]any{"id": "m1", "role": "user", "content": "refund 40 EUR to c_9"},
		map[string]any{"id": "m2", "role": "user", "content": []any{map[string]any{"type": "text", "text": "yes"}}},
	}})
	if got := types(evs); !strings.HasPrefix(got, "RUN_STARTED CUSTOM TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED") {
		t.Fatalf("events %s, want a short run", got)
	}
	c := evs[1].(*event.Custom)
	if c.Name != event.CustomActionProposalDecision {
		t.Fatalf("CUSTOM %+v", c)
	}
	p, _ := h.engine.Proposal(context.Background(), identities["alice"], in.ID)
	if len(p.Decisions) != 1 || p.Decisions[0].Via != "text" {
		t.Fatalf("decisions %+v, want one via text", p.Decisions)
	}
}

func TestAGUIBadInput(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	for name, tc := range map[string]struct {
		body any
		code string
	}{
		"unknown field": {map[string]any{"threadId": "t", "runId": "r", "messages": []any{}, "extra": 1}, CodeInvalidBody},
		"no thread":     {map[string]any{"runId": "r", "messages": []any{}}, CodeInvalidBody},
		"not an object": {`[]`, CodeInvalidBody},
	} {
		if code := h.must(400, req{method: "POST", path: "/v1/agui", token: "alice", body: tc.body, invalid: true}).errorCode(t); code != tc.code {
			t.Errorf("%s: %s, want %s", name, code, tc.code)
		}
	}
	h.must(404, req{method: "POST", path: "/v1/agui/nobody", token: "alice", body: userInput("t", "r", "m", "hi")})
	// No new user message: a RUN_ERROR, nothing stored.
	evs := h.runAGUI("alice", map[string]any{"threadId": "ag4", "runId": "r", "messages": []any{}})
	if re, ok := evs[len(evs)-1].(*event.RunError); !ok || re.Code != "INVALID_INPUT" {
		t.Fatalf("events %s, want RUN_ERROR INVALID_INPUT", types(evs))
	}
}

// A proposal decided elsewhere meanwhile: the resume takes the decision
// that stands, and streams the continuation that already ran.
func TestAGUIResumeAfterADecisionElsewhere(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	evs := h.runAGUI("alice", userInput("ag5", "r1", "m1", "refund 40 EUR to c_9"))
	in := evs[len(evs)-1].(*event.RunFinished).Outcome.Interrupts[0]
	h.must(200, req{method: "POST", path: "/v1/proposals/" + in.ID + "/approve", token: "alice"})
	evs = h.runAGUI("alice", map[string]any{"threadId": "ag5", "runId": "r2", "messages": []any{},
		"resume": []any{map[string]any{"interruptId": in.ID, "status": "cancelled"}}})
	got := types(evs)
	if !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT") {
		t.Fatalf("events %s, want the continuation", got)
	}
	if res := evs[1].(*event.ToolCallResult); !strings.Contains(res.Content, `"status":"succeeded"`) {
		t.Fatalf("TOOL_CALL_RESULT %+v, want the approval that stands", res)
	}
	p, _ := h.engine.Proposal(context.Background(), identities["alice"], in.ID)
	if len(p.Decisions) != 1 || p.Decisions[0].Via != "api" {
		t.Fatalf("decisions %+v, want only the API's", p.Decisions)
	}
}

// An interrupt resumed after its deadline: RUN_ERROR INTERRUPT_EXPIRED,
// and the proposal is expired; a cancelled resume of it is taken, and the
// run goes on with the expiry.
func TestAGUIExpiredInterrupt(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	h := aguiHarnessAt(t, func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	evs := h.runAGUI("alice", userInput("ag6", "r1", "m1", "refund 40 EUR to c_9"))
	in := evs[len(evs)-1].(*event.RunFinished).Outcome.Interrupts[0]
	skew.Store(int64(time.Hour))
	evs = h.runAGUI("alice", map[string]any{"threadId": "ag6", "runId": "r2", "messages": []any{},
		"resume": []any{map[string]any{"interruptId": in.ID, "status": "resolved", "payload": map[string]any{"approved": true}}}})
	if re, ok := evs[len(evs)-1].(*event.RunError); !ok || re.Code != "INTERRUPT_EXPIRED" {
		t.Fatalf("events %s, want RUN_ERROR INTERRUPT_EXPIRED", types(evs))
	}
	evs = h.runAGUI("alice", map[string]any{"threadId": "ag6", "runId": "r3", "messages": []any{},
		"resume": []any{map[string]any{"interruptId": in.ID, "status": "cancelled"}}})
	got := types(evs)
	if !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT") || !strings.Contains(evs[1].(*event.ToolCallResult).Content, `"status":"expired"`) {
		t.Fatalf("events %s, want the continuation with the expiry", got)
	}
}

// TestAGUIInterruptMessageIsPlainText: a refund whose customer holds a
// right-to-left override, a zero-width space, an ANSI escape, a tag
// character and a C1 control parks on an interrupt whose message (the
// title an approver reads) shows them as \u{XXXX}; the proposal in its
// metadata, for programs, keeps the input exact.
func TestAGUIInterruptMessageIsPlainText(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	customer := "c_\u202Efdp.exe\u200B\x1b[2J\U000E0041\u0085"
	evs := h.runAGUI("alice", userInput("ag_plain", "run_1", "m1", "pay 40 to "+customer))
	fin := evs[len(evs)-1].(*event.RunFinished)
	if fin.Outcome == nil || fin.Outcome.Type != event.OutcomeInterrupt || len(fin.Outcome.Interrupts) != 1 {
		t.Fatalf("events %s, outcome %+v: want an interrupt", types(evs), fin.Outcome)
	}
	in := fin.Outcome.Interrupts[0]
	if want := `Refund 40 EUR to c_\u{202E}fdp.exe\u{200B}\u{001B}[2J\u{E0041}\u{0085}`; in.Message != want {
		t.Errorf("interrupt message %q, want %q", in.Message, want)
	}
	p, err := h.engine.Proposal(context.Background(), identities["alice"], in.ID)
	if err != nil || !strings.Contains(p.Confirmation.Title, customer) {
		t.Fatalf("the stored title %q (%v) must stay exact", p.Confirmation.Title, err)
	}
	wire, _ := in.Metadata["proposal"].(map[string]any)
	input, _ := wire["input"].(map[string]any)
	if input["customer"] != customer {
		t.Errorf("metadata.proposal.input.customer %q, want the exact %q", input["customer"], customer)
	}
}
