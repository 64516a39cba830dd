package mcpgateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/server/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a token to every request of a client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// The gateway over streamable HTTP, in front of an upstream over
// streamable HTTP: the upstream gets the configured headers, the gateway's
// callers are its bearer tokens, and a session belongs to the identity
// that opened it.
func TestHTTP(t *testing.T) {
	up := newUpstreamServer()
	upstreamHTTP := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.server }, nil)
	ups := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer upstream-secret" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		upstreamHTTP.ServeHTTP(w, r)
	}))
	t.Cleanup(ups.Close)
	hu := HTTPUpstream("up", ups.URL, http.Header{"Authorization": {"Bearer upstream-secret"}})
	upTrust(&hu)
	h := newHarness(t, harnessOptions{hold: time.Millisecond, upstreams: []Upstream{hu}})
	keys, err := auth.NewAPIKeys([]auth.APIKey{
		{Key: "key_alice", Tenant: alice.Tenant, Actor: alice.Actor, Roles: alice.Roles},
		{Key: "key_bob", Tenant: bob.Tenant, Actor: bob.Actor, Roles: bob.Roles},
		// Another key of alice's: another credential of the same actor.
		{Key: "key_alice_2", Tenant: alice.Tenant, Actor: alice.Actor, Roles: alice.Roles},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.gw.auth = keys
	handler, err := h.gw.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)

	for _, token := range []string{"", "nope"} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error struct{ Code string } }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 401 || body.Error.Code != "UNAUTHENTICATED" || resp.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("token %q: %d %+v, want 401 UNAUTHENTICATED", token, resp.StatusCode, body)
		}
	}

	transport := &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: bearer{"key_alice", http.DefaultTransport}}}
	// A 2025 client: its session is its thread (2026-07-28 has its own
	// test, TestHTTP2026).
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, nil).Connect(h.ctx, transport,
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__read_note", Arguments: map[string]any{"id": "n7"}})
	if err != nil || res.IsError || text(res) != "note n7" {
		t.Fatalf("a read over HTTP: %v %+v", err, res)
	}
	// A write is alice's, in the thread of her HTTP session.
	res, err = cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(email)})
	if err != nil || structured(t, res)["status"] != "pending" {
		t.Fatalf("a write over HTTP: %v %+v", err, res)
	}
	ps := h.proposals(alice)
	if len(ps) != 1 || ps[0].ThreadID != "mcp_"+cs.ID() || ps[0].Requester != "alice" {
		t.Fatalf("proposals %+v: want alice's, in thread mcp_%s", ps, cs.ID())
	}
	// bob's token cannot use alice's session, nor can another key of
	// alice's: a session is its credential's, so that what it answers
	// (an elicitation's response) comes from the credential asked.
	for _, key := range []string{"key_bob", "key_alice_2"} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s on alice's session: %d, want 403", key, resp.StatusCode)
		}
	}
}
