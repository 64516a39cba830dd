package mcptest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
)

func TestGateway(t *testing.T) {
	dir := nodetest.Need(t, ".", "this test runs the TypeScript MCP SDK's client and the filesystem MCP server")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	bin := nodetest.BuildCountersign(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "hello.txt"), []byte("hello from go"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsServer := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	config := writeConfig(t, node, fsServer, data)
	base := nodetest.Serve(t, bin, nil, "--config", config)
	waitReady(t, base)

	pass, _ := nodetest.RunTests(t, dir, []string{
		"COUNTERSIGN_URL=" + base, "DATA_DIR=" + data, "COUNTERSIGN_BIN=" + bin, "COUNTERSIGN_CONFIG=" + config,
	}, 3*time.Minute)
	t.Logf("npm test: %d node tests pass", pass)

	// What the node tests approved was written, once; what they declined
	// was not.
	for name, want := range map[string]string{"approved.txt": "approved", "held.txt": "held", "hello.txt": "hello from go"} {
		got, err := os.ReadFile(filepath.Join(data, name))
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "declined.txt")); !os.IsNotExist(err) {
		t.Errorf("declined.txt exists (%v): a declined write ran", err)
	}
}

// writeConfig writes the server's configuration: SQLite, alice's key, and
// the filesystem server over data as the upstream fs. Its reads are
// allowed, its other tools ask their requester, and move_file is denied.
func writeConfig(t *testing.T, node, fsServer, data string) string {
	t.Helper()
	tmp := t.TempDir()
	cfg := fmt.Sprintf(`store: "sqlite:%s"
auth:
  api_keys:
    - {key: key_alice, tenant: acme, actor: alice, roles: [agent]}
policy:
  rules:
    - {match: "fs__*", effect: ask, approvers: [requester]}
    - {match: "fs__read_*", effect: allow}
    - {match: "fs__move_file", effect: deny}
mcp:
  hold: 1s
  servers:
    - name: fs
      command: [%q, %q, %q]
`, filepath.Join(tmp, "countersign.db"), node, fsServer, data)
	path := filepath.Join(tmp, "countersign.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitReady waits, without a deadline of its own (the test's is the
// bound), until /readyz answers 200: the store is current and the upstream
// connected (it answers 503 while one is down).
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
