package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/internal/runhost"
)

// chatHarness is a server with the demo's scripted agent as its default.
func chatHarness(t testing.TB, kind string) (*harness, *agent.Runtime) {
	t.Helper()
	return chatHarnessAt(t, kind, nil)
}

// chatHarnessAt is chatHarness on the clock now (nil: time.Now).
func chatHarnessAt(t testing.TB, kind string, now func() time.Time) (*harness, *agent.Runtime) {
	t.Helper()
	var rt *agent.Runtime
	h := newHarness(t, kind, harnessOptions{now: now, server: func(o *Options) {
		model, err := scripted.New(scripted.Config{Rules: []scripted.Rule{
			{Match: `(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)`, Say: "I'll ask for that refund.",
				Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`}},
			{Match: `.*`, Say: "I can refund payments."},
		}})
		if err != nil {
			t.Fatal(err)
		}
		rt, err = agent.NewRuntime(agent.RuntimeOptions{Engine: o.Engine, Agents: []*agent.Agent{{Name: "demo", Model: model}}, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		o.Agents, o.DefaultAgent = rt, "demo"
	}})
	return h, rt
}

func say(text string) map[string]any { return map[string]any{"text": text} }

func TestChatWithoutAnAgentStoresTheMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	res := h.must(202, req{method: "POST", path: "/v1/threads/t9/messages", token: "alice", body: say("hello")}).json(t)
	if res["run"] != nil || res["message"].(map[string]any)["role"] != "user" {
		t.Fatalf("answer %v, want the stored message and no run", res)
	}
	th := h.must(200, req{method: "GET", path: "/v1/threads/t9", token: "alice"}).json(t)
	if msgs := th["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["sender"] != "alice" {
		t.Fatalf("thread messages %v", msgs)
	}
	if runs := th["runs"].([]any); len(runs) != 0 {
		t.Fatalf("runs %v, want none", runs)
	}
}

func TestChatRunParksAndATextDecisionResumesIt(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h, rt := chatHarness(t, kind)
			res := h.must(200, req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: say("refund 40 EUR to c_9")}).json(t)
			run := res["run"].(map[string]any)
			if run["status"] != "parked" || len(run["proposal_ids"].([]any)) != 1 {
				t.Fatalf("run %v, want parked on one proposal", run)
			}
			msgs := res["messages"].([]any)
			if len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "user" || msgs[1].(map[string]any)["tool_calls"] == nil {
				t.Fatalf("messages %v, want the user's and the assistant's tool call", msgs)
			}
			// Busy while parked; nobody but the owner posts.
			if code := h.must(409, req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: say("hello?")}).errorCode(t); code != CodeThreadBusy {
				t.Fatalf("code %s, want THREAD_BUSY", code)
			}
			h.must(403, req{method: "POST", path: "/v1/threads/t1/messages", token: "dave", body: say("hello")})
			// bob, who may decide, answers in his own words: refused, and
			// told the words that decide; nothing is decided.
			okAnswer := h.must(403, req{method: "POST", path: "/v1/threads/t1/messages", token: "bob", body: say("ok")}).json(t)
			if msg, _ := okAnswer["error"].(map[string]any)["message"].(string); !strings.Contains(msg, `"yes", "approve" or "confirm" to approve`) || !strings.Contains(msg, `"no", "reject" or "deny" to reject`) {
				t.Fatalf("bob's \"ok\": %v, want the words that decide", okAnswer)
			}
			pid := run["proposal_ids"].([]any)[0].(string)
			if st := h.must(200, req{method: "GET", path: "/v1/proposals/" + pid, token: "bob"}).json(t)["status"]; st != "pending" {
				t.Fatalf("after bob's \"ok\" the proposal is %v", st)
			}
			// dave may not decide either.
			h.must(403, req{method: "POST", path: "/v1/threads/t1/messages", token: "dave", body: say("yes")})
			dec := h.must(200, req{method: "POST", path: "/v1/threads/t1/messages", token: "bob", body: say("yes")}).json(t)
			pd := dec["proposal_decision"].(map[string]any)
			if pd["status"] != "applied" || pd["proposal"].(map[string]any)["status"] != "approved" || dec["text"] == "" {
				t.Fatalf("decision %v", dec)
			}
			runs, err := h.engine.RunHost(runhost.Grant()).ClaimRuns(context.Background(), 4)
			if err != nil || len(runs) != 1 {
				t.Fatalf("ClaimRuns: %v, %v", runs, err)
			}
			if _, err := rt.Drive(context.Background(), runs[0]); err != nil {
				t.Fatal(err)
			}
			got := h.must(200, req{method: "GET", path: "/v1/threads/t1/runs/" + run["id"].(string), token: "alice"}).json(t)["run"].(map[string]any)
			if got["status"] != "finished" || got["ended_at"] == nil {
				t.Fatalf("run %v, want finished", got)
			}
			h.must(403, req{method: "GET", path: "/v1/threads/t1/runs/" + run["id"].(string), token: "bob"})
			h.must(404, req{method: "GET", path: "/v1/threads/t1/runs/run_nope", token: "alice"})
			// Cancelling a finished run answers it as it is.
			c := h.must(200, req{method: "POST", path: "/v1/threads/t1/runs/" + run["id"].(string) + "/cancel", token: "alice"}).json(t)
			if c["run"].(map[string]any)["status"] != "finished" {
				t.Fatalf("cancel of a finished run: %v", c)
			}
			th := h.must(200, req{method: "GET", path: "/v1/threads/t1", token: "alice"}).json(t)
			if runs := th["runs"].([]any); len(runs) != 1 {
				t.Fatalf("thread runs %v, want one", runs)
			}
		})
	}
}

func TestChatCancelParkedRun(t *testing.T) {
	t.Parallel()
	h, _ := chatHarness(t, "mem")
	run := h.must(200, req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: say("refund 40 EUR to c_9")}).json(t)["run"].(map[string]any)
	path := "/v1/threads/t1/runs/" + run["id"].(string) + "/cancel"
	h.must(403, req{method: "POST", path: path, token: "bob"})
	c := h.must(200, req{method: "POST", path: path, token: "alice"}).json(t)
	if c["run"].(map[string]any)["status"] != "cancelled" {
		t.Fatalf("cancel: %v", c)
	}
	// The thread is free again.
	h.must(200, req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: say("hello")})
}

func TestChatAmbiguousDecision(t *testing.T) {
	t.Parallel()
	h, _ := chatHarness(t, "mem")
	a, b := h.pending("c1", "c_1"), h.pending("c2", "c_2")
	res := h.must(200, req{method: "POST", path: "/v1/threads/t1/messages", token: "bob", body: say("yes")}).json(t)
	if res["proposal_decision"] != nil || len(res["pending"].([]any)) != 2 || !strings.Contains(res["text"].(string), a) {
		t.Fatalf("ambiguous answer %v, want both pending listed", res)
	}
	res = h.must(200, req{method: "POST", path: "/v1/threads/t1/messages", token: "bob", body: say("no #" + b)}).json(t)
	if pd := res["proposal_decision"].(map[string]any); pd["proposal"].(map[string]any)["status"] != "rejected" {
		t.Fatalf("decision by id: %v", res)
	}
}

func TestChatBadBodies(t *testing.T) {
	t.Parallel()
	h, _ := chatHarness(t, "mem")
	for name, tc := range map[string]struct {
		body    any
		status  int
		code    string
		path    string
		invalid bool
	}{
		"no text":      {map[string]any{}, 400, CodeInvalidBody, "text", true},
		"empty text":   {say(""), 400, CodeInvalidBody, "text", true},
		"huge text":    {say(strings.Repeat("a", 32<<10+1)), 400, CodeInvalidBody, "text", false},
		"unknown key":  {map[string]any{"text": "hi", "role": "assistant"}, 400, CodeInvalidBody, "", true},
		"text number":  {map[string]any{"text": 4}, 400, CodeInvalidBody, "text", true},
		"no agent":     {map[string]any{"text": "hi", "agent": "nope"}, 400, CodeInvalidBody, "agent", false},
		"not json":     {"yes", 400, CodeInvalidBody, "", true},
		"array":        {"[1]", 400, CodeInvalidBody, "", true},
		"bad agent ty": {map[string]any{"text": "hi", "agent": 3}, 400, CodeInvalidBody, "agent", true},
	} {
		resp := h.must(tc.status, req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: tc.body, invalid: tc.invalid})
		if code := resp.errorCode(t); code != tc.code {
			t.Errorf("%s: code %s, want %s", name, code, tc.code)
		}
		if tc.path != "" && !bytes.Contains(resp.body, []byte(`"path":"`+tc.path+`"`)) {
			t.Errorf("%s: %s does not name %s", name, resp.body, tc.path)
		}
	}
}

func TestChatStreamsTheRunAsAGUIEvents(t *testing.T) {
	t.Parallel()
	h, _ := chatHarness(t, "mem")
	resp := h.must(200, req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: say("refund 40 EUR to c_9"),
		header: map[string]string{"Accept": "text/event-stream"}})
	if ct := resp.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q", ct)
	}
	evs, err := event.Decode(bytes.NewReader(resp.body))
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, resp.body)
	}
	if err := event.Verify(evs); err != nil {
		t.Fatalf("the stream breaks AG-UI's rules: %v\n%s", err, resp.body)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type())
	}
	want := "RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
	fin := evs[len(evs)-1].(*event.RunFinished)
	if fin.Outcome == nil || fin.Outcome.Type != event.OutcomeInterrupt || len(fin.Outcome.Interrupts) != 1 {
		t.Fatalf("RUN_FINISHED %+v, want an interrupt", fin)
	}
	in := fin.Outcome.Interrupts[0]
	start := evs[0].(*event.RunStarted)
	if !strings.HasPrefix(in.ID, "prp_") || in.ToolCallID == "" || in.Message != "Refund 40 EUR to c_9" || fin.RunID != start.RunID || fin.ThreadID != "t1" {
		t.Fatalf("interrupt %+v", in)
	}
}
