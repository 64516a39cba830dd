package mcpgateway

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/canonjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestListing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := h.connect(alice, nil)
	res, err := c.cs.ListTools(h.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	var names []string
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	want := []string{"up__fails", "up__flaky", "up__put_record", "up__read_note", "up__send_email"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v (up__secret is denied)", names, want)
	}
	for name, schema := range map[string]string{"up__send_email": sendEmailSchema, "up__read_note": readNoteSchema, "up__put_record": recordSchema} {
		got, _ := json.Marshal(byName[name].InputSchema)
		if !sameJSON(t, got, []byte(schema)) {
			t.Errorf("%s: inputSchema %s, want the upstream's %s", name, got, schema)
		}
	}
	note := byName["up__read_note"]
	if note.OutputSchema != nil {
		t.Errorf("up__read_note keeps the upstream's outputSchema %v", note.OutputSchema)
	}
	if note.Description != "Read a note" || note.Annotations == nil || !note.Annotations.ReadOnlyHint || note.Annotations.Title != "Read note" {
		t.Errorf("up__read_note: description %q, annotations %+v: want the upstream's", note.Description, note.Annotations)
	}
	// The actions: kind and idempotence from what the operator of up
	// vouches for (upTrust), version the tool's name and the hash of its
	// schema and annotations.
	for name, kind := range map[string]countersign.Kind{"up__read_note": countersign.KindRead, "up__send_email": countersign.KindWrite, "up__put_record": countersign.KindWrite} {
		a, ok := h.engine.Action(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		if a.Kind() != kind {
			t.Errorf("%s: kind %s, want %s", name, a.Kind(), kind)
		}
		if a.Idempotent() != (name == "up__put_record") {
			t.Errorf("%s: idempotent %v", name, a.Idempotent())
		}
	}
	a, _ := h.engine.Action("up__send_email")
	if v, _ := ToolVersion("send_email", []byte(sendEmailSchema), []byte(`{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false}`)); a.Version() != v || !strings.HasPrefix(v, "send_email:") {
		t.Errorf("version %q, want %q", a.Version(), v)
	}
	if _, ok := h.engine.Action("up__secret"); ok {
		t.Errorf("the denied up__secret is registered")
	}
	// A denied tool cannot be called either: the gateway does not serve it.
	if _, err := c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__secret", Arguments: map[string]any{}}); err == nil {
		t.Errorf("calling the denied up__secret did not fail")
	}
	if len(h.up.callsOf("secret")) != 0 {
		t.Errorf("the upstream's secret ran")
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	ca, err := canonjson.Canonicalize(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := canonjson.Canonicalize(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ca) == string(cb)
}

const email = `{"to":"bob@example.com","body":"hi"}`

func TestElicitationApproves(t *testing.T) {
	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) { testElicitationApproves(t, pr.version) })
	}
}

func testElicitationApproves(t *testing.T, protocol string) {
	h := newHarness(t, harnessOptions{protocol: protocol})
	c := h.connect(alice, accept(true))
	if protocol != "" && c.cs.InitializeResult().ProtocolVersion != protocol {
		t.Fatalf("protocol %s, want %s", c.cs.InitializeResult().ProtocolVersion, protocol)
	}
	res := h.call(c, "up__send_email", email)
	if res.IsError || text(res) != "sent to bob@example.com" {
		t.Fatalf("result %+v %q, want the upstream's", res, text(res))
	}
	if n := len(h.up.callsOf("send_email")); n != 1 {
		t.Fatalf("upstream called %d times, want once", n)
	}
	asked := c.elicitations()
	if len(asked) != 1 || !strings.Contains(asked[0].Message, "up__send_email") || !strings.Contains(asked[0].Message, "bob@example.com") {
		t.Fatalf("elicitations %+v: want one naming the action and its input", asked)
	}
	ps := h.proposals(alice)
	if len(ps) != 1 {
		t.Fatalf("%d proposals, want 1", len(ps))
	}
	p := ps[0]
	if p.Status != cstype.StatusSucceeded || len(p.Decisions) != 1 || p.Decisions[0].Via != countersign.ViaMCP ||
		p.Decisions[0].Actor != "alice" || p.Decisions[0].Reason != "checked by a human" {
		t.Fatalf("proposal %s, decisions %+v: want succeeded, approved by alice via mcp", p.Status, p.Decisions)
	}
	// 2025: the session's thread; 2026-07-28: the credential's.
	if want := map[bool]string{true: "mcp_", false: "mcp:"}[protocol != ""]; !strings.HasPrefix(p.ThreadID, want) {
		t.Errorf("thread %q, want %s…", p.ThreadID, want)
	}
	// The call ran: the same call again is a new call, asked again.
	res = h.call(c, "up__send_email", email)
	if res.IsError || len(h.up.callsOf("send_email")) != 2 || len(c.elicitations()) != 2 {
		t.Fatalf("a second call: %q, %d upstream calls, %d elicitations: want a new call, asked and run",
			text(res), len(h.up.callsOf("send_email")), len(c.elicitations()))
	}
}

func TestElicitationRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(*mcp.ElicitParams) *mcp.ElicitResult
		reason string
	}{
		{"decline", answer("decline"), "declined in the MCP client"},
		{"accept without approval", accept(false), "checked by a human"},
	} {
		for _, pr := range protocols {
			t.Run(tc.name+"/"+pr.name, func(t *testing.T) {
				testElicitationRejects(t, pr.version, tc.answer, tc.reason)
			})
		}
	}
}

func testElicitationRejects(t *testing.T, protocol string, answer func(*mcp.ElicitParams) *mcp.ElicitResult, reason string) {
	h := newHarness(t, harnessOptions{protocol: protocol})
	c := h.connect(alice, answer)
	res := h.call(c, "up__send_email", email)
	sc := structured(t, res)
	if !res.IsError || sc["status"] != "rejected" || !strings.Contains(text(res), "rejected") {
		t.Fatalf("result %q %v: want an isError rejection", text(res), sc)
	}
	if n := len(h.up.callsOf("send_email")); n != 0 {
		t.Fatalf("upstream called %d times, want never", n)
	}
	p := h.proposals(alice)[0]
	if p.Status != cstype.StatusRejected || p.Decisions[0].Via != countersign.ViaMCP || p.Decisions[0].Reason != reason {
		t.Fatalf("proposal %s, decisions %+v", p.Status, p.Decisions)
	}
	if sc["proposal_id"] != p.ID {
		t.Errorf("structuredContent %v names another proposal than %s", sc, p.ID)
	}
}

// A client without elicitation, or one whose user dismisses it, holds the
// call; a decision from another channel then lets the same call run once.
func TestHoldThenApproveElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answer   func(*mcp.ElicitParams) *mcp.ElicitResult
		asked    int
		protocol string
	}{
		{"no elicitation", nil, 0, ""},
		{"elicitation cancelled/multi round-trip", answer("cancel"), 1, ""},
		{"elicitation cancelled/2025-11-25", answer("cancel"), 1, "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, protocol: tc.protocol})
			c := h.connect(alice, tc.answer)
			res := h.call(c, "up__send_email", email)
			sc := structured(t, res)
			ps := h.proposals(alice)
			if !res.IsError || sc["status"] != "pending" || len(ps) != 1 || sc["proposal_id"] != ps[0].ID {
				t.Fatalf("result %q %v, proposals %d: want pending naming the proposal", text(res), sc, len(ps))
			}
			if !strings.Contains(text(res), "same arguments") {
				t.Errorf("pending text %q does not say to call again with the same arguments", text(res))
			}
			if len(c.elicitations()) != tc.asked {
				t.Fatalf("%d elicitations, want %d", len(c.elicitations()), tc.asked)
			}
			// Calling again while pending continues the proposal.
			res = h.call(c, "up__send_email", `{"body":"hi","to":"bob@example.com"}`)
			if structured(t, res)["proposal_id"] != ps[0].ID || len(h.proposals(alice)) != 1 {
				t.Fatalf("a repeat while pending made another proposal: %v", structured(t, res))
			}
			dr, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: alice, ProposalID: ps[0].ID, Verdict: countersign.Approve, Via: "api"})
			if err != nil || dr.Status != countersign.DecideApplied {
				t.Fatalf("approve over the engine: %v %v", dr, err)
			}
			if len(h.up.callsOf("send_email")) != 0 {
				t.Fatal("the upstream ran before the caller called again")
			}
			res = h.call(c, "up__send_email", email)
			if res.IsError || text(res) != "sent to bob@example.com" || len(h.up.callsOf("send_email")) != 1 {
				t.Fatalf("after approval: %q, %d upstream calls: want the upstream's result, once", text(res), len(h.up.callsOf("send_email")))
			}
			if p, _ := h.engine.Proposal(h.ctx, alice, ps[0].ID); p.Status != cstype.StatusSucceeded {
				t.Fatalf("proposal %s, want succeeded", p.Status)
			}
		})
	}
}

