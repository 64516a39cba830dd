package mcpgateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// metaTasks is the _meta of a 2026-07-28 client that declares Tasks and
// no elicitation; metaTasksAsking declares both.
const (
	metaTasks = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	metaTasksAsking = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
)

// rpcAnswer is a JSON-RPC response: its result, or its error.
type rpcAnswer struct {
	status int
	Result map[string]json.RawMessage
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
}

// str reads a string member of the result.
func (a rpcAnswer) str(key string) string {
	var s string
	_ = json.Unmarshal(a.Result[key], &s)
	return s
}

// rpc2026 sends one 2026-07-28 request to url as key: method with params
// (a JSON object's members, without braces) and the meta given.
func rpc2026(t *testing.T, url, key, meta, method, name, params string) rpcAnswer {
	t.Helper()
	members := meta
	if params != "" {
		members = params + "," + meta
	}
	status, raw := rawPost(t, url, key, "2026-07-28", method, name,
		`{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":{`+members+`}}`)
	out := rpcAnswer{status: status}
	if r, ok := raw["result"]; ok {
		if err := json.Unmarshal(r, &out.Result); err != nil {
			t.Fatalf("%s: result %s: %v", method, r, err)
		}
	}
	if e, ok := raw["error"]; ok {
		if err := json.Unmarshal(e, &out.Error); err != nil {
			t.Fatalf("%s: error %s: %v", method, e, err)
		}
	}
	if out.Result == nil && out.Error == nil {
		t.Fatalf("%s: HTTP %d, neither a result nor an error: %v", method, status, raw)
	}
	return out
}

func taskGet(t *testing.T, url, key, id string) rpcAnswer {
	t.Helper()
	return rpc2026(t, url, key, metaTasks, "tasks/get", id, `"taskId":"`+id+`"`)
}

// Tasks (docs/api.md Part 3, "MCP 2026-07-28"): a gated call of a client
// that declares the extension answers a task whose id is its proposal's,
// made durably first, with the proposal's expiry as its TTL; tasks/get
// follows it to completed with the upstream's result (run once, by the
// workers, never by a poll), failed on a rejection, cancelled by
// tasks/cancel; only the requester sees its tasks; a server started again
// on the store serves them.
func TestTasks(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) { testTasks(t, kind) })
	}
}

