package mcpgateway

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/defaults"
	"github.com/countersign/countersign/internal/mcpname"
	"github.com/countersign/countersign/server/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults for Options.
const (
	// DefaultHold is how long a tools/call waits for a decision from another
	// channel before it answers pending: below the 60 seconds after which
	// common MCP clients give up on a request.
	DefaultHold = defaults.MCPHold
	// DefaultUpstreamWait is how long an approved call waits for its
	// upstream to be connected before it fails, not applied.
	DefaultUpstreamWait = 10 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the pause before an
	// upstream is connected again; it doubles while connections keep
	// failing.
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultSessionTimeout closes a streamable HTTP session nobody used
	// for this long, and with it the session's state.
	DefaultSessionTimeout = 30 * time.Minute
	// DefaultDrainTimeout bounds the wait for the calls in flight at
	// shutdown, as the worker's DefaultShutdownTimeout does for executions.
	DefaultDrainTimeout = countersign.DefaultShutdownTimeout
)

// MetaOperationID is the _meta key under which an upstream tools/call
// carries the proposal's operation id: the same across the retries of an
// idempotent tool, so an upstream may use it as its idempotency key.
const MetaOperationID = "countersign.dev/operation_id"

// Upstream is one upstream MCP server.
//
// What the server says of its tools is its claim: a tool is a read only
// when ReadOnly lists it (and its input schema hashes to the pin, when one
// is given), or when TrustAnnotations is set and the tool is annotated
// readOnlyHint. Every other tool, including one the server adds or renames
// later, is a write, which the policy gates. Likewise a broken connection
// during a call is retried only for a tool Idempotent lists, or one
// annotated idempotentHint when TrustAnnotations is set.
type Upstream struct {
	// Name prefixes the server's tools: they are exported as
	// <Name>__<tool>. Letters and digits, with single - or _ between them.
	Name string
	// Transport returns a new transport to the server, each time the
	// gateway connects (again): for a command, a new process.
	Transport func() (mcp.Transport, error)
	// ReadOnly are the server's tools that are reads, by their exact
	// upstream names (read_file, not fs__read_file), each named once.
	ReadOnly []ReadOnlyTool
	// Idempotent are the server's tools that the engine calls again, with
	// the same operation id, after a connection that broke during a call.
	Idempotent []string
	// TrustAnnotations honours the server's readOnlyHint and
	// idempotentHint annotations as if ReadOnly and Idempotent listed the
	// tools that carry them.
	TrustAnnotations bool
}

// ReadOnlyTool is one tool an upstream's operator vouches is a read.
type ReadOnlyTool struct {
	// Name is the tool's exact name upstream.
	Name string
	// SchemaSHA256, when set, pins the tool's input schema: the tool is a
	// read only while SchemaSHA256(its inputSchema) is this (64 hex
	// digits), and a write otherwise.
	SchemaSHA256 string
}

// Options configures a Gateway. Zero fields take the documented defaults.
type Options struct {
	// Engine is the authority every call goes through. Required.
	Engine *countersign.Engine
	// Upstreams are the servers whose tools are re-exported.
	Upstreams []Upstream
	// Hold bounds how long a tools/call waits for a decision. Default
	// DefaultHold.
	Hold time.Duration
	// UpstreamWait bounds how long an approved call waits for its upstream
	// to be connected. Default DefaultUpstreamWait.
	UpstreamWait time.Duration
	// MinBackoff and MaxBackoff bound the pause between connections to an
	// upstream. Defaults DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Auth resolves the bearer tokens of Handler's requests. Required for
	// Handler; Serve takes its identity as an argument.
	Auth auth.Authenticator
	// SessionTimeout closes idle streamable HTTP sessions. Default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// DrainTimeout bounds how long Run, once its context ends, lets the
	// calls in flight finish before it ends them. Default
	// DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Logger receives the gateway's logs. Default slog.Default().
	Logger *slog.Logger
	// StateSecret signs the request states of 2026-07-28 in-band
	// approvals (HMAC-SHA256; config mcp.state_secret_env), at least
	// MinStateSecret bytes. Every process serving the gateway over one
	// store needs the same one, so that a state one made is accepted by
	// the others. Empty: a random secret of this gateway's own, whose
	// states only this gateway accepts, until it stops.
	StateSecret []byte
	// Tasks offers MCP Tasks (TasksExtension) to the 2026-07-28 clients
	// that declare the extension: their gated calls are made in
	// independent mode and answered with a task at once. Set it only where
	// workers execute the gateway's approved calls: a Worker of an engine
	// on the same store with the gateway's actions registered (`countersign
	// serve` and `countersign worker` run one; `countersign mcp` does not).
	Tasks bool
}

// MinStateSecret is the shortest Options.StateSecret: 256 bits, the
// HMAC-SHA256 key size.
const MinStateSecret = 32