func TestRejectedElsewhere(t *testing.T) {
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond})
	c := h.connect(alice, nil)
	res := h.call(c, "up__send_email", email)
	pid := structured(t, res)["proposal_id"].(string)
	if _, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: alice, ProposalID: pid, Verdict: countersign.Reject, Via: "api", Reason: "not today"}); err != nil {
		t.Fatal(err)
	}
	res = h.call(c, "up__send_email", email)
	if sc := structured(t, res); !res.IsError || sc["status"] != "rejected" || !strings.Contains(text(res), "not today") {
		t.Fatalf("result %q %v: want the rejection with its reason", text(res), sc)
	}
	if len(h.up.callsOf("send_email")) != 0 {
		t.Fatal("a rejected call ran")
	}
}

func TestOtherTenantSeesAndDecidesNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond})
	a := h.connect(alice, nil)
	res := h.call(a, "up__send_email", email)
	pid := structured(t, res)["proposal_id"].(string)

	// mallory's client accepts every elicitation: it is asked about her own
	// call only, and her approval decides her proposal only.
	m := h.connect(mallory, accept(true))
	if _, err := h.engine.Proposal(h.ctx, mallory, pid); err == nil {
		t.Fatal("mallory reads alice's proposal")
	}
	if dr, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: mallory, ProposalID: pid, Verdict: countersign.Approve, Via: countersign.ViaMCP}); err == nil && dr.Status == countersign.DecideApplied {
		t.Fatal("mallory approved alice's proposal")
	}
	if ps := h.proposals(mallory); len(ps) != 0 {
		t.Fatalf("mallory lists %d proposals", len(ps))
	}
	res = h.call(m, "up__send_email", email)
	if res.IsError || len(h.up.callsOf("send_email")) != 1 {
		t.Fatalf("mallory's own call: %q", text(res))
	}
	mine := h.proposals(mallory)
	if len(mine) != 1 || mine[0].ID == pid || mine[0].Tenant != "evil" {
		t.Fatalf("mallory's proposals %+v: want one of her own", mine)
	}
	if p, _ := h.engine.Proposal(h.ctx, alice, pid); p.Status != cstype.StatusPending || len(p.Decisions) != 0 {
		t.Fatalf("alice's proposal %s with %d decisions: want pending, undecided", p.Status, len(p.Decisions))
	}
	// bob, of alice's tenant but not her approver, may not decide either:
	// his client is never asked about her call, and his own call is his.
	b := h.connect(bob, accept(true))
	if dr, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: bob, ProposalID: pid, Verdict: countersign.Approve, Via: countersign.ViaMCP}); err == nil && dr.Status == countersign.DecideApplied {
		t.Fatal("bob approved alice's proposal")
	}
	res = h.call(b, "up__send_email", email)
	if res.IsError {
		t.Fatalf("bob's own call: %q", text(res))
	}
	if p, _ := h.engine.Proposal(h.ctx, alice, pid); p.Status != cstype.StatusPending {
		t.Fatalf("alice's proposal is %s after bob's call", p.Status)
	}
}

func TestReadAllowedByGlobRunsAtOnce(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := h.connect(alice, accept(true))
	res := h.call(c, "up__read_note", `{"id":"n1"}`)
	if res.IsError || text(res) != "note n1" {
		t.Fatalf("result %q, want the upstream's", text(res))
	}
	if sc := structured(t, res); sc["text"] != "note n1" {
		t.Errorf("structuredContent %v, want the upstream's passed through", sc)
	}
	if len(c.elicitations()) != 0 || len(h.proposals(alice)) != 0 {
		t.Fatalf("%d elicitations, %d proposals: an allowed read asks nothing and records nothing", len(c.elicitations()), len(h.proposals(alice)))
	}
}

func TestInvalidInputIsAToolError(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := h.connect(alice, accept(true))
	res := h.call(c, "up__send_email", `{"to": 3}`)
	if sc := structured(t, res); !res.IsError || sc["status"] != "invalid_input" || !strings.Contains(text(res), "/to") {
		t.Fatalf("result %q %v: want an isError naming /to", text(res), sc)
	}
	if len(c.elicitations()) != 0 || len(h.proposals(alice)) != 0 || len(h.up.callsOf("send_email")) != 0 {
		t.Fatal("an invalid call was asked, stored or run")
	}
}

