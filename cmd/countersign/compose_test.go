package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRoutes: the one mux gives the API its paths and the inbox the rest,
// each surface directly.
func TestRoutes(t *testing.T) {
	t.Parallel()
	mark := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, name) })
	}
	mux := routes(mark("api"), mark("inbox"))
	for path, want := range map[string]string{
		"/v1/calls": "api", "/v1/proposals/prp_1/approve": "api", "/v1/events": "api", "/v1/nope": "api",
		"/healthz": "api", "/readyz": "api", "/metrics": "api", "/openapi.json": "api",
		"/": "inbox", "/login": "inbox", "/proposals/prp_1": "inbox", "/events": "inbox", "/static/app.css": "inbox",
		"/healthz/x": "inbox", "/nope": "inbox",
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if got := rec.Body.String(); got != want {
			t.Errorf("GET %s went to %q, want %q", path, got, want)
		}
	}
}

// TestComposedProcess builds serve's process from a demo configuration and
// checks that the API and the inbox answer on the one handler.
func TestComposedProcess(t *testing.T) {
	t.Parallel()
	a, _ := composeRunningWith(t, &setupFlags{store: "sqlite:" + filepath.Join(t.TempDir(), "c.db")})
	ts := httptest.NewServer(a.handler)
	t.Cleanup(ts.Close)
	for _, c := range []struct {
		path, token string
		status      int
		contentType string
		holds       string
	}{
		{"/healthz", "", 200, "application/json", `"ok"`},
		{"/readyz", "", 200, "application/json", `"ready"`},
		{"/openapi.json", "", 200, "application/json", `"openapi"`},
		{"/metrics", "", 200, "text/plain", "countersign_http_request_duration_seconds"},
		// Each demo action's series exist from start-up, at 0.
		{"/metrics", "", 200, "text/plain", `countersign_executions_total{action="payments.refund",result="succeeded"} 0`},
		{"/metrics", "", 200, "text/plain", `countersign_worker_claims_total{action="email.send"} 0`},
		{"/v1/proposals", "", 401, "application/json", "UNAUTHENTICATED"},
		{"/v1/proposals", demoKeys[0].Key, 200, "application/json", `"proposals"`},
		{"/login", "", 200, "text/html", "<form"},
	} {
		r, _ := http.NewRequest("GET", ts.URL+c.path, nil)
		if c.token != "" {
			r.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.contentType) || !strings.Contains(string(body), c.holds) {
			t.Errorf("GET %s: %d %s, want %d %s holding %q:\n%.300s", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.status, c.contentType, c.holds, body)
		}
	}
	// The proposal counts come from the process's worker, which counts at
	// once as it starts (and every metrics.proposal_counts_every).
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "\ncountersign_proposals{status=\"pending\"} 0\n") && strings.Contains(string(body), "\ncountersign_approved_backlog 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30s /metrics never reported the worker's proposal counts:\n%s", body)
		}
	}
}

// composeFile composes serve's process from a configuration file.
func composeFile(t *testing.T, yaml string) *httptest.Server {
	t.Helper()
	path := filepath.Join(t.TempDir(), "countersign.yaml")
	yaml = "store: sqlite:" + filepath.Join(t.TempDir(), "c.db") + "\n" + yaml
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	rt, err := build(context.Background(), &setupFlags{config: path}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.store.Close() })
	a, err := compose(rt, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(a.handler)
	t.Cleanup(ts.Close)
	return ts
}

// TestComposedConfig: the inbox's and the stream's settings reach them —
// web.secure_cookies and web.trusted_proxies decide the Secure flag of the
// inbox's cookies, events.max_streams_per_actor bounds the streams.
func TestComposedConfig(t *testing.T) {
	t.Parallel()
	const keys = "auth:\n  api_keys:\n    - {key: k_alice, tenant: acme, actor: alice}\n"
	secure := func(t *testing.T, ts *httptest.Server, header map[string]string) bool {
		t.Helper()
		r, _ := http.NewRequest("GET", ts.URL+"/login", nil)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cs := resp.Cookies()
		if resp.StatusCode != 200 || len(cs) == 0 {
			t.Fatalf("GET /login: %d, cookies %v", resp.StatusCode, cs)
		}
		for _, c := range cs {
			if !c.Secure {
				return false
			}
		}
		return true
	}
	https := map[string]string{"X-Forwarded-Proto": "https"}
	for _, c := range []struct {
		name, yaml string
		header     map[string]string
		want       bool
	}{
		{"always", "web: {secure_cookies: always}\n", nil, true},
		{"never", "web: {secure_cookies: never}\n", https, false},
		{"auto over http", "", nil, false},
		{"auto, untrusted proxy says https", "", https, false},
		{"auto, trusted proxy says https", "web: {trusted_proxies: [127.0.0.0/8, \"::1/128\"]}\n", https, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := secure(t, composeFile(t, keys+c.yaml), c.header); got != c.want {
				t.Errorf("Secure cookies = %v, want %v", got, c.want)
			}
		})
	}
	t.Run("streams per actor", func(t *testing.T) {
		t.Parallel()
		ts := composeFile(t, keys+"events: {max_streams_per_actor: 1}\n")
		open := func() *http.Response {
			r, _ := http.NewRequest("GET", ts.URL+"/v1/events", nil)
			r.Header.Set("Authorization", "Bearer k_alice")
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		first := open()
		defer first.Body.Close()
		second := open()
		second.Body.Close()
		if first.StatusCode != 200 || second.StatusCode != 429 || second.Header.Get("Retry-After") == "" {
			t.Errorf("two streams with a limit of one: %d, then %d (Retry-After %q)", first.StatusCode, second.StatusCode, second.Header.Get("Retry-After"))
		}
	})
}
