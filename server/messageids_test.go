package server

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/agui/event"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// threadMessages reads a thread's messages as token sees them.
func (h *harness) threadMessages(token, thread string) []map[string]any {
	h.t.Helper()
	th := h.must(200, req{method: "GET", path: "/v1/threads/" + thread, token: token}).json(h.t)
	var out []map[string]any
	for _, m := range th["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// messageIDs are the ids of msgs, in order.
func messageIDs(msgs []map[string]any) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i], _ = m["id"].(string)
	}
	return out
}

// serverMessageID is the shape of an id the server makes on its own
// account: nothing a client can name beforehand.
var serverMessageID = regexp.MustCompile(`^msg_[0-9a-f]{32}$`)

// requireOneOutcome checks that the thread holds exactly one outcome
// message of proposal id, with status, under an id only the server could
// have made.
func requireOneOutcome(t *testing.T, msgs []map[string]any, id, status string) {
	t.Helper()
	var found []map[string]any
	for _, m := range msgs {
		if o, _ := m["outcome"].(map[string]any); o != nil && o["proposal_id"] == id {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d outcome messages of %s in the thread, want 1: %v", len(found), id, msgs)
	}
	m := found[0]
	if o := m["outcome"].(map[string]any); o["status"] != status || m["role"] != "assistant" {
		t.Fatalf("outcome message %v, want the assistant's, %s", m, status)
	}
	if mid, _ := m["id"].(string); !serverMessageID.MatchString(mid) || strings.Contains(mid, id) {
		t.Fatalf("outcome message id %q: want msg_ and 32 random hex digits, nothing of %s", mid, id)
	}
}

// TestMessageIDsAreTheThreads: POST …/messages takes the caller's id, which
// is the thread's: the same id in another thread, another owner's thread or
// another tenant's thread of the same name is another message; the same id
// again in the thread is 409 MESSAGE_ID_TAKEN, which names nothing but the
// caller's id, and stores nothing.
func TestMessageIDsAreTheThreads(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		post := func(want int, token, thread string, body map[string]any) map[string]any {
			t.Helper()
			return h.must(want, req{method: "POST", path: "/v1/threads/" + thread + "/messages", token: token, body: body}).json(t)
		}
		res := post(202, "alice", "t1", map[string]any{"id": "m1", "text": "hello"})
		if m := res["message"].(map[string]any); m["id"] != "m1" || m["text"] != "hello" {
			t.Fatalf("stored message %v, want m1", m)
		}
		post(202, "alice", "t2", map[string]any{"id": "m1", "text": "in another thread"})
		post(202, "bob", "t3", map[string]any{"id": "m1", "text": "another owner's"})
		post(202, "x_alice", "t1", map[string]any{"id": "m1", "text": "another tenant's t1"})

		e := post(409, "alice", "t1", map[string]any{"id": "m1", "text": "again"})
		errObj := e["error"].(map[string]any)
		if errObj["code"] != CodeMessageIDTaken {
			t.Fatalf("the same id again: %v, want %s", e, CodeMessageIDTaken)
		}
		if msg, _ := errObj["message"].(string); strings.Contains(msg, "t2") || strings.Contains(msg, "t3") || strings.Contains(msg, "globex") {
			t.Errorf("MESSAGE_ID_TAKEN says something of other threads: %q", msg)
		}
		// A text decision with the id is refused the same way, deciding
		// nothing.
		id := h.pending("call_taken", "c_taken")
		post(409, "bob", "t1", map[string]any{"id": "m1", "text": "yes #" + id})
		if p := h.must(200, req{method: "GET", path: "/v1/proposals/" + id, token: "bob"}).json(t); p["status"] != "pending" {
			t.Fatalf("a text decision with a taken id decided: %v", p["status"])
		}
		for token, want := range map[string][]string{"alice": {"m1"}, "x_alice": {"m1"}} {
			if got := messageIDs(h.threadMessages(token, "t1")); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("%s's t1 holds %v, want %v", token, got, want)
			}
		}
		if got := h.threadMessages("alice", "t1"); got[0]["text"] != "hello" {
			t.Errorf("alice's m1 is %v, want the first", got[0])
		}

		// Ids are 1 to 128 characters, no control characters.
		post(202, "alice", "t4", map[string]any{"id": strings.Repeat("é", 128), "text": "long id"})
		for name, r := range map[string]req{
			"empty":   {body: map[string]any{"id": "", "text": "x"}, invalid: true},
			"129":     {body: map[string]any{"id": strings.Repeat("a", 129), "text": "x"}, invalid: true},
			"control": {body: map[string]any{"id": "m\u0007", "text": "x"}},
			"number":  {body: `{"id": 7, "text": "x"}`, invalid: true},
		} {
			r.method, r.path, r.token = "POST", "/v1/threads/t4/messages", "alice"
			resp := h.do(r)
			e, _ := resp.json(t)["error"].(map[string]any)
			if resp.status != 400 || e["code"] != CodeInvalidBody || !strings.HasPrefix(e["message"].(string), "id") {
				t.Errorf("%s id: %d %s, want 400 INVALID_BODY naming id", name, resp.status, resp.body)
			}
		}
		if n := len(h.threadMessages("alice", "t4")); n != 1 {
			t.Errorf("t4 holds %d messages after refused ids, want 1", n)
		}
	})
}

