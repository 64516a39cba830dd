package mcpgateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The identities of the tests: alice and bob of acme, mallory of another
// tenant.
var (
	alice   = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	bob     = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
	mallory = countersign.Identity{Tenant: "evil", Actor: "mallory"}
)

// testPolicy asks for every tool of the upstream "up" but its reads,
// which a longer glob allows; it denies up__secret, and allows the two
// tools the broken-connection tests run without a human.
func testPolicy() *countersign.Policy {
	return &countersign.Policy{Rules: []countersign.Rule{
		{Match: "up__*", Effect: countersign.EffectAsk, Approvers: []string{"requester"}},
		{Match: "up__read_*", Effect: countersign.EffectAllow},
		{Match: "up__secret", Effect: countersign.EffectDeny},
		{Match: "up__flaky", Effect: countersign.EffectAllow},
		{Match: "up__put_record", Effect: countersign.EffectAllow},
	}}
}

// upstreamCall is one call the upstream received.
type upstreamCall struct {
	tool        string
	input       string
	operationID string
}

// upstreamServer is a real Go SDK MCP server with a few tools, reached by
// the gateway over in-memory transports: each connection the gateway makes
// is a new server session, which a test may break.
type upstreamServer struct {
	server *mcp.Server

	mu       sync.Mutex
	calls    []upstreamCall
	sessions []*mcp.ServerSession
	// conns are the sessions' transport connections, which a broken call
	// closes under its session.
	conns map[*mcp.ServerSession]mcp.Connection
	// breakNext makes the next call of a tool close its connection while
	// the call runs, without answering it.
	breakNext map[string]bool
	// hold makes the calls of a tool wait, once they are recorded, until
	// the channel is closed.
	hold map[string]chan struct{}
}

const (
	sendEmailSchema = `{"type":"object","required":["to","body"],"additionalProperties":false,` +
		`"properties":{"to":{"type":"string"},"body":{"type":"string"}}}`
	sendEmailSchemaV2 = `{"type":"object","required":["to","body"],"additionalProperties":false,` +
		`"properties":{"to":{"type":"string"},"body":{"type":"string"},"cc":{"type":"string"}}}`
	readNoteSchema = `{"type":"object","required":["id"],"properties":{"id":{"type":"string"}}}`
	recordSchema   = `{"type":"object","required":["key"],"properties":{"key":{"type":"string"}}}`
	anySchema      = `{"type":"object"}`
)

// newUpstreamServer is the upstream of most tests: send_email, a write;
// read_note, annotated readOnlyHint; put_record, annotated idempotentHint;
// flaky, secret and fails.
func newUpstreamServer() *upstreamServer { return newUpstreamServerAnnouncing(true) }

// newUpstreamServerAnnouncing is newUpstreamServer, changing its tools
// silently unless announce.
func newUpstreamServerAnnouncing(announce bool) *upstreamServer {
	u := newBareUpstreamServer(announce)
	u.addSendEmail(sendEmailSchema)
	u.server.AddTool(&mcp.Tool{
		Name: "read_note", Description: "Read a note", InputSchema: json.RawMessage(readNoteSchema),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Read note"},
	}, u.handler("read_note", func(in map[string]any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("note %v", in["id"])}},
			StructuredContent: map[string]any{"text": fmt.Sprintf("note %v", in["id"])}}
	}))
	u.server.AddTool(&mcp.Tool{
		Name: "put_record", Description: "Store a record", InputSchema: json.RawMessage(recordSchema),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true},
	}, u.handler("put_record", func(in map[string]any) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("stored %v", in["key"])}}}
	}))
	u.server.AddTool(&mcp.Tool{Name: "flaky", Description: "A write", InputSchema: json.RawMessage(anySchema)},
		u.handler("flaky", func(map[string]any) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}
		}))
	u.server.AddTool(&mcp.Tool{Name: "secret", Description: "Denied by the policy", InputSchema: json.RawMessage(anySchema)},
		u.handler("secret", func(map[string]any) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "leaked"}}}
		}))
	u.server.AddTool(&mcp.Tool{Name: "fails", Description: "Reports an error", InputSchema: json.RawMessage(anySchema)},
		u.handler("fails", func(map[string]any) *mcp.CallToolResult {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "disk full"}}}
		}))
	return u
}

