package mcptest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
	"github.com/countersign/countersign/internal/servetest"
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
// eve's, of another tenant; the memory server
// (storing in memory) and the filesystem server (serving data) as stdio
// upstreams run by node from dir's node_modules; reads of both allowed,
// deletions denied, every other call asking its requester, held for 2 s.
func writeConfig(t *testing.T, dir, store, memory, data string) string {
	t.Helper()
	mod := func(pkg string) string {
		return filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	}
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
    - name: fs
      command: [node, %q, %q]
policy:
  rules:
    - {match: "memory__read_*", effect: allow}
    - {match: "memory__search_*", effect: allow}
    - {match: "fs__read_*", effect: allow}
    - {match: "fs__list_*", effect: allow}
    - {match: "memory__delete_*", effect: deny}
    - {match: "*", effect: ask, approvers: ["requester"], mode: wait}
`, store, mod("server-memory"), memory, mod("server-filesystem"), data)
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
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