// MaxUpstreamName is the longest Upstream.Name, leaving most of an action
// name's 128 bytes to the tool. An Upstream.Name is letters and digits with
// single - or _ between them, so that <server>__<tool> splits one way only
// (internal/mcpname, which package config checks names with too).
const MaxUpstreamName = mcpname.MaxUpstream

func (o *Options) validate() error {
	switch {
	case o.Engine == nil:
		return errors.New("mcpgateway: Options.Engine is required")
	case o.Hold < 0, o.UpstreamWait < 0, o.MinBackoff < 0, o.MaxBackoff < 0, o.SessionTimeout < 0, o.DrainTimeout < 0:
		return errors.New("mcpgateway: Options.Hold, UpstreamWait, MinBackoff, MaxBackoff, SessionTimeout and DrainTimeout must be positive")
	case len(o.StateSecret) > 0 && len(o.StateSecret) < MinStateSecret:
		return fmt.Errorf("mcpgateway: Options.StateSecret: %d bytes, want at least %d", len(o.StateSecret), MinStateSecret)
	case o.MinBackoff > 0 && o.MaxBackoff > 0 && o.MinBackoff > o.MaxBackoff:
		return fmt.Errorf("mcpgateway: Options.MinBackoff %v is more than MaxBackoff %v", o.MinBackoff, o.MaxBackoff)
	}
	seen := map[string]bool{}
	for i, u := range o.Upstreams {
		switch {
		case !mcpname.ValidUpstream(u.Name):
			return fmt.Errorf("mcpgateway: Options.Upstreams[%d].Name %q: want up to %d letters and digits, with single - or _ between them", i, u.Name, MaxUpstreamName)
		case seen[u.Name]:
			return fmt.Errorf("mcpgateway: Options.Upstreams[%d].Name %q: named twice", i, u.Name)
		case u.Transport == nil:
			return fmt.Errorf("mcpgateway: Options.Upstreams[%d].Transport is required", i)
		}
		seen[u.Name] = true
		names := make([]string, len(u.ReadOnly))
		for j, ro := range u.ReadOnly {
			names[j] = ro.Name
			if ro.SchemaSHA256 != "" && !sha256Hex.MatchString(ro.SchemaSHA256) {
				return fmt.Errorf("mcpgateway: Options.Upstreams[%d].ReadOnly[%d].SchemaSHA256 %q: want 64 hex digits", i, j, ro.SchemaSHA256)
			}
		}
		if err := checkToolNames(fmt.Sprintf("Options.Upstreams[%d].ReadOnly", i), names); err != nil {
			return err
		}
		if err := checkToolNames(fmt.Sprintf("Options.Upstreams[%d].Idempotent", i), u.Idempotent); err != nil {
			return err
		}
	}
	return nil
}

// sha256Hex is what a schema pin may be: a SHA-256 in hex, either case.
var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// checkToolNames checks a list of upstream tool names: each a tool name,
// each once.
func checkToolNames(field string, names []string) error {
	first := map[string]int{}
	for j, name := range names {
		if !ValidToolName(name) {
			return fmt.Errorf("mcpgateway: %s[%d] %q: want a tool's name upstream, 1 to 128 of letters, digits, _, - and dots", field, j, name)
		}
		if k, dup := first[name]; dup {
			return fmt.Errorf("mcpgateway: %s[%d] %q: already listed at [%d]", field, j, name, k)
		}
		first[name] = j
	}
	return nil
}

// Gateway re-exports the tools of its upstream servers, each call gated by
// the engine. It is safe for concurrent use. Run connects the upstreams;
// Handler and Serve serve the tools.
type Gateway struct {
	engine         *countersign.Engine
	hold           time.Duration
	upstreamWait   time.Duration
	minBackoff     time.Duration
	maxBackoff     time.Duration
	sessionTimeout time.Duration
	auth           auth.Authenticator
	log            *slog.Logger
	upstreams      []*upstream
	// stateSecret signs request states (see state.go).
	stateSecret []byte
	// tasks: Options.Tasks (see task.go).
	tasks bool

	// life ends when Run returns: the engine calls of tools/calls run under
	// it rather than under their request, so that a client that gives up
	// never interrupts an upstream call midway (see callTool).
	life     context.Context
	stopLife context.CancelFunc

	mu sync.Mutex
	// tools are the exported tools by action name; fronts the MCP servers
	// that serve them; registered the actions the gateway registered.
	tools      map[string]*tool
	fronts     map[*mcp.Server]*front
	registered map[string]*countersign.Action
	// sessions hold each MCP session's thread and repeated calls.
	sessions map[*mcp.ServerSession]*session
	// threads hold the state of the 2026-07-28 threads in use, by tenant
	// and thread id: they belong to no session.
	threads map[string]*session
	// sweptThreads is when sweepThreads last ran.
	sweptThreads time.Time
	// inflightCalls counts the tools/calls running; drained, when set, is
	// closed when it drops to zero.
	inflightCalls int
	drained       chan struct{}
	drainTimeout  time.Duration

	// protocolVersions, when set, narrows the protocol versions the
	// gateway's MCP servers speak: tests use it to be older servers.
	protocolVersions []string
}

