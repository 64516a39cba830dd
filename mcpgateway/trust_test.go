package mcpgateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stores the trust tests run on.
var trustStores = []string{"sqlite", "pg"}

const (
	// dropSchema is the input schema of drop_table, a destructive tool
	// its upstream annotates readOnlyHint.
	dropSchema = `{"type":"object","properties":{"table":{"type":"string"}}}`
	// searchSchema is the schema of search, which the operator pins.
	searchSchema = `{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}`
)

// newClaimsUpstream is an upstream "ext" that no rule of testPolicy
// matches, so that the defaults decide: reads run, writes ask. Its tools:
// drop_table, annotated readOnlyHint and idempotentHint though it is
// neither; lookup, unannotated; search and stale, each with a schema.
func newClaimsUpstream() *upstreamServer {
	u := newBareUpstreamServer(true)
	u.addTool("drop_table", dropSchema, &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: ptr(true)})
	u.addTool("lookup", anySchema, nil)
	u.addTool("search", searchSchema, &mcp.ToolAnnotations{ReadOnlyHint: true})
	u.addTool("stale", searchSchema, &mcp.ToolAnnotations{ReadOnlyHint: true})
	return u
}

// An upstream's annotations are its claims: without trust_annotations a
// destructive tool annotated readOnlyHint is a write, asked of a human, not
// run; a tool is a read only when the operator lists it (with its schema
// pin matching, when pinned); a tool added upstream later is a write.
func TestAnnotationsAreClaims(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) { testAnnotationsAreClaims(t, kind) })
	}
}

func testAnnotationsAreClaims(t *testing.T, kind string) {
	ext := newClaimsUpstream()
	pin, err := SchemaSHA256(json.RawMessage(searchSchema))
	if err != nil {
		t.Fatal(err)
	}
	wrongPin := strings.Repeat("0", 64)
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: newStore(t, kind), upstreams: []Upstream{{
		Name: "ext", Transport: ext.transport,
		ReadOnly: []ReadOnlyTool{{Name: "lookup"}, {Name: "search", SchemaSHA256: strings.ToUpper(pin)}, {Name: "stale", SchemaSHA256: wrongPin}},
	}}})
	c := h.connect(alice, nil)

	res := h.call(c, "ext__drop_table", `{"table":"users"}`)
	if sc := structured(t, res); !res.IsError || sc["status"] != "pending" {
		t.Fatalf("drop_table, annotated readOnlyHint: %q %v, want pending: a write asks its requester", text(res), sc)
	}
	if n := len(ext.callsOf("drop_table")); n != 0 {
		t.Fatalf("the upstream's drop_table ran %d times without a human", n)
	}
	for name, want := range map[string]countersign.Kind{
		"ext__drop_table": countersign.KindWrite, "ext__lookup": countersign.KindRead,
		"ext__search": countersign.KindRead, "ext__stale": countersign.KindWrite,
	} {
		if a, ok := h.engine.Action(name); !ok || a.Kind() != want {
			t.Errorf("%s: registered %v, kind %v; want %s", name, ok, a, want)
		}
	}
	if a, _ := h.engine.Action("ext__drop_table"); a.Idempotent() {
		t.Error("drop_table is idempotent on its upstream's word")
	}
	for tool, args := range map[string]string{"lookup": `{}`, "search": `{"q":"x"}`} {
		res := h.call(c, "ext__"+tool, args)
		if res.IsError || text(res) != tool+" done" {
			t.Fatalf("%s, listed read_only: %q %v, want it run at once", tool, text(res), res.StructuredContent)
		}
	}
	res = h.call(c, "ext__stale", `{"q":"x"}`)
	if sc := structured(t, res); sc["status"] != "pending" || len(ext.callsOf("stale")) != 0 {
		t.Fatalf("stale, listed with a pin its schema does not match: %v, want pending", sc)
	}

	// A tool the upstream adds later, annotated readOnlyHint, is a write.
	ext.addTool("added_later", anySchema, &mcp.ToolAnnotations{ReadOnlyHint: true})
	h.until("added_later to be listed", func() bool {
		lr, err := c.cs.ListTools(h.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(lr.Tools, func(tl *mcp.Tool) bool { return tl.Name == "ext__added_later" })
	})
	res = h.call(c, "ext__added_later", `{}`)
	if sc := structured(t, res); sc["status"] != "pending" || len(ext.callsOf("added_later")) != 0 {
		t.Fatalf("added_later: %v, want pending", sc)
	}
	// The reads left no record; each write is a pending proposal.
	got := map[string]cstype.Status{}
	for _, p := range h.proposals(alice) {
		got[p.Action] = p.Status
	}
	want := map[string]cstype.Status{"ext__drop_table": cstype.StatusPending, "ext__stale": cstype.StatusPending, "ext__added_later": cstype.StatusPending}
	if len(got) != len(want) {
		t.Fatalf("proposals %v, want %v", got, want)
	}
	for a, st := range want {
		if got[a] != st {
			t.Fatalf("proposals %v, want %v", got, want)
		}
	}
}

