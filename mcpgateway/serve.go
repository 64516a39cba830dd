package mcpgateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server/auth"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// front is one MCP server serving the exported tools, and how it learns
// who calls.
type front struct {
	g        *Gateway
	server   *mcp.Server
	identify func(*mcp.RequestExtra) (caller, error)
}

// caller is who makes a request: the identity, and the credential that
// presented it, which an answer to the gateway's question must come from.
type caller struct {
	id countersign.Identity
	// credential names the credential: over HTTP a digest of the bearer
	// token (see credentialOf), over Serve the one connection's.
	credential string
	// fingerprint names the credential's 2026-07-28 thread
	// (mcp:<fingerprint>, see Fingerprint).
	fingerprint string
}

// newFront makes an MCP server with every exported tool, kept up to date
// by export until drop.
func (g *Gateway) newFront(identify func(*mcp.RequestExtra) (caller, error)) *front {
	f := &front{g: g, identify: identify}
	// Tools only, announced as changing: the upstreams' lists change. And
	// Tasks, where workers execute them.
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if g.tasks {
		caps.AddExtension(TasksExtension, map[string]any{})
	}
	f.server = mcp.NewServer(&mcp.Implementation{Name: "countersign", Title: "Countersign MCP gateway", Version: "1"}, &mcp.ServerOptions{
		Capabilities:              caps,
		Logger:                    g.log,
		SupportedProtocolVersions: g.protocolVersions,
	})
	f.server.AddReceivingMiddleware(withoutContent)
	if g.tasks {
		f.addTaskMethods()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.tools {
		f.add(t)
	}
	g.fronts[f.server] = f
	return f
}

func (g *Gateway) dropFront(f *front) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.fronts, f.server)
}

// add serves t. The SDK panics on a tool it cannot serve; an upstream's
// tool that it refuses is left out, not a reason to stop.
func (f *front) add(t *tool) {
	name := t.listed.Name
	defer func() {
		if r := recover(); r != nil {
			f.g.log.Warn("mcp upstream tool not exported", "upstream", t.up.name, "tool", t.upstreamName, "err", fmt.Sprint(r))
		}
	}()
	f.server.AddTool(t.listed, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return f.g.callTool(ctx, f, name, req)
	})
}

// Serve serves the gateway over t to one caller, id, until the client
// closes the connection or ctx ends: `countersign mcp` over stdio, or a
// test over an in-memory transport.
func (g *Gateway) Serve(ctx context.Context, t mcp.Transport, id countersign.Identity) error {
	if id.Tenant == "" || id.Actor == "" {
		return errors.New("mcpgateway: Serve: the identity needs a tenant and an actor")
	}
	// The one identity of the connection is its one credential, whose
	// thread is the connection's own.
	cred := "serve:" + randomID()
	sum := sha256.Sum256([]byte(cred))
	return g.serve(ctx, t, caller{id: id, credential: cred, fingerprint: hex.EncodeToString(sum[:8])})
}

// ServeCredential is Serve for the holder of token, which cred is (as
// auth.AuthenticateCredential found it): `countersign mcp` over stdio. Its
// 2026-07-28 calls belong to the credential's thread (mcp:<fingerprint>),
// which every process serving that token shares, so that a client that
// starts again continues its proposals.
func (g *Gateway) ServeCredential(ctx context.Context, t mcp.Transport, token string, cred auth.Credential) error {
	if cred.Identity.Tenant == "" || cred.Identity.Actor == "" {
		return errors.New("mcpgateway: ServeCredential: the identity needs a tenant and an actor")
	}
	return g.serve(ctx, t, caller{id: cred.Identity, credential: credentialOf(token, cred), fingerprint: Fingerprint(token, cred)})
}

func (g *Gateway) serve(ctx context.Context, t mcp.Transport, who caller) error {
	f := g.newFront(func(*mcp.RequestExtra) (caller, error) { return who, nil })
	defer g.dropFront(f)
	ss, err := f.server.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcpgateway: serve: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = ss.Close() })
	defer stop()
	err = ss.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// The client closing its end is how a session ends.
	if err == nil || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
		return nil
	}
	return fmt.Errorf("mcpgateway: serve: %w", err)
}

// callerKey is where Handler's bearer check leaves the caller in the SDK's
// token information, which every request of a session carries.
const callerKey = "countersign.caller"