// TestOutcomeNotPreemptedOverHTTP: the thread's owner posts messages under
// the ids an outcome message once took (msg_<proposal>:<status>) before the
// proposal settles; the outcome message is admitted all the same, under an
// id of the server's.
func TestOutcomeNotPreemptedOverHTTP(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		id := h.pending("call_pre", "c_pre")
		for _, guess := range []string{"msg_" + id + ":rejected", "msg_" + id + ":succeeded", "msg_" + id} {
			h.must(202, req{method: "POST", path: "/v1/threads/t1/messages", token: "alice", body: map[string]any{"id": guess, "text": "a guess"}})
		}
		h.decide(200, "bob", id, "reject", map[string]any{"reason": "no"}, nil)
		requireOneOutcome(t, h.threadMessages("alice", "t1"), id, "rejected")
	})
}

// TestOutcomeNotPreemptedOverAGUI: the same over AG-UI, whose messages
// carry the client's ids: a user message under the predicted id runs as
// any other, and the rejection is admitted to the thread.
func TestOutcomeNotPreemptedOverAGUI(t *testing.T) {
	t.Parallel()
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := aguiHarnessOn(t, kind, harnessOptions{})
			id := h.pending("call_pre", "c_pre")
			evs := h.runAGUI("alice", userInput("t1", "r1", "msg_"+id+":rejected", "hello"))
			if _, ok := evs[len(evs)-1].(*event.RunFinished); !ok {
				t.Fatalf("a run on the predicted id: %s", types(evs))
			}
			// In this harness the requester approves; she rejects.
			h.decide(200, "alice", id, "reject", map[string]any{"reason": "no"}, nil)
			requireOneOutcome(t, h.threadMessages("alice", "t1"), id, "rejected")
		})
	}
}

// lastRunError is the RUN_ERROR ending evs, or a failure.
func lastRunError(t *testing.T, evs []event.Event) *event.RunError {
	t.Helper()
	e, ok := evs[len(evs)-1].(*event.RunError)
	if !ok {
		t.Fatalf("events %s, want a RUN_ERROR last", types(evs))
	}
	return e
}