func TestUpstreamToolErrorFails(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := h.connect(alice, accept(true))
	res := h.call(c, "up__fails", `{}`)
	if sc := structured(t, res); !res.IsError || sc["status"] != "failed" || !strings.Contains(text(res), "disk full") {
		t.Fatalf("result %q %v: want failed with the tool's message", text(res), sc)
	}
	if p := h.proposals(alice)[0]; p.Status != cstype.StatusFailed || p.Outcome == nil || p.Outcome.Executed == nil || !*p.Outcome.Executed {
		t.Fatalf("proposal %s %+v: want failed, executed", p.Status, p.Outcome)
	}
}

// Sixteen identical calls at once are one call: one proposal, one upstream
// call, sixteen identical results.
func TestConcurrentIdenticalCalls(t *testing.T) {
	for _, kind := range []string{"mem", "sqlite", "pg"} {
		t.Run(kind, func(t *testing.T) { testConcurrentIdenticalCalls(t, kind) })
	}
}

func testConcurrentIdenticalCalls(t *testing.T, kind string) {
	h := newHarness(t, harnessOptions{hold: time.Minute, store: newStore(t, kind)})
	c := h.connect(alice, nil)
	const n = 16
	results := make([]*mcp.CallToolResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(email)})
		})
	}
	h.until("16 calls in flight on one proposal", func() bool {
		return h.gw.inflight() == n && len(h.proposals(alice)) == 1
	})
	p := h.proposals(alice)[0]
	if _, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: alice, ProposalID: p.ID, Verdict: countersign.Approve, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || results[i].IsError || text(results[i]) != "sent to bob@example.com" {
			t.Fatalf("call %d: %v %+v", i, errs[i], results[i])
		}
	}
	if got := len(h.up.callsOf("send_email")); got != 1 {
		t.Fatalf("upstream called %d times, want once", got)
	}
	if got := len(h.proposals(alice)); got != 1 {
		t.Fatalf("%d proposals, want 1", got)
	}
}

// inflight counts the calls the gateway's sessions are running.
func (g *Gateway) inflight() int {
	g.mu.Lock()
	sessions := make([]*session, 0, len(g.sessions)+len(g.threads))
	for _, s := range g.sessions {
		sessions = append(sessions, s)
	}
	for _, s := range g.threads {
		sessions = append(sessions, s)
	}
	g.mu.Unlock()
	n := 0
	for _, s := range sessions {
		s.mu.Lock()
		for _, r := range s.calls {
			n += r.inflight
		}
		s.mu.Unlock()
	}
	return n
}

func TestBrokenConnection(t *testing.T) {
	for _, kind := range []string{"mem", "sqlite", "pg"} {
		t.Run(kind, func(t *testing.T) { testBrokenConnection(t, kind) })
	}
}

