package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpGateway serves h's gateway over streamable HTTP with testKeys.
func httpGateway(t *testing.T, h *harness) string {
	t.Helper()
	h.gw.auth = testKeys(t)
	handler, err := h.gw.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// httpClient connects a new Go SDK client instance to url as the holder of
// key, speaking version (empty: the newest, 2026-07-28); manual clients
// answer input requests themselves (see connectManual).
func httpClient(t *testing.T, ctx context.Context, url, key, version string, manual bool) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if manual {
		opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "cancel"}, nil
		}
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-client", Version: "1"}, opts).Connect(ctx, transport,
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// rawPost posts one JSON-RPC request to url as key, at protocol version,
// with the headers 2026-07-28 asks for (Mcp-Method, and Mcp-Name when
// name is set), and returns the status and the JSON-RPC response's body
// (from JSON or the first SSE data line).
func rawPost(t *testing.T, url, key, version, method, name, body string) (int, map[string]json.RawMessage) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("MCP-Protocol-Version", version)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for line := range bytes.Lines(raw) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			raw = d
			break
		}
	}
	var out map[string]json.RawMessage
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// meta2026 is the _meta a 2026-07-28 client sends on every request, here
// one that declares form elicitation.
const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`

// /mcp serves 2026-07-28 and the 2025 revisions on one endpoint, negotiated
// per request: server/discover lists them all; a stateless client's calls
// belong to its credential's thread, whichever new client instance makes
// them; its in-band approval is an input_required result without content,
// answered with the signed state; a 2025 client keeps its session thread.
func TestHTTP2026(t *testing.T) {
	for _, kind := range trustStores {
		t.Run(kind, func(t *testing.T) { testHTTP2026(t, kind) })
	}
}

func testHTTP2026(t *testing.T, kind string) {
	st := newStore(t, kind)
	h := newHarness(t, harnessOptions{hold: 20 * time.Millisecond, store: st, stateSecret: testStateSecret})
	url := httpGateway(t, h)

	status, discover := rawPost(t, url, "key_alice", "2026-07-28", "server/discover", "",
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta2026+`}}`)
	var disc struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	_ = json.Unmarshal(discover["result"], &disc)
	if status != 200 || !slices.Contains(disc.SupportedVersions, "2026-07-28") || !slices.Contains(disc.SupportedVersions, "2025-11-25") ||
		!slices.Contains(disc.SupportedVersions, "2025-06-18") {
		t.Fatalf("server/discover: %d %s, want 2026-07-28 and the 2025 revisions", status, discover["result"])
	}

	// A read at once, over 2026-07-28.
	cs := httpClient(t, h.ctx, url, "key_alice", "", true)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", v)
	}
	res, err := cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__read_note", Arguments: map[string]any{"id": "n7"}})
	if err != nil || res.IsError || text(res) != "note n7" {
		t.Fatalf("a read over HTTP: %v %+v", err, res)
	}
	// A write asks alice in-band: input_required, with a signed state.
	res, err = cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(email)})
	if err != nil || !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("a write over HTTP: %v %+v, want input_required", err, res)
	}
	state := res.RequestState
	ps := h.proposals(alice)
	if len(ps) != 1 || ps[0].ThreadID != keyThread("key_alice") || ps[0].Status != cstype.StatusPending {
		t.Fatalf("proposals %+v, want one pending in %s", ps, keyThread("key_alice"))
	}
	pid := ps[0].ID
	// On the wire: input_required, and no content member.
	_, raw := rawPost(t, url, "key_alice", "2026-07-28", "tools/call", "up__send_email",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__send_email","arguments":`+email+`,`+meta2026+`}}`)
	var wire map[string]json.RawMessage
	if err := json.Unmarshal(raw["result"], &wire); err != nil {
		t.Fatalf("tools/call result %s: %v", raw["result"], err)
	}
	if _, has := wire["content"]; has || string(wire["resultType"]) != `"input_required"` || wire["inputRequests"] == nil {
		t.Fatalf("the input_required result on the wire: %s, want no content", raw["result"])
	}
	// A new client instance answers with the state: approved via mcp and
	// run once.
	cs2 := httpClient(t, h.ctx, url, "key_alice", "", true)
	res, err = cs2.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(email),
		InputResponses: mcp.InputResponseMap{approvalInput: approveAnswer}, RequestState: state})
	if err != nil || res.IsError || text(res) != "sent to bob@example.com" {
		t.Fatalf("the answer from a new client instance: %v %+v", err, res)
	}
	if p, err := h.engine.Proposal(h.ctx, alice, pid); err != nil || p.Status != cstype.StatusSucceeded || len(h.up.callsOf("send_email")) != 1 {
		t.Fatalf("proposal %+v %v, %d upstream calls: want succeeded, run once", p, err, len(h.up.callsOf("send_email")))
	}
	// The same state again decides nothing: a new call, asked again.
	res, err = cs2.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(email),
		InputResponses: mcp.InputResponseMap{approvalInput: approveAnswer}, RequestState: state})
	if err != nil || !res.NeedsInput() || len(h.up.callsOf("send_email")) != 1 {
		t.Fatalf("the replayed state: %v %+v, want the new call asked", err, res)
	}

	// A 2025 client on the same endpoint: its session's thread.
	legacy := httpClient(t, h.ctx, url, "key_bob", "2025-11-25", false)
	if v := legacy.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %q, want 2025-11-25", v)
	}
	res, err = legacy.CallTool(h.ctx, &mcp.CallToolParams{Name: "up__send_email", Arguments: json.RawMessage(email)})
	if err != nil || structured(t, res)["status"] != "pending" {
		t.Fatalf("a 2025 call: %v %+v", err, res)
	}
	if bp := h.proposals(bob); len(bp) != 1 || bp[0].ThreadID != "mcp_"+legacy.ID() {
		t.Fatalf("bob's proposals %+v, want one in mcp_%s", bp, legacy.ID())
	}
}
