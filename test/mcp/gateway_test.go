package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
)

var listening = regexp.MustCompile(`countersign listening on (http://127\.0\.0\.1:[0-9]+)`)

// nodeSummary finds the counts node --test's TAP reporter ends with.
var nodeSummary = regexp.MustCompile(`(?m)^# (pass|fail|skipped|todo|cancelled) ([0-9]+)$`)

func TestGateway(t *testing.T) {
	dir := nodetest.Need(t, ".", "this test runs the TypeScript MCP SDK's client and the filesystem MCP server")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildServer(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "hello.txt"), []byte("hello from go"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsServer := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	config := writeConfig(t, node, fsServer, data)
	base := startServer(t, bin, config)
	waitReady(t, base)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), nodetest.QuietEnv...),
		"COUNTERSIGN_URL="+base, "DATA_DIR="+data, "COUNTERSIGN_BIN="+bin, "COUNTERSIGN_CONFIG="+config)
	// npm starts node as its child: on the deadline the whole group is
	// killed, so that a hung node test cannot keep the output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test: %v\n%s", err, out)
	}
	counts := map[string]string{}
	for _, m := range nodeSummary.FindAllStringSubmatch(string(out), -1) {
		counts[m[1]] = m[2]
	}
	if counts["fail"] != "0" || counts["skipped"] != "0" || counts["todo"] != "0" || counts["cancelled"] != "0" ||
		counts["pass"] == "" || counts["pass"] == "0" {
		t.Fatalf("npm test passed with failures, skips or no tests (%v):\n%s", counts, out)
	}
	t.Logf("npm test: %s node tests pass", counts["pass"])

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

func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "countersign")
	build := exec.Command("go", "build", "-o", bin, "github.com/countersign/countersign/cmd/countersign")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/countersign: %v\n%s", err, out)
	}
	return bin
}

// waitReady waits until /readyz answers 200: the store is current and the
// upstream is connected (it answers 503 while one is down).
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

// startServer serves bin with the configuration at config and returns its
// URL once it listens. The test's cleanup stops it with SIGTERM.
func startServer(t *testing.T, bin, config string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--config", config)
	cmd.Dir = t.TempDir()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	found := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-read
		if t.Failed() {
			t.Logf("countersign serve:\n%s", logs.String())
		}
	})
	select {
	case base := <-found:
		return base
	case err := <-done:
		<-read
		t.Fatalf("countersign serve exited before listening: %v\n%s", err, logs.String())
	case <-time.After(time.Minute):
		t.Fatal("countersign serve did not say where it listens")
	}
	return ""
}