func testBrokenConnection(t *testing.T, kind string) {
	t.Run("unknown", func(t *testing.T) {
		h := newHarness(t, harnessOptions{store: newStore(t, kind)})
		c := h.connect(alice, nil)
		h.up.breakOn("flaky")
		res := h.call(c, "up__flaky", `{"n":1}`)
		if sc := structured(t, res); !res.IsError || sc["status"] != "unknown" || !strings.Contains(text(res), "Do not retry") {
			t.Fatalf("result %q %v: want unknown", text(res), sc)
		}
		if n := len(h.up.callsOf("flaky")); n != 1 {
			t.Fatalf("upstream called %d times, want once: an uncertain write is never retried", n)
		}
		p := h.proposals(alice)[0]
		if p.Status != cstype.StatusUnknown {
			t.Fatalf("proposal %s, want unknown", p.Status)
		}
		// The upstream is connected again, and a new call runs.
		res = h.call(c, "up__flaky", `{"n":2}`)
		if res.IsError || text(res) != "done" {
			t.Fatalf("a call after the reconnection: %q", text(res))
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		h := newHarness(t, harnessOptions{store: newStore(t, kind)})
		c := h.connect(alice, nil)
		h.up.breakOn("put_record")
		res := h.call(c, "up__put_record", `{"key":"k1"}`)
		if res.IsError || text(res) != "stored k1" {
			t.Fatalf("result %q %v: want the retry's result", text(res), res.StructuredContent)
		}
		calls := h.up.callsOf("put_record")
		if len(calls) != 2 || calls[0].operationID == "" || calls[0].operationID != calls[1].operationID {
			t.Fatalf("upstream calls %+v: want two, with the same operation id", calls)
		}
		p := h.proposals(alice)[0]
		if p.Status != cstype.StatusSucceeded || p.OperationID != calls[0].operationID || p.Attempt != 2 {
			t.Fatalf("proposal %s, operation %s, attempt %d", p.Status, p.OperationID, p.Attempt)
		}
		if h.up.connections() < 2 {
			t.Fatalf("%d upstream connections: the gateway did not reconnect", h.up.connections())
		}
	})
}

// An upstream's changed schema is a new version: the proposal approved
// for the old one fails its re-check and the upstream is not called; the
// next call proposes under the new version.
func TestListChangedNewVersion(t *testing.T) {
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond})
	c := h.connect(alice, nil)
	res := h.call(c, "up__send_email", email)
	pid := structured(t, res)["proposal_id"].(string)
	old, _ := h.engine.Action("up__send_email")

	h.up.addSendEmail(sendEmailSchemaV2)
	h.until("the gateway to list the new schema", func() bool {
		select {
		case <-c.changed:
		default:
		}
		lr, err := c.cs.ListTools(h.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range lr.Tools {
			if tl.Name == "up__send_email" {
				raw, _ := json.Marshal(tl.InputSchema)
				return sameJSON(t, raw, []byte(sendEmailSchemaV2))
			}
		}
		return false
	})
	now, _ := h.engine.Action("up__send_email")
	if now.Version() == old.Version() {
		t.Fatalf("version %s unchanged after the schema changed", now.Version())
	}
	if _, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: alice, ProposalID: pid, Verdict: countersign.Approve, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	res = h.call(c, "up__send_email", email)
	if sc := structured(t, res); !res.IsError || sc["status"] != "failed" || !strings.Contains(text(res), "new proposal") {
		t.Fatalf("result %q %v: want failed, a new version needs a new proposal", text(res), sc)
	}
	if len(h.up.callsOf("send_email")) != 0 {
		t.Fatal("the upstream ran a call approved for the old schema")
	}
	res = h.call(c, "up__send_email", email)
	ps := h.proposals(alice)
	if sc := structured(t, res); sc["status"] != "pending" || sc["proposal_id"] == pid || len(ps) != 2 {
		t.Fatalf("the next call: %v, %d proposals: want a new pending proposal", sc, len(ps))
	}
	for _, p := range ps {
		if p.ID != pid && p.ActionVersion != now.Version() {
			t.Fatalf("new proposal under version %s, want %s", p.ActionVersion, now.Version())
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	up := func() (mcp.Transport, error) { return nil, errors.New("none") }
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no engine", Options{}, "Engine is required"},
		{"bad name", Options{Engine: h.engine, Upstreams: []Upstream{{Name: "a__b", Transport: up}}}, "single - or _"},
		{"trailing underscore", Options{Engine: h.engine, Upstreams: []Upstream{{Name: "a_", Transport: up}}}, "single - or _"},
		{"twice", Options{Engine: h.engine, Upstreams: []Upstream{{Name: "a", Transport: up}, {Name: "a", Transport: up}}}, "named twice"},
		{"no transport", Options{Engine: h.engine, Upstreams: []Upstream{{Name: "a"}}}, "Transport is required"},
		{"negative hold", Options{Engine: h.engine, Hold: -time.Second}, "must be positive"},
		{"short state secret", Options{Engine: h.engine, StateSecret: []byte("0123456789abcdef0123456789abcde")}, "StateSecret: 31 bytes, want at least 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A stdio upstream that dies during a call leaves that call unknown (it is
// no idempotent tool), and is started again: the next call reaches a new
// process.
func TestCommandUpstreamRestarts(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	proc := CommandUpstream("proc", []string{exe}, map[string]string{upstreamEnv: "1"})
	proc.ReadOnly = []ReadOnlyTool{{Name: "pid"}}
	h := newHarness(t, harnessOptions{upstreams: []Upstream{proc}})
	c := h.connect(alice, accept(true))
	res := h.call(c, "proc__pid", `{}`)
	if res.IsError {
		t.Fatalf("pid: %q", text(res))
	}
	first := text(res)
	res = h.call(c, "proc__die", `{}`)
	if sc := structured(t, res); !res.IsError || sc["status"] != "unknown" {
		t.Fatalf("a call during which the upstream died: %q %v, want unknown", text(res), sc)
	}
	if p := h.proposals(alice)[0]; p.Status != cstype.StatusUnknown || len(p.Decisions) != 1 {
		t.Fatalf("proposal %s: want unknown after an approval", p.Status)
	}
	var second string
	h.until("a call to reach the restarted upstream", func() bool {
		res := h.call(c, "proc__pid", `{}`)
		second = text(res)
		return !res.IsError
	})
	if second == first {
		t.Fatalf("pid %s before and after the restart", first)
	}
}

// The client is asked only when its caller may decide the proposal through
// mcp: not under a rule whose channels leave mcp out, nor when the rule's
// approvers are others. Those calls hold, and a decision elsewhere lets the
// repeat run.
func TestNotAskedWhenCallerMayNotDecide(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rule    countersign.Rule
		decider countersign.Identity
	}{
		{"channels without mcp", countersign.Rule{Match: "up__send_email", Effect: countersign.EffectAsk, Channels: []string{"web", "api"}}, alice},
		{"another approver", countersign.Rule{Match: "up__send_email", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}}, bob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, rules: []countersign.Rule{tc.rule}})
			c := h.connect(alice, accept(true))
			res := h.call(c, "up__send_email", email)
			if sc := structured(t, res); sc["status"] != "pending" || len(c.elicitations()) != 0 {
				t.Fatalf("result %v after %d elicitations: want pending, not asked", sc, len(c.elicitations()))
			}
			pid := structured(t, res)["proposal_id"].(string)
			if _, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: tc.decider, ProposalID: pid, Verdict: countersign.Approve, Via: "api"}); err != nil {
				t.Fatal(err)
			}
			res = h.call(c, "up__send_email", email)
			if res.IsError || len(h.up.callsOf("send_email")) != 1 || len(c.elicitations()) != 0 {
				t.Fatalf("after %s approved: %q, %d upstream calls", tc.decider.Actor, text(res), len(h.up.callsOf("send_email")))
			}
		})
	}
}