// TestAGUIHistoryResent: a front end sends its whole history with every
// input. Messages whose ids the thread holds are passed over when they are
// the stored messages (a user's text, as a string or as text parts; an
// assistant's text; a tool's result); only what is new is stored and run.
// A held id with other content (other text, another role, a role the
// thread never stores) ends the run with RUN_ERROR MESSAGE_ID_TAKEN and
// stores nothing. Other threads and tenants may use the same ids.
func TestAGUIHistoryResent(t *testing.T) {
	t.Parallel()
	for _, kind := range allStoreKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := aguiHarnessOn(t, kind, harnessOptions{})
			u1 := map[string]any{"id": "u1", "role": "user", "content": "hello"}
			evs := h.runAGUI("alice", map[string]any{"threadId": "th", "runId": "r1", "messages": []any{u1}})
			start, ok := evs[1].(*event.TextMessageStart)
			if !ok {
				t.Fatalf("first run: %s", types(evs))
			}
			reply := evs[2].(*event.TextMessageContent).Delta
			a1 := map[string]any{"id": start.MessageID, "role": "assistant", "content": reply}

			// The history again, u1 as text parts, and a new message.
			u1parts := map[string]any{"id": "u1", "role": "user", "content": []any{map[string]any{"type": "text", "text": "hello"}}}
			u2 := map[string]any{"id": "u2", "role": "user", "content": "and again"}
			evs = h.runAGUI("alice", map[string]any{"threadId": "th", "runId": "r2", "messages": []any{u1parts, a1, u2}})
			if _, ok := evs[len(evs)-1].(*event.RunFinished); !ok {
				t.Fatalf("the history resent with a new message: %s", types(evs))
			}
			before := messageIDs(h.threadMessages("alice", "th"))
			if len(before) != 4 || before[0] != "u1" || before[1] != start.MessageID || before[2] != "u2" {
				t.Fatalf("thread %v, want u1, the reply, u2, the reply", before)
			}

			// A held id with other content: nothing of the input is stored.
			u3 := map[string]any{"id": "u3", "role": "user", "content": "new"}
			for name, m := range map[string]map[string]any{
				"other text":                  {"id": "u1", "role": "user", "content": "hello, edited"},
				"another role":                {"id": "u1", "role": "assistant", "content": "hello"},
				"the assistant's, edited":     {"id": start.MessageID, "role": "assistant", "content": reply + "!"},
				"the assistant's as a user's": {"id": start.MessageID, "role": "user", "content": reply},
				"a system message":            {"id": "u2", "role": "system", "content": "and again"},
				"a tool result":               {"id": "u2", "role": "tool", "toolCallId": "call_x", "content": "and again"},
			} {
				evs := h.runAGUI("alice", map[string]any{"threadId": "th", "runId": "r_bad", "messages": []any{m, u3}})
				if e := lastRunError(t, evs); e.Code != CodeMessageIDTaken || !strings.Contains(e.Message, m["id"].(string)) {
					t.Errorf("%s: RUN_ERROR %s %q, want %s naming the id", name, e.Code, e.Message, CodeMessageIDTaken)
				}
			}
			if after := messageIDs(h.threadMessages("alice", "th")); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Fatalf("thread %v after refused inputs, want %v", after, before)
			}

			// The same ids in another thread, and in another tenant's
			// thread of the same name, are other messages.
			for _, token := range []string{"alice", "x_alice"} {
				thread := "th"
				if token == "alice" {
					thread = "th_other"
				}
				evs := h.runAGUI(token, map[string]any{"threadId": thread, "runId": "r1", "messages": []any{u1}})
				if _, ok := evs[len(evs)-1].(*event.RunFinished); !ok {
					t.Fatalf("%s's %s with u1: %s", token, thread, types(evs))
				}
			}
		})
	}
}

// TestAGUIResultOnlyForPendingCalls: a client tool's result is taken only
// for a call the thread's last run left to its caller when it finished
// (pendingToolCallIds). A run that failed after calling a client tool
// reported none, so a result for its call is refused, and nothing is
// stored.
func TestAGUIResultOnlyForPendingCalls(t *testing.T) {
	t.Parallel()
	st := memstore.New(nil)
	h := aguiHarnessOn(t, "mem", harnessOptions{store: st})
	ctx := t.Context()
	// A run of alice's that called get_weather and then failed, written
	// as the runtime writes it.
	posted, err := st.PostMessage(ctx, &store.PostMessageParams{Owner: "alice",
		Message:    &cstype.Message{ID: "m1", Tenant: "acme", ThreadID: "ct9", Role: cstype.RoleUser, Text: "weather in Faro?", Sender: "alice"},
		Run:        &cstype.Run{ID: "run_failed", Agent: "demo", ClientTools: []cstype.ClientTool{{Name: "get_weather"}}},
		LeaseOwner: "test", LeaseDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l := posted.Run.Lease
	if _, err := st.UpdateRun(ctx, &store.UpdateRunParams{Tenant: "acme", ID: "run_failed", Fence: cstype.Fence{Token: l.Token, Generation: l.Generation},
		Steps: 1, To: cstype.RunFailed, Error: "gave up",
		Messages: []*cstype.Message{{ID: "a1", Role: cstype.RoleAssistant, Text: "Let me look.",
			ToolCalls: []cstype.ToolCall{{ID: "call_f", Action: "get_weather", Input: json.RawMessage(`{"city":"Faro"}`), Client: true}}}}}); err != nil {
		t.Fatal(err)
	}
	user := map[string]any{"id": "m1", "role": "user", "content": "weather in Faro?"}
	result := map[string]any{"id": "tm1", "role": "tool", "toolCallId": "call_f", "content": "sunny"}
	evs := h.runAGUI("alice", map[string]any{"threadId": "ct9", "runId": "r2", "messages": []any{user, result}, "tools": []any{weatherTool}})
	if e := lastRunError(t, evs); e.Code != CodeInvalidInput {
		t.Fatalf("a result for a failed run's call: RUN_ERROR %s %q, want %s", e.Code, e.Message, CodeInvalidInput)
	}
	if ids := messageIDs(h.threadMessages("alice", "ct9")); strings.Join(ids, ",") != "m1,a1" {
		t.Fatalf("thread %v after the refused result, want m1, a1", ids)
	}
}