// New validates the options and returns a Gateway. It connects nothing
// before Run.
func New(opts Options) (*Gateway, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	g := &Gateway{
		engine:         opts.Engine,
		hold:           cmp.Or(opts.Hold, DefaultHold),
		upstreamWait:   cmp.Or(opts.UpstreamWait, DefaultUpstreamWait),
		minBackoff:     cmp.Or(opts.MinBackoff, DefaultMinBackoff),
		maxBackoff:     cmp.Or(opts.MaxBackoff, DefaultMaxBackoff),
		sessionTimeout: cmp.Or(opts.SessionTimeout, DefaultSessionTimeout),
		drainTimeout:   cmp.Or(opts.DrainTimeout, DefaultDrainTimeout),
		auth:           opts.Auth,
		log:            opts.Logger,
		tools:          map[string]*tool{},
		fronts:         map[*mcp.Server]*front{},
		registered:     map[string]*countersign.Action{},
		sessions:       map[*mcp.ServerSession]*session{},
		threads:        map[string]*session{},
		tasks:          opts.Tasks,
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.stateSecret = bytes.Clone(opts.StateSecret)
	if len(g.stateSecret) == 0 {
		g.stateSecret = make([]byte, MinStateSecret)
		_, _ = rand.Read(g.stateSecret) // crypto/rand.Read never fails
	}
	g.maxBackoff = max(g.maxBackoff, g.minBackoff)
	g.life, g.stopLife = context.WithCancel(context.Background())
	for _, u := range opts.Upstreams {
		g.upstreams = append(g.upstreams, newUpstream(g, u))
	}
	return g, nil
}

// Run connects every upstream and keeps it connected, reconnecting with
// backoff, until ctx ends. Then it lets the calls in flight finish, for up
// to Options.DrainTimeout, with their upstreams still connected: an upstream
// call cut short would be an uncertain outcome. Then it ends the calls
// still running (holds, mostly), closes the upstream connections and
// returns ctx's error.
func (g *Gateway) Run(ctx context.Context) error {
	uctx, closeUpstreams := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, u := range g.upstreams {
		wg.Go(func() { u.run(uctx) })
	}
	<-ctx.Done()
	g.drain(g.drainTimeout)
	g.stopLife()
	closeUpstreams()
	wg.Wait()
	return ctx.Err()
}

// callStarted and callEnded count the tools/calls in flight, for drain.
func (g *Gateway) callStarted() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflightCalls++
}

func (g *Gateway) callEnded() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflightCalls--
	if g.inflightCalls == 0 && g.drained != nil {
		close(g.drained)
		g.drained = nil
	}
}

// drain waits until no call is in flight, or for d.
func (g *Gateway) drain(d time.Duration) {
	g.mu.Lock()
	if g.inflightCalls == 0 {
		g.mu.Unlock()
		return
	}
	if g.drained == nil {
		g.drained = make(chan struct{})
	}
	drained := g.drained
	g.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		g.log.Warn("mcp gateway: calls still running at shutdown are ended", "after", d)
	}
}

// WaitConnected blocks until every upstream has been tried once (connected
// and listed, or failed), or ctx ends. It lets a front end list the tools
// of the upstreams that start quickly before it serves.
func (g *Gateway) WaitConnected(ctx context.Context) error {
	for _, u := range g.upstreams {
		select {
		case <-u.tried:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Down names the upstreams that are not connected now, in configuration
// order, with the reason each is down.
func (g *Gateway) Down() []UpstreamDown {
	var out []UpstreamDown
	for _, u := range g.upstreams {
		if err := u.down(); err != nil {
			out = append(out, UpstreamDown{Name: u.name, Reason: err.Error()})
		}
	}
	return out
}

// UpstreamDown is an upstream that is not connected, and why.
type UpstreamDown struct {
	Name   string
	Reason string
}

// CloseSessions ends every MCP session the gateway serves: an HTTP
// server's shutdown calls it, so that sessions' open streams do not hold
// the shutdown until its deadline. Calls already approved still execute and
// settle under the gateway's life (see Run); their clients, gone, learn the
// outcome from the proposal.
func (g *Gateway) CloseSessions() {
	g.mu.Lock()
	var sessions []*mcp.ServerSession
	for _, f := range g.fronts {
		for ss := range f.server.Sessions() {
			sessions = append(sessions, ss)
		}
	}
	g.mu.Unlock()
	for _, ss := range sessions {
		_ = ss.Close()
	}
}