// newBareUpstreamServer is an upstream without tools. A server that does
// not announce changes (announce false) changes its tools silently: the
// gateway learns of them only by listing them again.
func newBareUpstreamServer(announce bool) *upstreamServer {
	u := &upstreamServer{breakNext: map[string]bool{}, hold: map[string]chan struct{}{}}
	var opts *mcp.ServerOptions
	if !announce {
		opts = &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}}
	}
	u.server = mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, opts)
	return u
}

func (u *upstreamServer) addSendEmail(schema string) {
	u.addSendEmailWith(schema, &mcp.ToolAnnotations{DestructiveHint: ptr(false)})
}

func (u *upstreamServer) addSendEmailWith(schema string, ann *mcp.ToolAnnotations) {
	u.server.AddTool(&mcp.Tool{Name: "send_email", Description: "Send an email", InputSchema: json.RawMessage(schema),
		Annotations: ann},
		u.handler("send_email", func(in map[string]any) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("sent to %v", in["to"])}}}
		}))
}

// addTool adds a tool answering "<name> done".
func (u *upstreamServer) addTool(name, schema string, ann *mcp.ToolAnnotations) {
	u.server.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(schema), Annotations: ann},
		u.handler(name, func(map[string]any) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + " done"}}}
		}))
}

func ptr[T any](v T) *T { return &v }

// handler records the call, then answers with answer, or breaks the
// connection under the call when the test asked for it.
func (u *upstreamServer) handler(name string, answer func(map[string]any) *mcp.CallToolResult) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &in)
		op, _ := req.Params.Meta[MetaOperationID].(string)
		u.mu.Lock()
		u.calls = append(u.calls, upstreamCall{tool: name, input: string(req.Params.Arguments), operationID: op})
		broken := u.breakNext[name]
		delete(u.breakNext, name)
		wait := u.hold[name]
		u.mu.Unlock()
		if wait != nil {
			<-wait
		}
		if broken {
			// The connection is cut under the call, as a network would:
			// both ends' readers fail, which cancels this call, and it ends
			// unanswered. (Session.Close would wait for this handler to
			// return first, and so deadlock with it.)
			u.mu.Lock()
			conn := u.conns[req.Session]
			u.mu.Unlock()
			_ = conn.Close()
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return answer(in), nil
	}
}

func (u *upstreamServer) callsOf(tool string) []upstreamCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []upstreamCall
	for _, c := range u.calls {
		if c.tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// holdOn makes the calls of tool wait until release is called.
func (u *upstreamServer) holdOn(tool string) (release func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch := make(chan struct{})
	u.hold[tool] = ch
	return func() { close(ch) }
}

func (u *upstreamServer) breakOn(tool string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.breakNext[tool] = true
}

// transport connects a new server session for each connection the gateway
// makes.
func (u *upstreamServer) transport() (mcp.Transport, error) {
	ct, st := mcp.NewInMemoryTransports()
	kept := &keptTransport{Transport: st}
	ss, err := u.server.Connect(context.Background(), kept, nil)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	u.sessions = append(u.sessions, ss)
	if u.conns == nil {
		u.conns = map[*mcp.ServerSession]mcp.Connection{}
	}
	u.conns[ss] = kept.conn
	u.mu.Unlock()
	return ct, nil
}

// keptTransport remembers the connection it made.
type keptTransport struct {
	mcp.Transport
	conn mcp.Connection
}

func (t *keptTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	t.conn = c
	return c, err
}

func (u *upstreamServer) connections() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.sessions)
}

// harness is an engine on a real store, the upstream, and the gateway in
// front of it, running until the test ends.
type harness struct {
	t      *testing.T
	ctx    context.Context
	engine *countersign.Engine
	up     *upstreamServer
	gw     *Gateway
	// stop ends the gateway's Run and waits for it to return.
	stop func()
}