// trust_annotations: true honours both hints: the upstream's word makes
// drop_table a read, run at once, and idempotent.
func TestTrustAnnotations(t *testing.T) {
	ext := newClaimsUpstream()
	h := newHarness(t, harnessOptions{upstreams: []Upstream{{Name: "ext", Transport: ext.transport, TrustAnnotations: true}}})
	c := h.connect(alice, nil)
	res := h.call(c, "ext__drop_table", `{"table":"users"}`)
	if res.IsError || text(res) != "drop_table done" || len(h.proposals(alice)) != 0 {
		t.Fatalf("drop_table with trusted annotations: %q %v", text(res), res.StructuredContent)
	}
	if a, _ := h.engine.Action("ext__drop_table"); !a.Idempotent() {
		t.Error("idempotentHint is not honoured with trust_annotations")
	}
	if a, _ := h.engine.Action("ext__lookup"); a.Kind() != countersign.KindWrite {
		t.Error("lookup, unannotated and unlisted, is a read")
	}
}

// idempotentHint alone does not make a tool retried: a broken connection
// during its call is unknown, the upstream called once; listed in
// idempotent it is retried with the same operation id (TestBrokenConnection).
func TestIdempotentHintNotTrusted(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) {
			h := newHarness(t, harnessOptions{store: newStore(t, kind), trust: func(u *Upstream) {
				u.ReadOnly = []ReadOnlyTool{{Name: "read_note"}}
			}})
			c := h.connect(alice, nil)
			h.up.breakOn("put_record")
			res := h.call(c, "up__put_record", `{"key":"k1"}`)
			if sc := structured(t, res); !res.IsError || sc["status"] != "unknown" {
				t.Fatalf("put_record, annotated idempotentHint, not listed: %q %v, want unknown", text(res), sc)
			}
			if n := len(h.up.callsOf("put_record")); n != 1 {
				t.Fatalf("upstream called %d times, want once", n)
			}
			if p := h.proposals(alice)[0]; p.Status != cstype.StatusUnknown {
				t.Fatalf("proposal %s, want unknown", p.Status)
			}
		})
	}
}

// An upstream that changes a tool without announcing it: before the
// approved call runs, the gateway lists the tools afresh, finds another
// version, and fails the proposal ACTION_VERSION_CHANGED without calling
// the upstream; the next call proposes the tool as it is now.
func TestActionVersionChanged(t *testing.T) {
	for _, kind := range trustStores {
		for _, change := range []struct {
			name  string
			apply func(u *upstreamServer)
		}{
			{"annotations", func(u *upstreamServer) {
				u.addSendEmailWith(sendEmailSchema, &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: ptr(false)})
			}},
			{"schema", func(u *upstreamServer) { u.addSendEmail(sendEmailSchemaV2) }},
		} {
			t.Run(kind+"/"+change.name, func(t *testing.T) { testActionVersionChanged(t, kind, change.apply) })
		}
	}
}

