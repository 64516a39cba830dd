package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/countersign/countersign/store"
)

// testClientTools pins what client tools need of a store: a run keeps the
// tools its caller executes, an assistant message keeps which of its calls
// are the caller's, and a post stores the results of those calls before its
// message, in one write, under the same conditions.
func testClientTools(t *testing.T, newStore Factory) {
	weather := []store.ClientTool{
		{Name: "get_weather", Description: "The weather in a city.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		{Name: "confirm_address"},
	}

	// callClient runs the thread's run to a model message calling the
	// client tool, and finishes it, as the runtime does.
	callClient := func(fx *fixture, r *store.Run, callID string) {
		fx.t.Helper()
		_, err := fx.store.UpdateRun(fx.ctx, &store.UpdateRunParams{Tenant: tenant, ID: r.ID, Fence: runFence(r), Steps: 1, To: store.RunFinished,
			Messages: []*store.Message{{ID: uniqueID("msg"), Role: store.RoleAssistant, Text: "Let me look.", ToolCalls: []store.ToolCall{
				{ID: callID, Action: "get_weather", Input: json.RawMessage(`{"city":"Lisbon"}`), Client: true},
				{ID: callID + "_server", Action: "payments.refund", Input: json.RawMessage(`{}`)},
			}}}})
		if err != nil {
			fx.t.Fatal(err)
		}
	}
	// started starts a run offered the client tools on a new thread.
	started := func(fx *fixture, th, text string) *store.Run {
		fx.t.Helper()
		run := newRun()
		run.ClientTools = weather
		return fx.post(th, requester, text, run).Run
	}
	result := func(th, callID, content string) *store.Message {
		return &store.Message{ID: uniqueID("msg"), Tenant: tenant, ThreadID: th, Role: store.RoleTool, ToolCallID: callID,
			Result: json.RawMessage(content), Text: "sunny", Sender: requester}
	}

	t.Run("RunKeepsItsClientTools", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := started(fx, "t-ct", "weather?")
		for name, got := range map[string]*store.Run{"posted": r, "read": fx.getRun(r.ID)} {
			if len(got.ClientTools) != 2 || got.ClientTools[0].Name != "get_weather" || got.ClientTools[0].Description != "The weather in a city." ||
				!jsonEqual(got.ClientTools[0].Parameters, weather[0].Parameters) || got.ClientTools[1].Name != "confirm_address" ||
				len(got.ClientTools[1].Parameters) != 0 {
				t.Fatalf("%s run's client tools %+v, want %+v", name, got.ClientTools, weather)
			}
		}
		// A claim after a lapsed lease and a list keep them too.
		runs, err := fx.store.ListRuns(fx.ctx, &store.ListRunsParams{Tenant: tenant, ThreadID: "t-ct"})
		if err != nil || len(runs) != 1 || len(runs[0].ClientTools) != 2 {
			t.Fatalf("ListRuns: %v, %+v", err, runs)
		}
		fx.clock.Advance(2 * longLease)
		claimed := fx.claimRuns("w2")
		if len(claimed) != 1 || len(claimed[0].ClientTools) != 2 || claimed[0].ClientTools[1].Name != "confirm_address" {
			t.Fatalf("claimed %+v", claimed)
		}
		// A run without client tools has none.
		if other := fx.post("t-ct-none", requester, "x", newRun()).Run; len(fx.getRun(other.ID).ClientTools) != 0 {
			t.Fatal("a run started without client tools has some")
		}
	})

	t.Run("ResultsBeforeTheMessage", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := started(fx, "t-res", "weather in Lisbon?")
		callClient(fx, r, "call_w")
		msgs := fx.messages("t-res")
		a := msgs[1]
		if len(a.ToolCalls) != 2 || !a.ToolCalls[0].Client || a.ToolCalls[1].Client {
			t.Fatalf("assistant tool calls %+v, want the first the client's", a.ToolCalls)
		}
		if p := store.PendingClientCalls(msgs); len(p) != 1 || p[0].ID != "call_w" {
			t.Fatalf("pending client calls %+v, want call_w", p)
		}
		// The result, then a user message, starting the next run.
		p := fx.postParams("t-res", requester, "and tomorrow?", newRun())
		p.Results = []*store.Message{result("t-res", "call_w", `{"sky":"sunny"}`)}
		res := fx.mustPost(p)
		if len(res.Results) != 1 || res.Results[0].ID != p.Results[0].ID || res.Run == nil || res.Thread.RunID != res.Run.ID {
			t.Fatalf("post result %+v", res)
		}
		msgs = fx.messages("t-res")
		if len(msgs) != 4 || msgs[2].Role != store.RoleTool || msgs[2].ToolCallID != "call_w" || msgs[2].Sender != requester ||
			msgs[2].RunID != "" || !jsonEqual(msgs[2].Result, json.RawMessage(`{"sky":"sunny"}`)) || msgs[2].Text != "sunny" ||
			msgs[3].Role != store.RoleUser || msgs[3].Text != "and tomorrow?" {
			t.Fatalf("messages after the post %+v", msgs)
		}
		requireTime(t, "result created_at", msgs[2].CreatedAt, fx.clock.Now())
		if p := store.PendingClientCalls(msgs); len(p) != 0 {
			t.Fatalf("pending client calls %+v after the result", p)
		}
	})

	t.Run("ResultsAlone", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := started(fx, "t-alone", "weather?")
		callClient(fx, r, "call_a")
		p := fx.postParams("t-alone", requester, "", newRun())
		p.Message = nil
		p.Results = []*store.Message{result("t-alone", "call_a", `"sunny"`)}
		res, err := fx.store.PostMessage(fx.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Message != nil || len(res.Results) != 1 || res.Run == nil || res.Run.ThreadID != "t-alone" || res.Run.Tenant != tenant {
			t.Fatalf("results-only post %+v", res)
		}
		if msgs := fx.messages("t-alone"); len(msgs) != 3 || msgs[2].ToolCallID != "call_a" {
			t.Fatalf("messages %+v", msgs)
		}
	})

	t.Run("ResultsRefusedWithTheirMessage", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		r := started(fx, "t-busy", "weather?")
		// While the run holds the thread, or from someone else, nothing
		// of the post is stored.
		p := fx.postParams("t-busy", requester, "more", nil)
		p.Results = []*store.Message{result("t-busy", "call_b", `{}`)}
		_, err := fx.store.PostMessage(fx.ctx, p)
		requireErrorIs(t, err, store.ErrThreadBusy)
		callClient(fx, r, "call_b")
		p = fx.postParams("t-busy", approver, "theirs", newRun())
		p.Results = []*store.Message{result("t-busy", "call_b", `{}`)}
		_, err = fx.store.PostMessage(fx.ctx, p)
		requireErrorIs(t, err, store.ErrNotThreadOwner)
		// A taken id anywhere in the post refuses all of it: the
		// message's, or a result's.
		held := fx.messages("t-busy")[0].ID
		p = fx.postParams("t-busy", requester, "again", newRun())
		p.Results = []*store.Message{result("t-busy", "call_b", `{}`)}
		p.Message.ID = held
		_, err = fx.store.PostMessage(fx.ctx, p)
		requireMessageIDTaken(t, "the message", err, "t-busy", held)
		p = fx.postParams("t-busy", requester, "again", newRun())
		p.Results = []*store.Message{result("t-busy", "call_b", `{}`)}
		p.Results[0].ID = held
		_, err = fx.store.PostMessage(fx.ctx, p)
		requireMessageIDTaken(t, "a result", err, "t-busy", held)
		if pending := store.PendingClientCalls(fx.messages("t-busy")); len(pending) != 1 || pending[0].ID != "call_b" {
			t.Fatalf("pending calls %+v after refused posts, want call_b", pending)
		}
		if msgs := fx.messages("t-busy"); len(msgs) != 2 {
			t.Fatalf("%d messages after refused posts, want 2: %+v", len(msgs), msgs)
		}
		if fx.thread("t-busy").RunID != "" {
			t.Fatal("a refused post left a run holding the thread")
		}
	})

	t.Run("InvalidResults", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.post("t-badres", requester, "x", nil)
		for name, mut := range map[string]func(*store.PostMessageParams){
			"no tool call id": func(p *store.PostMessageParams) { p.Results[0].ToolCallID = "" },
			"a user result":   func(p *store.PostMessageParams) { p.Results[0].Role = store.RoleUser },
			"another thread":  func(p *store.PostMessageParams) { p.Results[0].ThreadID = "t-elsewhere" },
			"no id":           func(p *store.PostMessageParams) { p.Results[0].ID = "" },
			"a nil result":    func(p *store.PostMessageParams) { p.Results = append(p.Results, nil) },
			"one id twice": func(p *store.PostMessageParams) {
				p.Results = append(p.Results, p.Results[0].Clone())
			},
			"with a decision": func(p *store.PostMessageParams) { p.Decision, p.Owner = true, "" },
			"a nameless client tool": func(p *store.PostMessageParams) {
				p.Run = newRun()
				p.Run.ClientTools = []store.ClientTool{{Description: "x"}}
			},
			"client tool parameters not JSON": func(p *store.PostMessageParams) {
				p.Run = newRun()
				p.Run.ClientTools = []store.ClientTool{{Name: "x", Parameters: json.RawMessage(`{`)}}
			},
		} {
			p := fx.postParams("t-badres", requester, "y", nil)
			p.Results = []*store.Message{result("t-badres", "call_x", `{}`)}
			mut(p)
			if _, err := fx.store.PostMessage(fx.ctx, p); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("%s: %v, want ErrInvalidParams", name, err)
			}
		}
		if msgs := fx.messages("t-badres"); len(msgs) != 1 {
			t.Fatalf("%d messages after invalid posts, want 1", len(msgs))
		}
	})
}