type harnessOptions struct {
	hold  time.Duration
	store store.Store
	// protocol, when set, is the only MCP protocol version the gateway
	// speaks to its clients.
	protocol string
	// upstreams, when set, replace the in-memory upstream "up".
	upstreams []Upstream
	// trust, when set, configures "up" instead of upTrust.
	trust func(*Upstream)
	// silent makes "up" change its tools without announcing it.
	silent bool
	// rules, when set, come before testPolicy's.
	rules []countersign.Rule
	// stateSecret, when set, signs the request states (default: a random
	// one of the gateway's own).
	stateSecret []byte
	// tasks offers MCP Tasks (Options.Tasks) and runs a worker beside the
	// gateway that executes them.
	tasks bool
}

// upTrust is what the operator of "up" vouches for: read_note is a read,
// put_record is idempotent. The annotations are not trusted.
func upTrust(u *Upstream) {
	u.ReadOnly = []ReadOnlyTool{{Name: "read_note"}}
	u.Idempotent = []string{"put_record"}
}

// protocols are the two ways a gateway asks its clients: through the
// tool's result (multi round-trip requests, the newest protocol) and with
// an elicitation request during the call (2025-11-25 and before).
var protocols = []struct{ name, version string }{
	{"multi round-trip", ""},
	{"2025-11-25", "2025-11-25"},
}

func newHarness(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	st := o.store
	if st == nil {
		st = memstore.New(nil)
	}
	policy := testPolicy()
	policy.Rules = append(o.rules, policy.Rules...)
	engine, err := countersign.New(countersign.Options{Store: st, Policy: policy,
		Logger: quiet(), RetryBackoff: time.Millisecond, WaitPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstreamServerAnnouncing(!o.silent)
	ups := o.upstreams
	if ups == nil {
		u := Upstream{Name: "up", Transport: up.transport}
		if o.trust != nil {
			o.trust(&u)
		} else {
			upTrust(&u)
		}
		ups = []Upstream{u}
	}
	gw, err := New(Options{Engine: engine, Hold: cmpOrDuration(o.hold, time.Minute), Logger: quiet(),
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Upstreams: ups, StateSecret: o.stateSecret, Tasks: o.tasks})
	if err != nil {
		t.Fatal(err)
	}
	if o.protocol != "" {
		gw.protocolVersions = []string{o.protocol}
	}
	ctx, cancel := context.WithCancel(context.Background())
	gwCtx, stopGateway := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gw.Run(gwCtx)
	}()
	stop := func() {
		stopGateway()
		<-done
	}
	t.Cleanup(func() {
		stop()
		cancel()
	})
	if err := gw.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	if o.tasks {
		w, err := engine.NewWorker(countersign.WorkerOptions{PollInterval: 20 * time.Millisecond, NoSealer: true})
		if err != nil {
			t.Fatal(err)
		}
		wctx, stopWorker := context.WithCancel(ctx)
		worked := make(chan struct{})
		go func() {
			defer close(worked)
			_ = w.Run(wctx)
		}()
		stopGatewayOnly := stop
		stop = func() {
			stopWorker()
			<-worked
			stopGatewayOnly()
		}
	}
	if down := gw.Down(); len(down) > 0 {
		t.Fatalf("upstream down after the first connection: %v", down)
	}
	return &harness{t: t, ctx: ctx, engine: engine, up: up, gw: gw, stop: stop}
}

// newStore opens an empty store of kind: mem, sqlite (a file of the
// test's) or pg (a schema of the test's; skipped without PostgreSQL, failed
// in CI).
func newStore(t *testing.T, kind string) store.Store {
	t.Helper()
	var s store.Store
	var err error
	switch kind {
	case "mem":
		return memstore.New(nil)
	case "sqlite":
		s, err = sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "cs.db"), nil)
	case "pg":
		dsn, schema := pgtest.NewSchema(t)
		s, err = pgstore.Open(context.Background(), pgtest.PoolDSN(dsn), &pgstore.Options{Schema: schema})
	default:
		t.Fatalf("unknown store %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func cmpOrDuration(d, fallback time.Duration) time.Duration {
	if d == 0 {
		return fallback
	}
	return d
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// client is a Go SDK client connected to the gateway as id, over an
// in-memory transport.
type client struct {
	cs *mcp.ClientSession
	// changed receives a value when the gateway announces a changed tool list.
	changed chan struct{}

	mu      sync.Mutex
	asked   []*mcp.ElicitParams
	answers func(*mcp.ElicitParams) *mcp.ElicitResult
}

// connect connects a client as id; answer, if not nil, makes it support
// elicitation and answers each request.
func (h *harness) connect(id countersign.Identity, answer func(*mcp.ElicitParams) *mcp.ElicitResult) *client {
	h.t.Helper()
	return h.connectWith(id, answer, nil)
}

// connectManual connects a client as id that declares elicitation but
// answers input requests itself: the SDK's multi round-trip middleware is
// off, so a call's input request comes back as its result, and the test
// sends what answers it likes.
func (h *harness) connectManual(id countersign.Identity) *client {
	h.t.Helper()
	return h.connectWith(id, accept(false), &mcp.MultiRoundTripOptions{Disabled: true})
}

func (h *harness) connectWith(id countersign.Identity, answer func(*mcp.ElicitParams) *mcp.ElicitResult, mrtr *mcp.MultiRoundTripOptions) *client {
	h.t.Helper()
	return h.connectServed(func(st mcp.Transport) error { return h.gw.Serve(h.ctx, st, id) }, answer, mrtr)
}

// connectServed connects a client to the gateway served by serve over an
// in-memory transport.
func (h *harness) connectServed(serve func(mcp.Transport) error, answer func(*mcp.ElicitParams) *mcp.ElicitResult, mrtr *mcp.MultiRoundTripOptions) *client {
	h.t.Helper()
	c := &client{changed: make(chan struct{}, 1), answers: answer}
	opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case c.changed <- struct{}{}:
		default:
		}
	}, MultiRoundTrip: mrtr}
	if answer != nil {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.mu.Lock()
			c.asked = append(c.asked, req.Params)
			c.mu.Unlock()
			return c.answers(req.Params), nil
		}
	}
	ct, st := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- serve(st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts).Connect(h.ctx, ct, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	c.cs = cs
	h.t.Cleanup(func() {
		_ = cs.Close()
		if err := <-served; err != nil && h.ctx.Err() == nil {
			h.t.Errorf("Serve: %v", err)
		}
	})
	return c
}