// A proposal nobody decides in its rule's time ends the held call expired.
func TestExpired(t *testing.T) {
	h := newHarness(t, harnessOptions{hold: time.Minute, rules: []countersign.Rule{
		{Match: "up__send_email", Effect: countersign.EffectAsk, TTL: 10 * time.Millisecond},
	}})
	c := h.connect(alice, nil)
	res := h.call(c, "up__send_email", email)
	if sc := structured(t, res); !res.IsError || sc["status"] != "expired" || !strings.Contains(text(res), "expired") {
		t.Fatalf("result %q %v: want expired", text(res), sc)
	}
	if len(h.up.callsOf("send_email")) != 0 {
		t.Fatal("an expired call ran")
	}
}

// A call approved after its hold answered pending runs only when it is made
// again; when it is not, it ends not_collected, and the call made too late
// says it was approved but not called again in time, not that nobody decided.
func TestApprovedNotCollected(t *testing.T) {
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, rules: []countersign.Rule{
		{Match: "up__send_email", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, TTL: 500 * time.Millisecond},
	}})
	c := h.connect(alice, nil)
	res := h.call(c, "up__send_email", email)
	pid, _ := structured(t, res)["proposal_id"].(string)
	if structured(t, res)["status"] != "pending" || pid == "" {
		t.Fatalf("result %q: want pending", text(res))
	}
	dr, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: bob, ProposalID: pid, Verdict: countersign.Approve, Via: "api"})
	if err != nil || !dr.AwaitingCaller {
		t.Fatalf("Decide: %+v, %v; want an approval awaiting the caller", dr, err)
	}
	// Wait expires the proposal at its deadline; it executes nothing.
	p, err := h.engine.Wait(h.ctx, alice, pid)
	if err != nil || p.Status != cstype.StatusExpired || p.Outcome == nil || p.Outcome.Reason != cstype.ReasonNotCollected {
		t.Fatalf("after the deadline: %+v, %v; want expired, not_collected", p, err)
	}
	res = h.call(c, "up__send_email", email)
	if sc := structured(t, res); sc["status"] != "expired" || !strings.Contains(text(res), "approved, but the agent did not call again before") {
		t.Fatalf("result %q %v: want expired, saying the agent did not call again", text(res), sc)
	}
	if len(h.up.callsOf("send_email")) != 0 {
		t.Fatal("a lapsed approval ran")
	}
}

