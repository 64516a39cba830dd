package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
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
	log := slog.New(slog.DiscardHandler)
	rt, err := build(context.Background(), &setupFlags{store: "sqlite:" + filepath.Join(t.TempDir(), "c.db")}, log)
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
}
