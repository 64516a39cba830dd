package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// stopServer stops s with SIGTERM and returns all it wrote.
func stopServer(t *testing.T, s *running) string {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-s.done; err != nil {
		t.Fatalf("serve exited with %v\n%s", err, s.output())
	}
	s.done <- nil // for the cleanup
	<-s.read
	return s.output()
}

// serveWithLog runs serve with a configuration holding logSection, makes one
// request, stops it and returns its output.
func serveWithLog(t *testing.T, logSection string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "countersign.yaml")
	yaml := "store: sqlite:" + filepath.Join(dir, "c.db") + "\nauth:\n  api_keys:\n    - {key: k_alice, tenant: acme, actor: alice}\n" + logSection
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--config", path)
	r, _ := http.NewRequest("GET", s.base+"/v1/proposals", nil)
	r.Header.Set("Authorization", "Bearer k_alice")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/proposals: %d", resp.StatusCode)
	}
	return stopServer(t, s)
}

// serve writes its log as log.level and log.format say, and log.requests:
// false moves the request lines to debug.
func TestServeLogSettings(t *testing.T) {
	t.Run("json, requests off", func(t *testing.T) {
		t.Parallel()
		out := serveWithLog(t, "log: {format: json, requests: false}\n")
		var shutdown bool
		for _, line := range strings.Split(out, "\n") {
			if !strings.HasPrefix(line, "{") {
				continue // what serve prints on standard output
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q is not JSON: %v", line, err)
			}
			if rec["msg"] == "http request" {
				t.Errorf("a request line at info with log.requests: false: %s", line)
			}
			shutdown = shutdown || strings.HasPrefix(rec["msg"].(string), "shutting down")
		}
		if !shutdown {
			t.Fatalf("no JSON shutdown line in:\n%s", out)
		}
	})
	t.Run("debug, requests off", func(t *testing.T) {
		t.Parallel()
		out := serveWithLog(t, "log:\n  level: debug\n  requests: false\n")
		if !strings.Contains(out, `level=DEBUG msg="http request" method=GET route=/v1/proposals`) {
			t.Fatalf("no debug request line in:\n%s", out)
		}
	})
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		out := serveWithLog(t, "")
		if !strings.Contains(out, `level=INFO msg="http request" method=GET route=/v1/proposals`) {
			t.Fatalf("no info request line in:\n%s", out)
		}
	})
	t.Run("error level", func(t *testing.T) {
		t.Parallel()
		if out := serveWithLog(t, "log: {level: error}\n"); strings.Contains(out, "level=INFO") {
			t.Fatalf("info lines at log.level error:\n%s", out)
		}
	})
}