func testActionVersionChanged(t *testing.T, kind string, change func(*upstreamServer)) {
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: newStore(t, kind), silent: true})
	c := h.connect(alice, nil)
	res := h.call(c, "up__send_email", email)
	pid := structured(t, res)["proposal_id"].(string)
	before, _ := h.engine.Action("up__send_email")

	change(h.up)
	if a, _ := h.engine.Action("up__send_email"); a.Version() != before.Version() {
		t.Fatal("the gateway learned of the change before the execution: the test's upstream announced it")
	}
	if _, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: alice, ProposalID: pid, Verdict: countersign.Approve, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	res = h.call(c, "up__send_email", email)
	sc := structured(t, res)
	e, _ := sc["error"].(map[string]any)
	if !res.IsError || sc["status"] != "failed" || sc["proposal_id"] != pid || e["code"] != "ACTION_VERSION_CHANGED" || !strings.Contains(text(res), "ACTION_VERSION_CHANGED") {
		t.Fatalf("the approved call after a silent change: %q %v, want failed with error.code ACTION_VERSION_CHANGED", text(res), sc)
	}
	if n := len(h.up.callsOf("send_email")); n != 0 {
		t.Fatalf("the upstream was called %d times for a call approved for another version", n)
	}
	p, err := h.engine.Proposal(h.ctx, alice, pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != cstype.StatusFailed || p.Outcome == nil || p.Outcome.Executed == nil || *p.Outcome.Executed ||
		p.Outcome.Error == nil || !strings.HasPrefix(*p.Outcome.Error, "ACTION_VERSION_CHANGED: ") {
		t.Fatalf("proposal %s, outcome %+v: want failed, not executed, ACTION_VERSION_CHANGED", p.Status, p.Outcome)
	}
	// The listing that found the change is exported: the next call is a
	// new proposal under the new version.
	after, _ := h.engine.Action("up__send_email")
	if after.Version() == before.Version() {
		t.Fatalf("version %s unchanged after the gateway saw the change", after.Version())
	}
	res = h.call(c, "up__send_email", email)
	if sc := structured(t, res); sc["status"] != "pending" || sc["proposal_id"] == pid {
		t.Fatalf("the next call: %v, want a new pending proposal", sc)
	}
	for _, q := range h.proposals(alice) {
		if q.ID != pid && q.ActionVersion != after.Version() {
			t.Fatalf("the new proposal is of version %s, want %s", q.ActionVersion, after.Version())
		}
	}
}

// unsolicited is an approval that no question asked for.
var unsolicited = mcp.InputResponseMap{approvalInput: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}

// An input response the gateway did not ask for decides nothing, on either
// protocol generation: a client that was never asked sends an approval
// naming its pending proposal (or any state), and the proposal stays
// pending, the upstream uncalled.
func TestUnsolicitedAnswerDecidesNothing(t *testing.T) {
	for _, kind := range trustStores {
		for _, pr := range protocols {
			t.Run(kind+"/"+pr.name, func(t *testing.T) {
				h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: newStore(t, kind), protocol: pr.version})
				c := h.connect(alice, nil)
				res := h.call(c, "up__send_email", email)
				pid := structured(t, res)["proposal_id"].(string)
				for _, state := range []string{pid, "", randomID()} {
					res, err := c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(email),
						InputResponses: unsolicited, RequestState: state})
					if err != nil {
						t.Fatal(err)
					}
					if sc := structured(t, res); sc["status"] != "pending" || sc["proposal_id"] != pid {
						t.Fatalf("an unsolicited approval with state %q: %v, want the proposal still pending", state, sc)
					}
				}
				p, err := h.engine.Proposal(h.ctx, alice, pid)
				if err != nil {
					t.Fatal(err)
				}
				if p.Status != cstype.StatusPending || len(p.Decisions) != 0 || len(h.up.callsOf("send_email")) != 0 {
					t.Fatalf("proposal %s with decisions %+v, %d upstream calls: want pending, undecided, not run",
						p.Status, p.Decisions, len(h.up.callsOf("send_email")))
				}
			})
		}
	}
}

// An answer decides only the proposal, in the session, and from the
// credential the gateway asked: the state of one question presented for
// another proposal, or in another session of the same actor, is ignored;
// presented as asked, it decides once.
func TestAnswerBoundToQuestion(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) { testAnswerBoundToQuestion(t, kind) })
	}
}

// asked calls up__send_email with args and returns the question's request
// state and the proposal its form names.
func (h *harness) asked(c *client, args string) (state, proposalID string) {
	h.t.Helper()
	res := h.call(c, "up__send_email", args)
	form, _ := res.InputRequests[approvalInput].(*mcp.ElicitParams)
	m := proposalInForm.FindStringSubmatch(formMessage(form))
	if form == nil || res.RequestState == "" || m == nil {
		h.t.Fatalf("call %s: %+v, want the approval form as an input request", args, res)
	}
	return res.RequestState, m[1]
}

var proposalInForm = regexp.MustCompile(`Proposal (\S+), open until`)