// A tool the upstream withdraws is withdrawn from the gateway's clients.
func TestToolRemoved(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := h.connect(alice, nil)
	h.up.server.RemoveTools("fails")
	h.until("up__fails to leave the list", func() bool {
		lr, err := c.cs.ListTools(h.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(lr.Tools, func(tl *mcp.Tool) bool { return tl.Name == "up__fails" })
	})
	if _, err := c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__fails", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a withdrawn tool can still be called")
	}
}

// The gateway's stop lets a call whose upstream call is running finish,
// its upstream still connected: the outcome is known, not unknown.
func TestStopDrainsCalls(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := h.connect(alice, nil)
	release := h.up.holdOn("flaky")
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__flaky", Arguments: map[string]any{}})
		answered <- answer{res, err}
	}()
	h.until("the upstream call to begin", func() bool { return len(h.up.callsOf("flaky")) == 1 })
	stopped := make(chan struct{})
	go func() {
		h.stop()
		close(stopped)
	}()
	h.until("Run to wait for the call", h.gw.draining)
	select {
	case <-stopped:
		t.Fatal("Run returned with a call in flight")
	default:
	}
	release()
	a := <-answered
	<-stopped
	if a.err != nil || a.res.IsError || text(a.res) != "done" {
		t.Fatalf("the call running at stop: %v %q, want its result", a.err, text(a.res))
	}
	if p := h.proposals(alice)[0]; p.Status != cstype.StatusSucceeded {
		t.Fatalf("proposal %s, want succeeded", p.Status)
	}
}

// draining reports whether Run is waiting for the calls in flight.
func (g *Gateway) draining() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.drained != nil
}

// TestElicitationMessageIsPlainText: arguments holding a right-to-left
// override, a zero-width space, a tag character and a C1 control reach the
// approver, in the elicitation message the SDK client shows, as \u{XXXX};
// the upstream still gets the arguments exactly.
func TestElicitationMessageIsPlainText(t *testing.T) {
	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{protocol: pr.version})
			c := h.connect(alice, accept(true))
			args := `{"to":"bob@example.com","body":"pay \u202Efdp.exe\u200B \udb40\udc41 \u0085"}`
			if res := h.call(c, "up__send_email", args); res.IsError {
				t.Fatalf("result %q, want the upstream's", text(res))
			}
			asked := c.elicitations()
			if len(asked) != 1 {
				t.Fatalf("%d elicitations, want 1", len(asked))
			}
			msg := asked[0].Message
			if i := strings.IndexAny(msg, "\u202E\u200B\U000E0041\u0085"); i >= 0 {
				t.Errorf("the message shows %q as it is: %q", []rune(msg[i:])[0], msg)
			}
			if want := `"body":"pay \u{202E}fdp.exe\u{200B} \u{E0041} \u{0085}"`; !strings.Contains(msg, want) {
				t.Errorf("message %q lacks %s", msg, want)
			}
			if !strings.Contains(msg, "\n\n") {
				t.Errorf("message %q lost its own line breaks", msg)
			}
			calls := h.up.callsOf("send_email")
			if len(calls) != 1 || !strings.Contains(calls[0].input, "pay \u202Efdp.exe\u200B \U000E0041 \u0085") {
				t.Errorf("the upstream got %+v, want the arguments as sent", calls)
			}
		})
	}
}

// An agent credential is never offered an elicitation, however willing its
// client: the call holds for a person to decide, on either protocol
// generation (docs/api.md Part 3: "MCP: no elicitation is offered and the call
// holds").
func TestAgentIsNotAsked(t *testing.T) {
	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{protocol: pr.version, hold: 20 * time.Millisecond})
			agent := alice
			agent.Kind = countersign.KindAgent
			c := h.connect(agent, accept(true))
			res := h.call(c, "up__send_email", email)
			if sc := structured(t, res); sc["status"] != "pending" {
				t.Fatalf("the agent's call: %v, want pending", sc)
			}
			if res.InputRequests != nil || len(c.elicitations()) != 0 || len(h.up.callsOf("send_email")) != 0 {
				t.Fatalf("input requests %v, %d elicitations, %d upstream calls: want none", res.InputRequests, len(c.elicitations()), len(h.up.callsOf("send_email")))
			}
		})
	}
}
