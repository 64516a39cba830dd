package mcpgateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/server/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testKeys are the API keys of the credential tests: two of alice's, one
// of bob's.
func testKeys(t *testing.T) *auth.APIKeys {
	t.Helper()
	keys, err := auth.NewAPIKeys([]auth.APIKey{
		{Key: "key_alice", Tenant: alice.Tenant, Actor: alice.Actor, Roles: alice.Roles},
		{Key: "key_alice_2", Tenant: alice.Tenant, Actor: alice.Actor, Roles: alice.Roles},
		{Key: "key_bob", Tenant: bob.Tenant, Actor: bob.Actor, Roles: bob.Roles},
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// connectKey connects a new client instance as the holder of an API key,
// as `countersign mcp --token KEY` serves it.
func (h *harness) connectKey(keys *auth.APIKeys, key string, answer func(*mcp.ElicitParams) *mcp.ElicitResult) *client {
	h.t.Helper()
	cred, err := auth.AuthenticateCredential(h.ctx, keys, key)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.connectServed(func(st mcp.Transport) error { return h.gw.ServeCredential(h.ctx, st, key, cred) }, answer, nil)
}

// keyThread is the 2026-07-28 thread of an API key, computed here from the
// contract: mcp: and the first 16 hex digits of the key's SHA-256.
func keyThread(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "mcp:" + hex.EncodeToString(sum[:])[:16]
}

// Under 2026-07-28 a credential's calls belong to its thread, whichever
// connection or process they arrive on: a call made through one gateway is
// continued by a new client instance on another gateway over the same
// store, collected once approved, and the call after that is a new one.
func TestCredentialThread(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) {
			st := newStore(t, kind)
			keys := testKeys(t)
			h1 := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: st})
			h2 := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: st})
			upstreamCalls := func() int { return len(h1.up.callsOf("send_email")) + len(h2.up.callsOf("send_email")) }

			res := h1.call(h1.connectKey(keys, "key_alice", nil), "up__send_email", email)
			pid, _ := structured(t, res)["proposal_id"].(string)
			if structured(t, res)["status"] != "pending" || pid == "" {
				t.Fatalf("first call: %q %v, want pending", text(res), structured(t, res))
			}
			p, err := h1.engine.Proposal(h1.ctx, alice, pid)
			if err != nil {
				t.Fatal(err)
			}
			if p.ThreadID != keyThread("key_alice") || p.Requester != "alice" {
				t.Fatalf("proposal in thread %q of %s, want %q of alice", p.ThreadID, p.Requester, keyThread("key_alice"))
			}
			view, err := h1.engine.Thread(h1.ctx, alice, p.ThreadID)
			if err != nil || view.Thread.Owner != "alice" {
				t.Fatalf("thread %+v %v, want alice's", view, err)
			}
			// Another process, a new client instance: the same proposal.
			res = h2.call(h2.connectKey(keys, "key_alice", nil), "up__send_email", email)
			if sc := structured(t, res); sc["status"] != "pending" || sc["proposal_id"] != pid {
				t.Fatalf("the repeat on another gateway: %v, want %s pending", sc, pid)
			}
			// Another key of alice's has a thread of its own.
			res = h2.call(h2.connectKey(keys, "key_alice_2", nil), "up__send_email", email)
			if sc := structured(t, res); sc["status"] != "pending" || sc["proposal_id"] == pid {
				t.Fatalf("another key's call: %v, want a proposal of its own", sc)
			}
			if _, err := h1.engine.Decide(h1.ctx, &countersign.Decision{Identity: alice, ProposalID: pid, Verdict: countersign.Approve, Via: "api"}); err != nil {
				t.Fatal(err)
			}
			res = h2.call(h2.connectKey(keys, "key_alice", nil), "up__send_email", email)
			if res.IsError || text(res) != "sent to bob@example.com" || upstreamCalls() != 1 {
				t.Fatalf("collecting the approved call: %q, %d upstream calls: want the upstream's result, once", text(res), upstreamCalls())
			}
			if p, err := h1.engine.Proposal(h1.ctx, alice, pid); err != nil || p.Status != cstype.StatusSucceeded {
				t.Fatalf("proposal %+v %v, want succeeded", p, err)
			}
			// Settled: the same call again is a new one.
			res = h1.call(h1.connectKey(keys, "key_alice", nil), "up__send_email", email)
			if sc := structured(t, res); sc["status"] != "pending" || sc["proposal_id"] == pid || upstreamCalls() != 1 {
				t.Fatalf("the call after the settled one: %v, want a new pending proposal", sc)
			}
		})
	}
}

// jsonrpcCode is the code of a JSON-RPC error, or 0.
func jsonrpcCode(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

// A 2026-07-28 request's _meta may name a thread the caller owns or starts;
// a reserved one, or another actor's, is a JSON-RPC error FORBIDDEN, and
// nothing is stored; a malformed one is invalid params.
func TestMetaThread(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) {
			keys := testKeys(t)
			h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: newStore(t, kind)})
			c := h.connectKey(keys, "key_alice", nil)
			bc := h.connectKey(keys, "key_bob", nil)
			callIn := func(c *client, thread any) (*mcp.CallToolResult, error) {
				return c.cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(email),
					Meta: mcp.Meta{MetaThread: thread}})
			}
			res, err := callIn(c, "alices-project")
			if err != nil || structured(t, res)["status"] != "pending" {
				t.Fatalf("a call in a new thread: %v %+v", err, res)
			}
			pid := structured(t, res)["proposal_id"]
			if p, err := h.engine.Proposal(h.ctx, alice, pid.(string)); err != nil || p.ThreadID != "alices-project" {
				t.Fatalf("proposal %+v %v, want in alices-project", p, err)
			}
			// The repeat continues it, from another client instance.
			res, err = callIn(h.connectKey(keys, "key_alice", nil), "alices-project")
			if err != nil || structured(t, res)["proposal_id"] != pid {
				t.Fatalf("the repeat: %v %+v, want %v", err, res, pid)
			}
			// bob starts a thread of his.
			if res, err := callIn(bc, "bobs-project"); err != nil || structured(t, res)["status"] != "pending" {
				t.Fatalf("bob's call: %v %+v", err, res)
			}
			before := len(h.proposals(alice))
			for _, row := range []struct {
				thread any
				code   int64
			}{
				{"bobs-project", CodeForbidden},
				{keyThread("key_bob"), CodeForbidden},
				{keyThread("key_alice"), CodeForbidden}, // reserved even when it is the caller's own
				{"mcp_" + randomID(), CodeForbidden},
				{"mcp:", CodeForbidden},
				{"", jsonrpc.CodeInvalidParams},
				{42, jsonrpc.CodeInvalidParams},
				{string(make([]byte, 257)), jsonrpc.CodeInvalidParams},
			} {
				res, err := callIn(c, row.thread)
				if got := jsonrpcCode(err); got != row.code {
					t.Errorf("_meta thread %v: %v %+v, want JSON-RPC error %d", row.thread, err, res, row.code)
				}
			}
			if after := len(h.proposals(alice)); after != before {
				t.Fatalf("%d proposals of alice after the refusals, want %d: nothing stored", after, before)
			}
			if _, err := h.engine.Thread(h.ctx, alice, "mcp:"); !errors.Is(err, countersign.ErrNotFound) {
				t.Fatalf("thread mcp: after the refusal: %v, want none", err)
			}
			if len(h.up.callsOf("send_email")) != 0 {
				t.Fatal("the upstream was called")
			}
		})
	}
}
