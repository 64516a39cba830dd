package clients

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// TestMain removes the server binary that the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// countersignBinary builds cmd/countersign once for the package's tests.
func countersignBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "countersign-clients-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "countersign")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/countersign/countersign/cmd/countersign")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/countersign: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// serverProcess is a `countersign serve` process: the demo configuration
// (its actions, policy and development API keys) on a SQLite file.
type serverProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	URL  string // http://127.0.0.1:PORT
	Addr string // 127.0.0.1:PORT
	done chan error
	logs *bytes.Buffer
}

var listening = regexp.MustCompile(`countersign listening on (http://(127\.0\.0\.1:[0-9]+))`)

// startServer runs the demo server on db, listening on addr (":0" style
// "127.0.0.1:0" for any free port), and returns once it listens. The test's
// cleanup stops it if the test does not.
func startServer(t *testing.T, db, addr string) *serverProcess {
	t.Helper()
	cmd := exec.Command(countersignBinary(t), "serve", "--listen", addr, "--store", "sqlite:"+db)
	cmd.Dir = filepath.Dir(db)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serverProcess{t: t, cmd: cmd, done: make(chan error, 1), logs: &bytes.Buffer{}}
	// Read only once the process has exited and Wait has copied it all.
	cmd.Stderr = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- [2]string{m[1], m[2]}
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.done <- cmd.Wait()
		close(found)
	}()
	m, ok := <-found
	if !ok {
		err := <-p.done
		t.Fatalf("countersign serve exited before listening: %v\n%s", err, p.logs)
	}
	p.URL, p.Addr = m[0], m[1]
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.Stop()
		}
	})
	return p
}

// Stop sends SIGTERM, the way an operator restarts the server, and waits
// for the process to drain and exit.
func (p *serverProcess) Stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.done; err != nil {
		p.t.Errorf("countersign serve: %v\n%s", err, p.logs)
	}
}

// do sends one request with a bearer token and a JSON body (nil: none) and
// returns the status and the decoded answer.
func (p *serverProcess) do(method, path, token string, body any) (int, map[string]any) {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			p.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(p.t.Context(), method, p.URL+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &out); err != nil {
			p.t.Fatalf("%s %s: %v\n%s", method, path, err, b)
		}
	}
	return resp.StatusCode, out
}

// must is do that fails the test unless the status is want.
func (p *serverProcess) must(want int, method, path, token string, body any) map[string]any {
	p.t.Helper()
	status, out := p.do(method, path, token, body)
	if status != want {
		p.t.Fatalf("%s %s: %d, want %d: %v", method, path, status, want, out)
	}
	return out
}

// get fetches path without a token and returns the raw body.
func (p *serverProcess) get(path string) []byte {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", p.URL+path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		p.t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return b
}
