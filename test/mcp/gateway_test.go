package mcptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
	"github.com/countersign/countersign/mcpgateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGatewayWithReferenceServers runs the node tests (gateway.test.mjs)
// against the gateway on each store, then reads what the memory server
// stored: each entity the node tests had approved, once; none they did
// not.
func TestGatewayWithReferenceServers(t *testing.T) {
	dir := nodetest.Need(t, ".", "this test runs the reference MCP servers and the MCP TypeScript SDK's client")
	bin := servetest.Build(t)
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"SQLite", func(t *testing.T) string { return servetest.SQLiteStore(t) }},
		{"PostgreSQL", func(t *testing.T) string { return servetest.PostgresStore(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			data := filepath.Join(tmp, "data")
			if err := os.Mkdir(data, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, "keep.txt"), []byte("original\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			memory := filepath.Join(tmp, "memory.jsonl")
			config := writeConfig(t, dir, tc.store(t), memory, data)
			base := servetest.Start(t, bin, config)
			waitReady(t, base)
			servetest.NPMTest(t, dir, 4*time.Minute, "COUNTERSIGN_URL="+base, "COUNTERSIGN_FS_DIR="+data,
				"COUNTERSIGN_BIN="+bin, "COUNTERSIGN_CONFIG="+config)
			checkMemory(t, memory)
		})
	}
}

// The entities the node tests create: approved ones exist once, rejected
// or never-approved ones not at all.
var (
	wantEntities   = []string{"e_approved", "e_hold"}
	absentEntities = []string{"e_rejected", "e_other_tenant", "e_inspector"}
)

// checkMemory reads the memory server's store, a JSON line per entity or
// relation.
func checkMemory(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the memory server's file: %v", err)
	}
	text := string(b)
	for _, name := range wantEntities {
		if n := strings.Count(text, fmt.Sprintf(`"name":"%s"`, name)); n != 1 {
			t.Errorf("entity %s stored %d times, want once:\n%s", name, n, text)
		}
	}
	for _, name := range absentEntities {
		if strings.Contains(text, fmt.Sprintf(`"name":"%s"`, name)) {
			t.Errorf("entity %s stored, but it was never approved:\n%s", name, text)
		}
	}
}

// writeConfig writes the server's configuration on store: alice's key and
// eve's, of another tenant; the memory server (storing in memory) and the
// filesystem server (serving data) as stdio upstreams run by node from
// dir's node_modules. The file vouches for some of their tools as reads:
// memory's read_graph and search_nodes (not open_nodes, which the server
// annotates readOnlyHint all the same), the filesystem's list_directory,
// and its read_text_file pinned to the schema the server lists now; its
// get_file_info is pinned to a schema it does not have. Those reads and
// the ones of the globs below run at once; deletions are denied; every
// other tool is a write, which the defaults ask of its requester, held for
// 2 s.
func writeConfig(t *testing.T, dir, store, memory, data string) string {
	t.Helper()
	mod := func(pkg string) string {
		return filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	}
	pin := schemaPin(t, mod("server-filesystem"), data, "read_text_file")
	cfg := fmt.Sprintf(`store: %q
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, roles: [agent]}
    - {key: key_eve, tenant: globex, actor: eve, roles: [agent, finance]}
worker: {poll_interval: 100ms, lease: 5s}
mcp:
  path: /mcp
  hold: 2s
  servers:
    - name: memory
      command: [node, %q]
      env: {MEMORY_FILE_PATH: %q}
      read_only: [read_graph, search_nodes]
    - name: fs
      command: [node, %q, %q]
      read_only:
        - list_directory
        - {name: read_text_file, schema_sha256: %q}
        - {name: get_file_info, schema_sha256: %q}
policy:
  rules:
    - {match: "memory__read_*", effect: allow}
    - {match: "memory__search_*", effect: allow}
    - {match: "fs__read_*", effect: allow}
    - {match: "fs__list_*", effect: allow}
    - {match: "memory__delete_*", effect: deny}
`, store, mod("server-memory"), memory, mod("server-filesystem"), data, pin, strings.Repeat("0", 64))
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// schemaPin is what an operator pins a tool's schema to: the
// mcpgateway.SchemaSHA256 of the input schema the filesystem server (the
// node module at server, serving data) lists for tool, read with the Go
// SDK's client as the gateway reads it.
func schemaPin(t *testing.T, server, data, tool string) string {
	t.Helper()
	ctx := t.Context()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pin", Version: "1"}, nil).Connect(ctx,
		&mcp.CommandTransport{Command: exec.CommandContext(ctx, "node", server, data)}, nil)
	if err != nil {
		t.Fatalf("start the filesystem server: %v", err)
	}
	defer cs.Close()
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tl.Name != tool {
			continue
		}
		schema, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		pin, err := mcpgateway.SchemaSHA256(schema)
		if err != nil {
			t.Fatal(err)
		}
		return pin
	}
	t.Fatalf("the filesystem server lists no %s", tool)
	return ""
}

// waitReady waits until the server's upstreams are connected (/readyz
// answers 200), so that the first tools/list holds their tools. It sets no
// deadline of its own: the test's bounds it.
func waitReady(t *testing.T, base string) {
	t.Helper()
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-t.Context().Done():
			t.Fatal("gave up waiting for /readyz")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
