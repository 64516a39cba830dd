package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// connectTimeout bounds one connection attempt: the transport's start and
// the initialize handshake.
const connectTimeout = 30 * time.Second

// stableAfter is how long a connection must last for the next one to start
// again from the shortest backoff: an upstream that dies right after each
// start is retried ever more slowly.
const stableAfter = 30 * time.Second

// inheritedEnv are the variables a command upstream inherits from the
// gateway's environment, as the MCP SDKs' stdio clients do; everything else
// it gets from its env setting. The gateway's own secrets (the webhook
// secret, the database's URL) are not passed on.
var inheritedEnv = []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR", "SYSTEMROOT", "APPDATA", "USERPROFILE"}

// CommandUpstream is an upstream that runs argv and speaks MCP over its
// standard input and output. The process gets the variables of
// inheritedEnv from the gateway's environment, then env. Each connection
// starts a new process; closing it ends the process.
func CommandUpstream(name string, argv []string, env map[string]string) Upstream {
	argv = append([]string(nil), argv...)
	vars := make([]string, 0, len(inheritedEnv)+len(env))
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok && env[k] == "" {
			vars = append(vars, k+"="+v)
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		vars = append(vars, k+"="+env[k])
	}
	return Upstream{Name: name, Transport: func() (mcp.Transport, error) {
		if len(argv) == 0 || argv[0] == "" {
			return nil, errors.New("no command")
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = vars
		// The upstream's diagnostics go where the gateway's go; its
		// standard output is the MCP connection.
		cmd.Stderr = os.Stderr
		return &mcp.CommandTransport{Command: cmd}, nil
	}}
}

// HTTPUpstream is an upstream served over streamable HTTP at rawURL; every
// request to rawURL's origin (scheme, host and port) carries header (an
// Authorization, say). The headers are the operator's secrets for that
// server alone: a redirect to another origin is not followed (the
// connection fails), and no request to another origin would carry them.
func HTTPUpstream(name, rawURL string, header http.Header) Upstream {
	return TracedHTTPUpstream(name, rawURL, header, nil)
}

// TracedHTTPUpstream is HTTPUpstream whose requests are client spans of tp
// carrying their W3C traceparent, so that the upstream server continues the
// trace of the tool call (docs/tracing.md); a nil tp is HTTPUpstream.
func TracedHTTPUpstream(name, rawURL string, header http.Header, tp trace.TracerProvider) Upstream {
	header = header.Clone()
	origin := ""
	if u, err := url.Parse(rawURL); err == nil {
		origin = originOf(u)
	}
	next := http.DefaultTransport
	if tp != nil {
		next = otelhttp.NewTransport(next, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
	}
	client := &http.Client{
		Transport: &headerTransport{header: header, origin: origin, next: next},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if originOf(req.URL) != origin {
				return fmt.Errorf("upstream %s redirects to another origin (%s): not followed", name, req.URL.Host)
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("upstream %s: stopped after %d redirects", name, maxRedirects)
			}
			return nil
		},
	}
	return Upstream{Name: name, Transport: func() (mcp.Transport, error) {
		return &mcp.StreamableClientTransport{Endpoint: rawURL, HTTPClient: client}, nil
	}}
}

// maxRedirects is how many redirects within its origin an HTTP upstream
// may make, as net/http's default.
const maxRedirects = 10

// originOf is u's scheme, host and port, the port made explicit, in lower
// case: what a header configured for one server may be sent to.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// headerTransport adds the configured headers to every request to origin,
// and to no other.
type headerTransport struct {
	header http.Header
	origin string
	next   http.RoundTripper
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.origin == "" || originOf(r.URL) != t.origin {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, vs := range t.header {
		r.Header[k] = append([]string(nil), vs...)
	}
	return t.next.RoundTrip(r)
}

// upstream is one upstream server's connection, kept up by run.
type upstream struct {
	g         *Gateway
	name      string
	transport func() (mcp.Transport, error)
	client    *mcp.Client
	// readOnly maps the tools the configuration calls reads to their
	// schema pins (lowercase hex; empty: none); idempotent lists the tools
	// retried after a broken connection; trust honours the annotations.
	readOnly   map[string]string
	idempotent map[string]bool
	trust      bool
	// exporting serializes export, so that two listings are applied one
	// after the other rather than interleaved.
	exporting sync.Mutex
	// refresh asks run to list the tools again (a list_changed
	// notification); it holds at most one request.
	refresh chan struct{}
	// tried is closed once the first connection attempt has ended.
	tried     chan struct{}
	triedOnce sync.Once

	mu sync.Mutex
	cs *mcp.ClientSession // nil while down
	// live is closed while cs is set; a new, open one replaces it when the
	// connection ends, for callers to wait on.
	live chan struct{}
	err  error // why it is down
}

func newUpstream(g *Gateway, spec Upstream) *upstream {
	u := &upstream{
		g: g, name: spec.Name, transport: spec.Transport,
		readOnly: map[string]string{}, idempotent: map[string]bool{}, trust: spec.TrustAnnotations,
		refresh: make(chan struct{}, 1), tried: make(chan struct{}),
		live: make(chan struct{}), err: errors.New("not connected yet"),
	}
	for _, ro := range spec.ReadOnly {
		u.readOnly[ro.Name] = strings.ToLower(ro.SchemaSHA256)
	}
	for _, name := range spec.Idempotent {
		u.idempotent[name] = true
	}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "countersign-mcp-gateway", Version: "1"}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: the gateway asks nothing of
		// its upstreams' clients' users.
		Capabilities: &mcp.ClientCapabilities{},
		// The handler runs on the connection's reader: it only signals.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { u.signalRefresh() },
	})
	return u
}

