package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/agui/event"
)

// interrupted runs text on a new thread as alice and returns the
// interrupt its run ended with.
func (h *harness) interrupted(thread, text string) event.Interrupt {
	h.t.Helper()
	evs := h.runAGUI("alice", userInput(thread, "r1", "m_"+thread, text))
	fin, ok := evs[len(evs)-1].(*event.RunFinished)
	if !ok || fin.Outcome == nil || fin.Outcome.Type != event.OutcomeInterrupt {
		h.t.Fatalf("events %s, want an interrupt", types(evs))
	}
	return fin.Outcome.Interrupts[0]
}

func resumeInput(thread, run string, entries ...map[string]any) map[string]any {
	resume := make([]any, len(entries))
	for i, e := range entries {
		resume[i] = e
	}
	return map[string]any{"threadId": thread, "runId": run, "messages": []any{}, "resume": resume}
}

func approved(id string) map[string]any {
	return map[string]any{"interruptId": id, "status": "resolved", "payload": map[string]any{"approved": true}}
}

// TestAGUIResumeIsCheckedWhole: a resume one of whose entries is bad
// decides nothing, even the good ones before it.
func TestAGUIResumeIsCheckedWhole(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	in := h.interrupted("rw1", "refund 40 EUR to c_whole")
	for name, bad := range map[string]map[string]any{
		"a bad payload":            {"interruptId": in.ID, "status": "resolved", "payload": map[string]any{}},
		"another thread's":         approved(h.interrupted("rw2", "refund 5 EUR to c_other").ID),
		"an interrupt nobody made": approved("prp_nope"),
		"a bad status":             {"interruptId": in.ID, "status": "later"},
	} {
		evs := h.aguiStream(req{method: "POST", path: "/v1/agui", token: "alice", body: resumeInput("rw1", "r2", approved(in.ID), bad), invalid: true})
		if e, ok := evs[len(evs)-1].(*event.RunError); !ok || e.Code != "INVALID_RESUME" {
			t.Fatalf("%s: %s, want RUN_ERROR INVALID_RESUME", name, types(evs))
		}
		if p := h.must(200, req{method: "GET", path: "/v1/proposals/" + in.ID, token: "alice"}).json(t); p["status"] != "pending" {
			t.Fatalf("%s: the proposal is %v after a refused resume, want pending", name, p["status"])
		}
	}
	// The good entry alone goes through.
	evs := h.runAGUI("alice", resumeInput("rw1", "r3", approved(in.ID)))
	if got := types(evs); !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT") {
		t.Fatalf("resume %s", got)
	}
}

// TestAGUIResumeAfterManyRuns: an interrupt is found by its run, however
// many runs the thread had since.
func TestAGUIResumeAfterManyRuns(t *testing.T) {
	t.Parallel()
	h := aguiHarness(t)
	in := h.interrupted("rm1", "refund 40 EUR to c_many")
	h.must(200, req{method: "POST", path: "/v1/proposals/" + in.ID + "/reject", token: "alice", body: map[string]any{"reason": "no"}})
	// A resume right away follows the run to its end.
	if got := types(h.runAGUI("alice", resumeInput("rm1", "r2", approved(in.ID)))); !strings.HasSuffix(got, "RUN_FINISHED") {
		t.Fatalf("resume %s", got)
	}
	for i := range 25 {
		evs := h.runAGUI("alice", userInput("rm1", fmt.Sprintf("rx%d", i), fmt.Sprintf("mx%d", i), "hello"))
		if _, ok := evs[len(evs)-1].(*event.RunFinished); !ok {
			t.Fatalf("run %d: %s", i, types(evs))
		}
	}
	evs := h.runAGUI("alice", resumeInput("rm1", "r_late", approved(in.ID)))
	if got := types(evs); !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT") || !strings.HasSuffix(got, "RUN_FINISHED") {
		t.Fatalf("a late resume: %s, want the continuation", got)
	}
	if r := evs[1].(*event.ToolCallResult); !strings.Contains(r.Content, `"status":"rejected"`) {
		t.Fatalf("the continuation's result %s, want the rejection that stands", r.Content)
	}
}

// TestAGUIResumeOfWhatSomeoneElseDecided: an owner who may not decide
// still gets the continuation of a decision made by someone who may; while
// nobody has decided, their resume is FORBIDDEN and decides nothing. The
// engine answers which (Engine.Resume): on every store.
func TestAGUIResumeOfWhatSomeoneElseDecided(t *testing.T) {
	t.Parallel()
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := aguiHarnessOn(t, kind, harnessOptions{})
			in := h.interrupted("rf1", "memo hello")
			for _, entry := range []map[string]any{approved(in.ID), {"interruptId": in.ID, "status": "cancelled"}} {
				evs := h.runAGUI("alice", resumeInput("rf1", "r2", entry))
				if e, ok := evs[len(evs)-1].(*event.RunError); !ok || e.Code != "FORBIDDEN" {
					t.Fatalf("alice resuming bob's to decide: %s, want RUN_ERROR FORBIDDEN", types(evs))
				}
			}
			if p := h.must(200, req{method: "GET", path: "/v1/proposals/" + in.ID, token: "bob"}).json(t); p["status"] != "pending" {
				t.Fatalf("proposal %v after forbidden resumes, want pending", p["status"])
			}
			h.must(200, req{method: "POST", path: "/v1/proposals/" + in.ID + "/approve", token: "bob", body: map[string]any{}})
			evs := h.runAGUI("alice", resumeInput("rf1", "r3", approved(in.ID)))
			if got := types(evs); !strings.HasPrefix(got, "RUN_STARTED TOOL_CALL_RESULT") || !strings.HasSuffix(got, "RUN_FINISHED") {
				t.Fatalf("alice's resume after bob approved: %s, want the continuation", got)
			}
			if r := evs[1].(*event.ToolCallResult); r.ToolCallID != in.ToolCallID || !strings.Contains(r.Content, `"status":"succeeded"`) {
				t.Fatalf("the continuation's result %+v, want the memo written", r)
			}
			// Bob approved: only alice's approval was his to make, so the
			// proposal holds his decision alone.
			p := h.must(200, req{method: "GET", path: "/v1/proposals/" + in.ID, token: "bob"}).json(t)
			if ds, _ := p["decisions"].([]any); len(ds) != 1 || ds[0].(map[string]any)["actor"] != "bob" {
				t.Fatalf("decisions %v, want bob's alone", p["decisions"])
			}
		})
	}
}