func formMessage(form *mcp.ElicitParams) string {
	if form == nil {
		return ""
	}
	return form.Message
}

// answerWith repeats the call with an approval under state.
func (h *harness) answerWith(c *client, args, state string) *mcp.CallToolResult {
	h.t.Helper()
	res, err := c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(args),
		InputResponses: unsolicited, RequestState: state})
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// undecidedAnswer reports whether a repeat's answer left its proposal to be
// decided: pending, or the question asked again.
func undecidedAnswer(t *testing.T, res *mcp.CallToolResult) bool {
	t.Helper()
	if res.InputRequests != nil {
		return true
	}
	return structured(t, res)["status"] == "pending"
}

func testAnswerBoundToQuestion(t *testing.T, kind string) {
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: newStore(t, kind)})
	a := h.connectManual(alice)
	const email2 = `{"to":"carol@example.com","body":"hi"}`
	stateA, p1 := h.asked(a, email)
	_, p2 := h.asked(a, email2)

	// The state of p1's question on p2's repeat: no answer.
	if res := h.answerWith(a, email2, stateA); !undecidedAnswer(t, res) {
		t.Fatalf("p1's state presented for p2: %+v, want p2 undecided", res)
	}
	// Another session of alice's (another credential: a Serve of its own)
	// has its own proposal; p1's state decides neither.
	b := h.connectManual(alice)
	_, p3 := h.asked(b, email)
	if res := h.answerWith(b, email, stateA); !undecidedAnswer(t, res) {
		t.Fatalf("p1's state presented in another session: %+v, want undecided", res)
	}
	if p1 == p2 || p1 == p3 || p2 == p3 {
		t.Fatalf("proposals %s %s %s: want three", p1, p2, p3)
	}
	for _, id := range []string{p1, p2, p3} {
		now, err := h.engine.Proposal(h.ctx, alice, id)
		if err != nil {
			t.Fatal(err)
		}
		if now.Status != cstype.StatusPending || len(now.Decisions) != 0 {
			t.Fatalf("proposal %s is %s with %+v after answers to other questions", id, now.Status, now.Decisions)
		}
	}
	if n := len(h.up.callsOf("send_email")); n != 0 {
		t.Fatalf("the upstream ran %d times", n)
	}
	// Presented as asked, it decides p1, which runs once.
	res := h.answerWith(a, email, stateA)
	if res.IsError || text(res) != "sent to bob@example.com" || len(h.up.callsOf("send_email")) != 1 {
		t.Fatalf("the answer to p1's question: %q %v, want it approved and run once", text(res), res.StructuredContent)
	}
	if now, _ := h.engine.Proposal(h.ctx, alice, p1); now.Status != cstype.StatusSucceeded || len(now.Decisions) != 1 || now.Decisions[0].Via != countersign.ViaMCP {
		t.Fatalf("p1 %s %+v, want succeeded, approved via mcp", now.Status, now.Decisions)
	}
}