func testTasks(t *testing.T, kind string) {
	st := newStore(t, kind)
	h := newHarness(t, harnessOptions{hold: 5 * time.Second, store: st, stateSecret: testStateSecret, tasks: true})
	url := httpGateway(t, h)

	disc := rpc2026(t, url, "key_alice", metaTasks, "server/discover", "", "")
	var caps struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}
	raw, _ := json.Marshal(disc.Result)
	_ = json.Unmarshal(raw, &caps)
	if _, ok := caps.Capabilities.Extensions[TasksExtension]; !ok {
		t.Fatalf("server/discover %s: want the extension %s listed", raw, TasksExtension)
	}

	// A 2025 session is not offered tasks.
	legacy := httpClient(t, h.ctx, url, "key_alice", "2025-11-25", false)
	if _, offered := legacy.InitializeResult().Capabilities.Extensions[TasksExtension]; offered {
		t.Fatalf("initialize on 2025-11-25 offers %s", TasksExtension)
	}

	// A read runs at once: no task.
	read := rpc2026(t, url, "key_alice", metaTasks, "tools/call", "up__read_note", `"name":"up__read_note","arguments":{"id":"n7"}`)
	if read.Error != nil || read.str("resultType") == "task" || !strings.Contains(string(read.Result["content"]), "note n7") {
		t.Fatalf("a read: %+v", read)
	}

	call := func(body string) rpcAnswer {
		t.Helper()
		return rpc2026(t, url, "key_alice", metaTasks, "tools/call", "up__send_email",
			`"name":"up__send_email","arguments":{"to":"bob@example.com","body":"`+body+`"}`)
	}
	// A write: a task, durable before the answer, executing nothing.
	made := call("one")
	id := made.str("taskId")
	if made.Error != nil || made.str("resultType") != "task" || made.str("status") != "working" || !strings.HasPrefix(id, "prp_") {
		t.Fatalf("a gated call: %+v, want a working task", made)
	}
	if _, has := made.Result["content"]; has {
		t.Fatalf("CreateTaskResult %v carries content", made.Result)
	}
	p, err := h.engine.Proposal(h.ctx, alice, id)
	if err != nil || p.Status != cstype.StatusPending || p.Mode != cstype.ModeIndependent || p.ThreadID != keyThread("key_alice") {
		t.Fatalf("the task's proposal: %+v %v, want pending, independent, in the credential's thread", p, err)
	}
	var ttl int64
	_ = json.Unmarshal(made.Result["ttlMs"], &ttl)
	created, err := time.Parse(time.RFC3339Nano, made.str("createdAt"))
	if err != nil || !created.Add(time.Duration(ttl)*time.Millisecond).Equal(p.ExpiresAt) {
		t.Fatalf("createdAt %q + ttlMs %d, want the proposal's expiry %v (%v)", made.str("createdAt"), ttl, p.ExpiresAt, err)
	}
	// The same call again continues the proposal: the same task.
	if again := call("one"); again.str("taskId") != id {
		t.Fatalf("the repeated call: %+v, want task %s", again, id)
	}

	// Polling: working, and nothing runs.
	for range 3 {
		got := taskGet(t, url, "key_alice", id)
		if got.Error != nil || got.str("status") != "working" || got.str("resultType") != "complete" || got.str("taskId") != id {
			t.Fatalf("tasks/get of a pending task: %+v", got)
		}
	}
	if n := len(h.up.callsOf("send_email")); n != 0 {
		t.Fatalf("%d upstream calls before any decision", n)
	}

	// Only the requester sees its task: bob, an approver of the tenant,
	// is answered as for an id that does not exist.
	foreign := taskGet(t, url, "key_bob", id)
	unknown := taskGet(t, url, "key_alice", "prp_nosuchproposal")
	if foreign.Error == nil || unknown.Error == nil || foreign.Error.Code != -32602 || foreign.Error.Code != unknown.Error.Code ||
		foreign.Error.Message != unknown.Error.Message {
		t.Fatalf("another's task %+v, an unknown one %+v: want the same -32602", foreign.Error, unknown.Error)
	}
	if c := rpc2026(t, url, "key_bob", metaTasks, "tasks/cancel", id, `"taskId":"`+id+`"`); c.Error == nil || c.Error.Code != -32602 {
		t.Fatalf("bob cancels alice's task: %+v", c)
	}
	// Without the extension declared on the request: -32021.
	if miss := rpc2026(t, url, "key_alice", meta2026, "tasks/get", id, `"taskId":"`+id+`"`); miss.Error == nil || miss.Error.Code != CodeMissingCapability {
		t.Fatalf("tasks/get without the capability: %+v", miss)
	}

	// Approved elsewhere: the workers run it once; tasks/get shows the
	// upstream's result, however often it is polled.
	if _, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: alice, ProposalID: id, Verdict: countersign.Approve, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	done := pollTask(t, url, id, "completed")
	var output map[string]json.RawMessage
	if err := json.Unmarshal(done.Result["result"], &output); err != nil || !strings.Contains(string(output["content"]), "sent to bob@example.com") ||
		string(output["resultType"]) != `"complete"` {
		t.Fatalf("the completed task's result: %s, want the upstream's, complete", done.Result["result"])
	}
	taskGet(t, url, "key_alice", id)
	if n := len(h.up.callsOf("send_email")); n != 1 {
		t.Fatalf("%d upstream calls, want 1", n)
	}

	// Rejected: failed, naming the reason.
	rejected := call("two").str("taskId")
	if _, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: alice, ProposalID: rejected, Verdict: countersign.Reject, Via: "api", Reason: "not now"}); err != nil {
		t.Fatal(err)
	}
	failed := pollTask(t, url, rejected, "failed")
	var fe taskError
	_ = json.Unmarshal(failed.Result["error"], &fe)
	if fe.Code != CodeCallNotRun || fe.Data["reason"] != "rejected" || !strings.Contains(fe.Message, "not now") {
		t.Fatalf("the rejected task's error: %s", failed.Result["error"])
	}

	// Cancelled by its requester.
	cancelled := call("three").str("taskId")
	if c := rpc2026(t, url, "key_alice", metaTasks, "tasks/cancel", cancelled, `"taskId":"`+cancelled+`"`); c.Error != nil || c.str("resultType") != "complete" {
		t.Fatalf("tasks/cancel: %+v", c)
	}
	pollTask(t, url, cancelled, "cancelled")
	if p, _ := h.engine.Proposal(h.ctx, alice, cancelled); p == nil || p.Status != cstype.StatusCancelled {
		t.Fatalf("the cancelled task's proposal: %+v", p)
	}
	// tasks/update: nothing is asked, so nothing is taken, but the id is
	// checked.
	if u := rpc2026(t, url, "key_alice", metaTasks, "tasks/update", id, `"taskId":"`+id+`","inputResponses":{"x":{"action":"accept"}}`); u.Error != nil {
		t.Fatalf("tasks/update: %+v", u)
	}

	// tasks/list: alice's tasks, and none of bob's.
	var listed struct {
		Tasks []task `json:"tasks"`
	}
	lr := rpc2026(t, url, "key_alice", metaTasks, "tasks/list", "", "")
	raw, _ = json.Marshal(lr.Result)
	_ = json.Unmarshal(raw, &listed)
	var ids []string
	for _, tk := range listed.Tasks {
		ids = append(ids, tk.TaskID)
	}
	for _, want := range []string{id, rejected, cancelled} {
		if !slices.Contains(ids, want) {
			t.Fatalf("tasks/list %v: want %s", ids, want)
		}
	}
	if br := rpc2026(t, url, "key_bob", metaTasks, "tasks/list", "", ""); !strings.Contains(string(br.Result["tasks"]), "[]") {
		t.Fatalf("bob's tasks/list: %+v", br)
	}

	// In-band first: a client that may decide is asked; dismissed, the
	// call becomes a task; approved in-band, it answers the result.
	asking := func(body, extra string) rpcAnswer {
		t.Helper()
		params := `"name":"up__send_email","arguments":{"to":"bob@example.com","body":"` + body + `"}`
		if extra != "" {
			params += "," + extra
		}
		return rpc2026(t, url, "key_alice", metaTasksAsking, "tools/call", "up__send_email", params)
	}
	asked := asking("four", "")
	if asked.str("resultType") != "input_required" || asked.str("requestState") == "" {
		t.Fatalf("a client that may decide: %+v, want input_required first", asked)
	}
	dismissed := asking("four", `"inputResponses":{"countersign.approval":{"action":"cancel"}},"requestState":"`+asked.str("requestState")+`"`)
	if dismissed.str("resultType") != "task" {
		t.Fatalf("the question dismissed: %+v, want a task", dismissed)
	}
	asked = asking("five", "")
	answered := asking("five", `"inputResponses":{"countersign.approval":{"action":"accept","content":{"approve":true}}},"requestState":"`+asked.str("requestState")+`"`)
	if answered.str("resultType") == "task" || !strings.Contains(string(answered.Result["content"]), "sent to bob@example.com") {
		t.Fatalf("approved in-band: %+v, want the result", answered)
	}

	// A server started again on the store serves the tasks it made.
	later := call("six").str("taskId")
	h.stop()
	h2 := newHarness(t, harnessOptions{hold: 5 * time.Second, store: st, stateSecret: testStateSecret, tasks: true})
	url = httpGateway(t, h2)
	if got := taskGet(t, url, "key_alice", later); got.str("status") != "working" {
		t.Fatalf("after a restart: %+v", got)
	}
	if _, err := h2.engine.Decide(h2.ctx, &countersign.Decision{Identity: alice, ProposalID: later, Verdict: countersign.Approve, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	pollTask(t, url, later, "completed")
	if n := len(h2.up.callsOf("send_email")); n != 1 {
		t.Fatalf("%d upstream calls after the restart, want 1", n)
	}
}

// pollTask polls alice's task until it has status (the test's deadline is
// the bound), and returns that answer.
func pollTask(t *testing.T, url, id, status string) rpcAnswer {
	t.Helper()
	for {
		got := taskGet(t, url, "key_alice", id)
		if got.Error != nil {
			t.Fatalf("tasks/get %s: %+v", id, got.Error)
		}
		if s := got.str("status"); s == status {
			return got
		} else if s != "working" {
			t.Fatalf("task %s: %s, want %s", id, s, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// taskOf by the proposal's status: what a client polling the task reads.
func TestTaskOf(t *testing.T) {
	created := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	fail := "boom"
	for _, tc := range []struct {
		status  cstype.Status
		outcome *cstype.Outcome
		want    string // status, and the reason of a failed one
	}{
		{cstype.StatusPending, nil, "working"},
		{cstype.StatusApproved, nil, "working"},
		{cstype.StatusExecuting, nil, "working"},
		{cstype.StatusReconciling, nil, "working"},
		{cstype.StatusSucceeded, &cstype.Outcome{Result: json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)}, "completed"},
		{cstype.StatusRejected, nil, "failed rejected"},
		{cstype.StatusExpired, nil, "failed expired"},
		{cstype.StatusFailed, &cstype.Outcome{Error: &fail}, "failed failed"},
		{cstype.StatusUnknown, nil, "failed unknown"},
		{cstype.StatusCancelled, nil, "cancelled"},
		{cstype.StatusSuperseded, nil, "cancelled"},
	} {
		p := &cstype.Proposal{ID: "prp_1", Status: tc.status, Outcome: tc.outcome, CreatedAt: created,
			UpdatedAt: created.Add(time.Second), ExpiresAt: created.Add(time.Hour)}
		got := taskOf(p, taskOutput)
		desc := got.Status
		if got.Error != nil {
			desc += fmt.Sprint(" ", got.Error.Data["reason"])
		}
		if desc != tc.want {
			t.Errorf("%s: %q, want %q", tc.status, desc, tc.want)
		}
		if got.TTLMs != time.Hour.Milliseconds() || got.CreatedAt != "2026-12-05T12:00:00Z" || got.LastUpdatedAt != "2026-12-05T12:00:01Z" {
			t.Errorf("%s: times %+v", tc.status, got)
		}
		if (got.Status == "completed") != (len(got.Result) > 0) {
			t.Errorf("%s: result %s", tc.status, got.Result)
		}
		if (got.Status == "working") != (got.PollIntervalMs > 0) {
			t.Errorf("%s: pollIntervalMs %d", tc.status, got.PollIntervalMs)
		}
	}
	// An approved task is the workers' to run: it never waits for its
	// caller, so it never ends not_collected.
	if store.AwaitsCaller(&cstype.Proposal{Status: cstype.StatusApproved, Mode: cstype.ModeIndependent,
		Decisions: []cstype.Decision{{Decision: cstype.VerdictApproved, AwaitsCaller: true}}}) {
		t.Error("an approved task awaits its caller")
	}
}

// Hostile tasks/* requests: each gets a JSON-RPC error (never a 5xx, never
// another's task), and nothing changes.
func TestTasksHostileInput(t *testing.T) {
	h := newHarness(t, harnessOptions{hold: time.Second, store: newStore(t, "sqlite"), stateSecret: testStateSecret, tasks: true})
	url := httpGateway(t, h)
	made := rpc2026(t, url, "key_alice", metaTasks, "tools/call", "up__send_email", `"name":"up__send_email","arguments":`+email)
	id := made.str("taskId")
	if made.str("resultType") != "task" {
		t.Fatalf("a gated call: %+v", made)
	}
	for _, tc := range []struct {
		name, method, params string
		code                 int
	}{
		{"no taskId", "tasks/get", "", -32602},
		{"an empty taskId", "tasks/get", `"taskId":""`, -32602},
		{"a number for taskId", "tasks/get", `"taskId":42`, -32602},
		{"null taskId", "tasks/cancel", `"taskId":null`, -32602},
		{"a long taskId", "tasks/get", `"taskId":"` + strings.Repeat("p", 10000) + `"`, -32602},
		{"control characters", "tasks/get", `"taskId":"prp_\u0000\n"`, -32602},
		{"another's id, cancelled", "tasks/cancel", `"taskId":"prp_` + strings.Repeat("0", 26) + `"`, -32602},
		{"a forged cursor", "tasks/list", `"cursor":"not-a-cursor"`, -32602},
		{"inputResponses not an object", "tasks/update", `"taskId":"` + id + `","inputResponses":[1,2]`, -32602},
	} {
		got := rpc2026(t, url, "key_alice", metaTasks, tc.method, "x", tc.params)
		if got.status >= 500 || got.Error == nil || got.Error.Code != tc.code {
			t.Errorf("%s: HTTP %d %+v %v, want error %d", tc.name, got.status, got.Error, got.Result, tc.code)
		}
	}
	if p, err := h.engine.Proposal(h.ctx, alice, id); err != nil || p.Status != cstype.StatusPending {
		t.Fatalf("the task's proposal after the hostile requests: %+v %v, want pending", p, err)
	}
}
