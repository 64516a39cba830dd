package mcpgateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/server/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MetaThread is the _meta key under which a 2026-07-28 request names the
// thread its call belongs to, instead of the credential's own
// (mcp:<fingerprint>).
const MetaThread = "io.countersign/thread"

// CodeForbidden is the JSON-RPC error code of a request refused because
// its caller may not do what it asks (a _meta thread that is reserved or
// another actor's); the error's data is {"code": "FORBIDDEN"}. It is in the
// range JSON-RPC leaves to servers, apart from the codes the MCP SDK gives
// a meaning (-32001 to -32005 among them: -32003 reads as "client is
// closing" to its clients).
const CodeForbidden = -32030

// Fingerprint names a credential for its 2026-07-28 thread
// (mcp:<fingerprint>): the first 16 hex digits of the SHA-256 of an API
// key, or, for a token that expires by itself (a JWT), of the JSON array of
// its iss, sub and azp claims and its kind, so that a client that renews
// its token keeps its thread. A credential that names none of those claims
// (an authenticator that does not tell them) is fingerprinted by its token,
// as a key is: two holders never share a thread by their absence.
func Fingerprint(token string, cred auth.Credential) string {
	var sum [sha256.Size]byte
	if cred.Revocable || cred.Issuer+cred.Subject+cred.Party == "" {
		sum = sha256.Sum256([]byte(token))
	} else {
		// Strings always encode.
		raw, _ := json.Marshal([]string{cred.Issuer, cred.Subject, cred.Party, string(cred.Identity.KindOrHuman())})
		sum = sha256.Sum256(raw)
	}
	return hex.EncodeToString(sum[:8])
}

// forbidden is the JSON-RPC error FORBIDDEN, saying why.
func forbidden(why string) error {
	return &jsonrpc.Error{Code: CodeForbidden, Message: "FORBIDDEN: " + why, Data: json.RawMessage(`{"code":"FORBIDDEN"}`)}
}

// callThread is where a call goes: its thread, who named it, and the state
// of the repeated calls in it.
type callThread struct {
	s      *session
	origin countersign.ThreadOrigin
	// release, for a thread shared across sessions, lets the gateway drop
	// its state once no call uses it.
	release func()
}

// threadOf picks the thread of a tools/call. Under 2026-07-28 there is no
// session: the caller's calls belong to its credential's thread,
// mcp:<fingerprint>, unless the request's _meta names a thread of its own
// (which must not be reserved; the engine's owner check refuses another
// actor's). Before, one session is one thread, mcp_<session id>.
func (g *Gateway) threadOf(who caller, req *mcp.CallToolRequest) (*callThread, error) {
	if req.ProtocolVersion() < multiRoundTripVersion {
		return &callThread{s: g.session(req.Session), origin: countersign.ThreadMCPGateway, release: func() {}}, nil
	}
	thread, origin := "mcp:"+who.fingerprint, countersign.ThreadMCPGateway
	if raw, ok := req.Params.Meta[MetaThread]; ok {
		named, isString := raw.(string)
		if !isString || named == "" || len(named) > 256 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("_meta %q: want a thread id, 1 to 256 bytes", MetaThread)}
		}
		if err := g.engine.MayNameThread(who.id, named, countersign.ThreadNamed); err != nil {
			return nil, forbidden("thread ids beginning mcp: or mcp_ are reserved for the gateway's own threads")
		}
		thread, origin = named, countersign.ThreadNamed
	}
	s, release := g.sharedThread(who.id.Tenant, thread)
	return &callThread{s: s, origin: origin, release: release}, nil
}

// sharedThread returns the state of a tenant's thread shared by the
// requests of every session (2026-07-28), and a func that drops it once
// no call uses it.
func (g *Gateway) sharedThread(tenant, thread string) (*session, func()) {
	key := tenant + "\x00" + thread
	g.mu.Lock()
	g.sweepThreads()
	s := g.threads[key]
	if s == nil {
		s = &session{thread: thread, calls: map[string]*repeat{}, shared: true}
		g.threads[key] = s
	}
	s.users++
	g.mu.Unlock()
	return s, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.users--
		if s.users == 0 && len(s.calls) == 0 && g.threads[key] == s {
			delete(g.threads, key)
		}
	}
}

// threadSweep is how often sharedThread drops the shared threads whose
// clients never came back for their proposals, once those expired.
const threadSweep = time.Minute

// sweepThreads drops, at most every threadSweep, the repeats of expired
// proposals that no call uses, and the threads left with none. g.mu is
// held.
func (g *Gateway) sweepThreads() {
	now := time.Now()
	if now.Sub(g.sweptThreads) < threadSweep {
		return
	}
	g.sweptThreads = now
	for key, s := range g.threads {
		if s.prune(now) && s.users == 0 {
			delete(g.threads, key)
		}
	}
}

// continued finds the tool-call id of the proposal a repeated identical
// call continues in a shared thread: the caller's proposal of the action,
// with the same input digest, still pending, approved or executing. None
// (empty) makes the call a new one. It reads through the engine, as the
// caller, so it finds only what the caller may see; a thread the caller
// may not read is refused as the call itself would be.
func (g *Gateway) continued(ctx context.Context, id countersign.Identity, thread, name string, input json.RawMessage) (string, error) {
	a, ok := g.engine.Action(name)
	if !ok {
		return "", nil // the call answers it: an unknown tool
	}
	digest, err := a.InputDigest(input)
	if err != nil {
		return "", nil // the call answers it: invalid input
	}
	params := countersign.ListParams{Action: name,
		Statuses: []cstype.Status{cstype.StatusPending, cstype.StatusApproved, cstype.StatusExecuting}}
	for {
		page, err := g.engine.ThreadProposals(ctx, id, thread, params)
		switch {
		case errors.Is(err, countersign.ErrNotFound):
			return "", nil // a new thread
		case err != nil:
			return "", err
		}
		for _, p := range page.Proposals {
			if p.Requester == id.Actor && p.InputDigest == digest {
				return p.ToolCallID, nil
			}
		}
		if page.Next == "" {
			return "", nil
		}
		params.After = page.Next
	}
}