// Handler serves the gateway over streamable HTTP. Every request needs a
// bearer token that Options.Auth resolves; the token's identity is the
// caller, and a session is bound to the credential that opened it (another
// credential presenting its session id is refused, even one of the same
// actor), so that what the session answers comes from that credential.
func (g *Gateway) Handler() (http.Handler, error) {
	if g.auth == nil {
		return nil, errors.New("mcpgateway: Handler needs Options.Auth")
	}
	f := g.newFront(func(extra *mcp.RequestExtra) (caller, error) {
		if extra != nil && extra.TokenInfo != nil {
			if who, ok := extra.TokenInfo.Extra[callerKey].(caller); ok {
				return who, nil
			}
		}
		return caller{}, errors.New("mcpgateway: the request carries no identity")
	})
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server },
		&mcp.StreamableHTTPOptions{SessionTimeout: g.sessionTimeout, Logger: g.log})
	// 2026-07-28 has no session: each request stands alone, and is served
	// by the same server without one. Which handler serves a request is
	// its protocol version's (negotiated per request): the
	// MCP-Protocol-Version header, which a 2026-07-28 client sends on every
	// request (server/discover included) and a 2025 client sends, with its
	// older version, after initialize.
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.server },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: g.log})
	sdk := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("MCP-Protocol-Version") >= multiRoundTripVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	// The SDK binds a session to its first request's TokenInfo.UserID; the
	// token was checked by authenticate, which left the caller in the
	// request's context for this verifier to hand over.
	verify := func(ctx context.Context, _ string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		who, ok := ctx.Value(callerCtxKey{}).(caller)
		if !ok {
			return nil, sdkauth.ErrInvalidToken
		}
		return &sdkauth.TokenInfo{UserID: userID(who), Extra: map[string]any{callerKey: who}}, nil
	}
	bound := sdkauth.RequireBearerToken(verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)
	return g.authenticate(bound), nil
}

type callerCtxKey struct{}

// userID names a caller for the SDK's session binding: its identity and
// its credential. Tenants and actors hold no control characters, so the
// NULs cannot be forged.
func userID(who caller) string {
	return who.id.Tenant + "\x00" + who.id.Actor + "\x00" + who.credential
}

// credentialOf names the credential a bearer token is: an API key by its
// SHA-256, which only that key has; a token that expires by itself (a JWT)
// by everything the identity it carries holds, so that a client that
// renews its token before it expires keeps its session.
func credentialOf(token string, cred auth.Credential) string {
	if cred.Revocable {
		sum := sha256.Sum256([]byte(token))
		return "key:" + hex.EncodeToString(sum[:])
	}
	// Every field of the identity, whatever fields it gains: an identity
	// always encodes.
	raw, _ := json.Marshal(cred.Identity)
	sum := sha256.Sum256(raw)
	return "token:" + hex.EncodeToString(sum[:])
}

// authenticate resolves the bearer token as the server does, answering
// 401 UNAUTHENTICATED (and 503 UNAVAILABLE when the check could not be
// made) in the server's error shape.
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := auth.BearerToken(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", err.Error())
			return
		}
		cred, err := auth.AuthenticateCredential(r.Context(), g.auth, token)
		switch {
		case errors.Is(err, auth.ErrUnauthenticated):
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "the bearer token is not valid")
			return
		case err != nil:
			g.log.Warn("mcp gateway: authentication failed", "err", err)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "authentication is unavailable; retry")
			return
		}
		who := caller{id: cred.Identity, credential: credentialOf(token, cred), fingerprint: Fingerprint(token, cred)}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerCtxKey{}, who)))
	})
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}

// randomID is a session id for transports that have none (stdio,
// in-memory): 128 random bits.
func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// withoutContent sends a tools/call result that asks for input
// (input_required) without a content member: the SDK writes
// "content": null, which 2026-07-28 does not allow there. A result marked
// as a task (markTask) goes as the CreateTaskResult.
func withoutContent(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if init, ok := res.(*mcp.InitializeResult); ok && err == nil {
			return withoutTasks(init), nil
		}
		r, ok := res.(*mcp.CallToolResult)
		switch {
		case !ok || err != nil:
		case r.NeedsInput():
			return inputRequired{r}, nil
		default:
			if t, isTask := asCreatedTask(r); isTask {
				return t, nil
			}
		}
		return res, err
	}
}

// withoutTasks is an initialize result without the Tasks extension: a
// 2025 session is never offered tasks (they are served on 2026-07-28,
// whose clients discover them with server/discover).
func withoutTasks(r *mcp.InitializeResult) *mcp.InitializeResult {
	if r.Capabilities == nil {
		return r
	}
	if _, ok := r.Capabilities.Extensions[TasksExtension]; !ok {
		return r
	}
	caps := *r.Capabilities
	caps.Extensions = maps.Clone(caps.Extensions)
	delete(caps.Extensions, TasksExtension)
	if len(caps.Extensions) == 0 {
		caps.Extensions = nil
	}
	out := *r
	out.Capabilities = &caps
	return &out
}

// inputRequired is a tools/call result that asks for input, written
// without its content.
type inputRequired struct{ *mcp.CallToolResult }

func (r inputRequired) MarshalJSON() ([]byte, error) {
	raw, err := r.CallToolResult.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("mcpgateway: input required result: %w", err)
	}
	delete(m, "content")
	return json.Marshal(m)
}