func (u *upstream) signalRefresh() {
	select {
	case u.refresh <- struct{}{}:
	default:
	}
}

// down returns why the upstream is not connected, or nil when it is.
func (u *upstream) down() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		return nil
	}
	return u.err
}

func (u *upstream) setUp(cs *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cs, u.err = cs, nil
	close(u.live)
}

func (u *upstream) setDown(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		u.live = make(chan struct{})
	}
	u.cs, u.err = nil, err
}

// run keeps the upstream connected until ctx ends: connect, list the tools,
// list them again on each list_changed, and when the connection ends (the
// process died, the server went away) connect again after a pause that
// doubles while connections keep failing.
func (u *upstream) run(ctx context.Context) {
	backoff := u.g.minBackoff
	for ctx.Err() == nil {
		began := time.Now()
		// An HTTP upstream's URL may hold a secret (a token in its query or
		// userinfo), and net/http's errors repeat the URL: redacted before
		// it is kept, logged or answered (/readyz's reasons).
		err := redact.Error(u.session(ctx))
		if ctx.Err() != nil {
			break
		}
		u.setDown(err)
		u.triedOnce.Do(func() { close(u.tried) })
		u.g.log.Warn("mcp upstream down", "upstream", u.name, "err", err, "retry_in", backoff)
		if time.Since(began) >= stableAfter {
			backoff = u.g.minBackoff
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, u.g.maxBackoff)
	}
	u.setDown(errors.New("the gateway stopped"))
	u.triedOnce.Do(func() { close(u.tried) })
}

// session runs one connection until it ends, and says why it ended.
func (u *upstream) session(ctx context.Context) error {
	t, err := u.transport()
	if err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	cs, err := u.client.Connect(cctx, t, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	ended := make(chan struct{})
	go func() {
		_ = cs.Wait()
		close(ended)
	}()
	defer func() {
		_ = cs.Close()
		<-ended
	}()
	if err := u.list(ctx, cs); err != nil {
		return fmt.Errorf("list tools: %w", err)
	}
	u.setUp(cs)
	u.g.log.Info("mcp upstream connected", "upstream", u.name)
	u.triedOnce.Do(func() { close(u.tried) })
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
			return errors.New("connection closed")
		case <-u.refresh:
			if err := u.list(ctx, cs); err != nil {
				// The previous tools stay exported; the next
				// notification or connection lists them again.
				u.g.log.Warn("mcp upstream: listing tools failed", "upstream", u.name, "err", redact.Error(err))
			}
		}
	}
}

// list reads the upstream's tools and exports them.
func (u *upstream) list(ctx context.Context, cs *mcp.ClientSession) error {
	tools, err := u.tools(ctx, cs)
	if err != nil {
		return err
	}
	u.g.export(u, tools)
	return nil
}

// tools reads the upstream's tools, every page.
func (u *upstream) tools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	if ir := cs.InitializeResult(); ir != nil && ir.Capabilities != nil && ir.Capabilities.Tools != nil {
		lctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		for t, err := range cs.Tools(lctx, nil) {
			if err != nil {
				return nil, err
			}
			tools = append(tools, t)
		}
	}
	return tools, nil
}

// connected returns the live session, waiting up to the gateway's
// UpstreamWait for one while the upstream is down.
func (u *upstream) connected(ctx context.Context) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, u.g.upstreamWait)
	defer cancel()
	for {
		u.mu.Lock()
		cs, live, why := u.cs, u.live, u.err
		u.mu.Unlock()
		if cs != nil {
			return cs, nil
		}
		select {
		case <-live:
		case <-ctx.Done():
			return nil, fmt.Errorf("upstream %s is not connected: %v", u.name, why)
		}
	}
}

// call calls the upstream tool once on cs. A refusal that the upstream
// answered (a JSON-RPC error: it did not run the tool) is definite: nothing
// was applied. Any other error happened after the request may have reached
// the upstream: the outcome is uncertain.
func (u *upstream) call(ctx context.Context, cs *mcp.ClientSession, tool string, input json.RawMessage, operationID string) (*mcp.CallToolResult, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Meta: mcp.Meta{MetaOperationID: operationID}, Name: tool, Arguments: input,
	})
	if err != nil {
		if refused, ok := refusal(err); ok {
			return nil, countersign.NotApplied(fmt.Errorf("upstream %s refused the call: %s", u.name, refused.Message))
		}
		return nil, fmt.Errorf("upstream %s: %w", u.name, err)
	}
	return res, nil
}

// The JSON-RPC codes the SDK's connection gives calls it could not finish
// because the connection ended: not the upstream's answers.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
)

// refusal reports whether err is the upstream's own error answer to a call,
// rather than a connection that ended under it.
func refusal(err error) (*jsonrpc.Error, bool) {
	var refused *jsonrpc.Error
	if errors.Is(err, mcp.ErrConnectionClosed) || !errors.As(err, &refused) {
		return nil, false
	}
	switch refused.Code {
	case 0, codeClientClosing, codeServerClosing:
		return nil, false
	}
	return refused, true
}