func (c *client) elicitations() []*mcp.ElicitParams {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.asked)
}

func (h *harness) call(c *client, tool string, args string) *mcp.CallToolResult {
	h.t.Helper()
	res, err := c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		h.t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

// accept approves (or, with approve false, rejects) every elicitation.
func accept(approve bool) func(*mcp.ElicitParams) *mcp.ElicitResult {
	return func(*mcp.ElicitParams) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve, "reason": "checked by a human"}}
	}
}

func answer(action string) func(*mcp.ElicitParams) *mcp.ElicitResult {
	return func(*mcp.ElicitParams) *mcp.ElicitResult { return &mcp.ElicitResult{Action: action} }
}

// text is a result's text contents.
func text(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			s += t.Text
		}
	}
	return s
}

// structured is a result's structuredContent as a map.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("structuredContent %s: %v", raw, err)
	}
	return m
}

// proposals lists the proposals id sees.
func (h *harness) proposals(id countersign.Identity) []*cstype.Proposal {
	h.t.Helper()
	page, err := h.engine.List(h.ctx, id, countersign.ListParams{})
	if err != nil {
		h.t.Fatal(err)
	}
	return page.Proposals
}

// until waits, without a deadline of its own (the test's is the bound),
// for cond to hold, looking again whenever the engine changes a proposal
// and otherwise every few milliseconds.
func (h *harness) until(what string, cond func() bool) {
	h.t.Helper()
	changed, stop := h.engine.Subscribe()
	defer stop()
	for !cond() {
		select {
		case <-changed:
		case <-time.After(5 * time.Millisecond):
		case <-h.ctx.Done():
			h.t.Fatalf("gave up waiting for %s", what)
		}
	}
}
