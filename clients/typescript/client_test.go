package typescript

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/nodetest"
)

// The node tools run without touching the network; npm ci alone reaches
// the registry, and only when node_modules is not what package-lock.json
// pins.
var quietEnv = nodetest.QuietEnv

var listening = regexp.MustCompile(`countersign listening on (http://127\.0\.0\.1:[0-9]+)`)

// TestClient runs the package's node tests (npm test: tsc, then node
// --test) against `countersign serve` with the demo configuration.
func TestClient(t *testing.T) {
	dir := needNode(t)
	url := startServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), quietEnv...), "COUNTERSIGN_URL="+url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("# fail 0")) || !bytes.Contains(out, []byte("# skipped 0")) {
		t.Fatalf("npm test passed with failures or skips:\n%s", out)
	}
}

// needNode returns this folder's absolute path once node and the pinned
// npm packages are there (nodetest.Need).
func needNode(t *testing.T) string {
	t.Helper()
	return nodetest.Need(t, ".", "this test runs the TypeScript client's node tests")
}

// startServer builds cmd/countersign and serves the demo (no config) on a
// temporary SQLite file, and returns its URL once it listens. The test's
// cleanup stops it with SIGTERM.
func startServer(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "countersign")
	build := exec.Command("go", "build", "-o", bin, "github.com/countersign/countersign/cmd/countersign")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/countersign: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--store", "sqlite:"+filepath.Join(tmp, "countersign.db"))
	cmd.Dir = tmp
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
	case url := <-found:
		return url
	case err := <-done:
		<-read
		t.Fatalf("countersign serve exited before listening: %v\n%s", err, logs.String())
	case <-time.After(time.Minute):
		t.Fatal("countersign serve did not say where it listens")
	}
	return ""
}
