package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioUpstreamEnv makes the test binary a stdio MCP server (see TestMain).
const stdioUpstreamEnv = "COUNTERSIGN_TEST_MCP_UPSTREAM"

// stdioUpstream serves pid (a read) and note (a write) over stdio.
func stdioUpstream() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "pid", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "note", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "noted " + string(req.Params.Arguments)}}}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// mcpConfig writes a configuration with alice's key and the upstream good
// (this test binary, a stdio MCP server, whose pid the file vouches is a
// read), then extra (more servers), and returns its path.
func mcpConfig(t *testing.T, extra string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	yaml := fmt.Sprintf(`store: sqlite:%s
auth:
  api_keys:
    - {key: k_alice, tenant: acme, actor: alice}
mcp:
  path: /tools/mcp
  hold: 1s
  servers:
    - name: good
      command: [%q]
      env: {%s: "1"}
      read_only: [pid]
%s`, filepath.Join(dir, "c.db"), exe, stdioUpstreamEnv, extra)
	path := filepath.Join(dir, "countersign.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// composeRunning composes serve's process from the configuration at path
// and does its background work (workers, the gateway's upstreams) until
// the test ends, under the context it returns.
func composeRunning(t *testing.T, path string) (*app, context.Context) {
	t.Helper()
	return composeRunningWith(t, &setupFlags{config: path})
}

// composeRunningWith is composeRunning for any of serve's setup flags.
func composeRunningWith(t *testing.T, flags *setupFlags) (*app, context.Context) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	rt, err := build(context.Background(), flags, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.store.Close() })
	a, err := compose(rt, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.run(ctx, log) }()
	t.Cleanup(func() { cancel(); <-done })
	return a, ctx
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// TestComposedMCP: serve mounts the gateway at mcp.path with bearer auth,
// connects its upstreams in the background, and /readyz names the ones
// that are down.
func TestComposedMCP(t *testing.T) {
	t.Parallel()
	a, ctx := composeRunning(t, mcpConfig(t, "    - {name: broken, command: [\"/nonexistent/countersign-test-upstream\"]}\n"))
	ts := httptest.NewServer(a.handler)
	t.Cleanup(ts.Close)
	if err := a.gateway.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Status string
		Error  struct {
			Code    string
			Details struct {
				Down []string `json:"mcp_upstreams_down"`
			}
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 503 || body.Status != "not_ready" || body.Error.Code != "NOT_READY" || strings.Join(body.Error.Details.Down, ",") != "broken" {
		t.Fatalf("/readyz: %d %+v, want 503 naming broken alone", resp.StatusCode, body)
	}

	resp, err = http.Post(ts.URL+"/tools/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("POST /tools/mcp without a token: %d, want 401", resp.StatusCode)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: ts.URL + "/tools/mcp", HTTPClient: &http.Client{Transport: bearerTransport("k_alice")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "good__pid", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("good__pid over /tools/mcp: %v %+v", err, res)
	}
	// A write asks its requester; nobody decides within the hold.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "good__note", Arguments: map[string]any{"text": "hi"}})
	if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "pending") {
		t.Fatalf("good__note: %v %+v, want pending", err, res)
	}
}

// TestMCPCommand runs `countersign mcp` as a desktop client would: the
// binary over stdio, as the token's identity.
func TestMCPCommand(t *testing.T) {
	t.Parallel()
	path := mcpConfig(t, "")
	ctx := t.Context()
	cmd := exec.Command(binary, "mcp", "--config", path, "--token", "k_alice")
	cmd.Stderr = io.Discard
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lr, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lr.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "good__note,good__pid" && strings.Join(names, ",") != "good__pid,good__note" {
		t.Fatalf("tools %v, want good__note and good__pid", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "good__pid", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("good__pid: %v %+v", err, res)
	}
	// Over stdio the client speaks 2026-07-28, and its calls belong to the
	// token's thread: another `countersign mcp` process for the same token
	// continues the pending call rather than proposing it again.
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q over stdio, want 2026-07-28", v)
	}
	pendingNote := func(cs *mcp.ClientSession) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "good__note", Arguments: map[string]any{"text": "across processes"}})
		sc, _ := res.StructuredContent.(map[string]any)
		if err != nil || sc["status"] != "pending" || sc["proposal_id"] == "" {
			t.Fatalf("good__note: %v %+v, want pending", err, res)
		}
		return fmt.Sprint(sc["proposal_id"])
	}
	first := pendingNote(cs)
	cmd2 := exec.Command(binary, "mcp", "--config", path, "--token", "k_alice")
	cmd2.Stderr = io.Discard
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	if again := pendingNote(cs2); again != first {
		t.Fatalf("the repeat from another process: %s, want %s continued", again, first)
	}

	// mcp.state_secret_env is checked like every secret: set, and long
	// enough to sign with.
	withState := strings.Replace(path, "countersign.yaml", "state.yaml", 1)
	if raw, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(withState, []byte(strings.Replace(string(raw), "mcp:\n", "mcp:\n  state_secret_env: MCP_STATE_SECRET\n", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  string
		code int
		says string
	}{
		{"bad token", []string{"mcp", "--config", path, "--token", "nope"}, "", exitUnauth, "unauthenticated"},
		{"no config", []string{"mcp", "--token", "k_alice"}, "", exitUsage, "needs --config"},
		{"no servers", []string{"mcp", "--config", writeFile(t, "auth: {api_keys: [{key: k, tenant: t, actor: a}]}\n"), "--token", "k"}, "", exitUsage, "names no servers"},
		{"state secret unset", []string{"mcp", "--config", withState, "--token", "k_alice"}, "", exitUsage, "MCP_STATE_SECRET is empty or unset"},
		{"state secret short", []string{"mcp", "--config", withState, "--token", "k_alice"}, "MCP_STATE_SECRET=short", exitUsage,
			"mcp.state_secret_env: MCP_STATE_SECRET holds 5 bytes, want at least 32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.CommandContext(ctx, binary, c.args...)
			cmd.Env = append(os.Environ(), "MCP_STATE_SECRET=")
			if c.env != "" {
				cmd.Env = append(cmd.Env, c.env)
			}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != c.code || !strings.Contains(string(out), c.says) {
				t.Fatalf("%v: %v, %q; want exit %d saying %q", c.args, err, out, c.code, c.says)
			}
		})
	}
}

func writeFile(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("store: sqlite:"+filepath.Join(t.TempDir(), "c.db")+"\n"+yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestShutdownClosesMCPSessions: the server's shutdown ends the gateway's
// sessions, whose open streams would otherwise keep it waiting.
func TestShutdownClosesMCPSessions(t *testing.T) {
	t.Parallel()
	a, ctx := composeRunning(t, mcpConfig(t, ""))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := a.httpServer(ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	// The client opens the session's standing stream (GET) as well.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/tools/mcp",
			HTTPClient: &http.Client{Transport: bearerTransport("k_alice")}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// The bound is the test's safety net, not what it measures: without
	// the sessions closed, Shutdown would wait for it and fail.
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
}