// The headers configured for an HTTP upstream go to its origin alone: a
// redirect to another host is not followed, and that host never sees them;
// a redirect within the origin is followed, headers and all.
func TestHTTPUpstreamHeadersStayWithTheirHost(t *testing.T) {
	type seen struct {
		mu      sync.Mutex
		auth    []string
		request int
	}
	record := func(s *seen, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.request++
		if v := r.Header.Get("Authorization"); v != "" {
			s.auth = append(s.auth, v)
		}
	}
	up := newUpstreamServer()
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.server }, nil)
	var other, home seen
	otherHost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(&other, r)
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(otherHost.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(&home, r)
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, otherHost.URL+"/mcp", http.StatusTemporaryRedirect)
		case "/moved":
			http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect)
		default:
			if r.Header.Get("Authorization") != "Bearer upstream-secret" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			sdk.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(redirecting.Close)

	engine, err := countersign.New(countersign.Options{Store: newStore(t, "mem"), Policy: testPolicy(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	secret := http.Header{"Authorization": {"Bearer upstream-secret"}}
	gw, err := New(Options{Engine: engine, Logger: quiet(), MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Upstreams: []Upstream{
		HTTPUpstream("away", redirecting.URL+"/away", secret),
		HTTPUpstream("moved", redirecting.URL+"/moved", secret),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := gw.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	down := gw.Down()
	if len(down) != 1 || down[0].Name != "away" || !strings.Contains(down[0].Reason, "another origin") {
		t.Fatalf("down %+v, want away alone, its redirect not followed", down)
	}
	if _, ok := engine.Action("moved__send_email"); !ok {
		t.Fatal("the upstream redirected within its origin is not connected")
	}
	other.mu.Lock()
	defer other.mu.Unlock()
	if len(other.auth) != 0 {
		t.Fatalf("the other host saw the configured header %d times (of %d requests)", len(other.auth), other.request)
	}
	home.mu.Lock()
	defer home.mu.Unlock()
	if len(home.auth) == 0 {
		t.Fatal("the configured host never saw the header")
	}
}

// A tool the upstream withdrew after the proposal: the approved call, run
// by its caller through the engine (the gateway no longer serves the
// tool), fails ACTION_VERSION_CHANGED, not executed.
func TestWithdrawnToolNotExecuted(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) { testWithdrawnToolNotExecuted(t, kind) })
	}
}

func testWithdrawnToolNotExecuted(t *testing.T, kind string) {
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: newStore(t, kind)})
	c := h.connect(alice, nil)
	res := h.call(c, "up__send_email", email)
	pid := structured(t, res)["proposal_id"].(string)
	h.up.server.RemoveTools("send_email")
	h.until("up__send_email to leave the list", func() bool {
		lr, err := c.cs.ListTools(h.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(lr.Tools, func(tl *mcp.Tool) bool { return tl.Name == "up__send_email" })
	})
	if _, err := h.engine.Decide(h.ctx, &countersign.Decision{Identity: alice, ProposalID: pid, Verdict: countersign.Approve, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	p, err := h.engine.Proposal(h.ctx, alice, pid)
	if err != nil {
		t.Fatal(err)
	}
	// The repeat the gateway would make, in its own thread.
	out, err := h.engine.Call(h.ctx, &countersign.Call{Identity: alice, ThreadID: p.ThreadID, ThreadOrigin: countersign.ThreadMCPGateway,
		ToolCallID: p.ToolCallID, Action: p.Action, Input: p.RawInput, Mode: countersign.ModeWait, WaitTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != countersign.ResultFailed || out.Executed == nil || *out.Executed || !strings.HasPrefix(out.Error, "ACTION_VERSION_CHANGED: ") {
		t.Fatalf("the approved call of a withdrawn tool: %s executed %v %q, want failed, not executed, ACTION_VERSION_CHANGED", out.Status, out.Executed, out.Error)
	}
	if n := len(h.up.callsOf("send_email")); n != 0 {
		t.Fatalf("the upstream was called %d times", n)
	}
}

// TestUpstreamURLSecretsStayHidden: an HTTP upstream's URL may carry a
// token (query, userinfo); net/http repeats the URL in its errors, and the
// gateway keeps, logs and reports (/readyz) an upstream's failure. None of
// them shows the token (docs/api.md Part 3: secrets in URLs never appear in
// logs or answers).
func TestUpstreamURLSecretsStayHidden(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	addr := closed.Listener.Addr().String()
	closed.Close() // nothing listens there now: every connection is refused
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	engine, err := countersign.New(countersign.Options{Store: newStore(t, "mem"), Policy: testPolicy(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	const token = "tok-3f9a7c1e"
	gw, err := New(Options{Engine: engine, Logger: log, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Upstreams: []Upstream{
		HTTPUpstream("tokened", "http://user:"+token+"@"+addr+"/mcp?access_token="+token, nil),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = gw.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_ = gw.WaitConnected(ctx)
	down := gw.Down()
	if len(down) != 1 || down[0].Reason == "" {
		t.Fatalf("down %+v, want the unreachable upstream with a reason", down)
	}
	if strings.Contains(down[0].Reason, token) {
		t.Errorf("the reason shows the URL's token: %s", down[0].Reason)
	}
	// The failure is kept (and WaitConnected returns) just before it is
	// logged: wait for the log line.
	logged := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logged(), "mcp upstream down") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(logged(), "mcp upstream down") {
		t.Fatalf("no log of the upstream being down:\n%s", logged())
	}
	if strings.Contains(logged(), token) {
		t.Errorf("the logs show the URL's token:\n%s", logged())
	}
}

// lockedWriter serialises writes to a builder shared with the test.
type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
