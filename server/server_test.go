package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/testlog"
	"github.com/countersign/countersign/store/memstore"
	"github.com/prometheus/client_golang/prometheus"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	engine, err := countersign.New(countersign.Options{Store: memstore.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	authn := fakeAuth(identities)
	cases := []struct {
		opts  Options
		field string
	}{
		{Options{Auth: authn}, "Options.Engine"},
		{Options{Engine: engine}, "Options.Auth"},
		{Options{Engine: engine, Auth: authn, CORSOrigins: []string{"https://ok.example", "inbox.example"}}, "Options.CORSOrigins[1]"},
		{Options{Engine: engine, Auth: authn, CORSOrigins: []string{"https://ok.example/path"}}, "Options.CORSOrigins[0]"},
		{Options{Engine: engine, Auth: authn, MetricsRole: " operator"}, "Options.MetricsRole"},
	}
	for _, c := range cases {
		_, err := New(c.opts)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New(%+v) = %v, want an error naming %s", c.opts, err, c.field)
		}
	}
	if _, err := New(Options{Engine: engine, Auth: authn, CORSOrigins: []string{"*", "http://localhost:5173"}}); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

func TestHTTPServerLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	s := h.srv.HTTPServer("127.0.0.1:0")
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.IdleTimeout <= 0 {
		t.Errorf("time-outs %v %v %v: want all set", s.ReadHeaderTimeout, s.ReadTimeout, s.IdleTimeout)
	}
	if s.WriteTimeout != 0 {
		t.Errorf("WriteTimeout %v would cut long-polls and streams", s.WriteTimeout)
	}
	if s.MaxHeaderBytes != 64<<10 {
		t.Errorf("MaxHeaderBytes %d", s.MaxHeaderBytes)
	}
	// Oversized headers are refused before any handler runs.
	resp := h.do(req{method: "GET", path: "/healthz", header: map[string]string{"X-Big": strings.Repeat("a", 200<<10)}, netHTTP: true})
	if resp.status != 431 {
		t.Errorf("200 KiB of headers: %d", resp.status)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	want(t, "healthz", h.must(200, req{method: "GET", path: "/healthz"}).json(t)["status"], "ok")
	want(t, "readyz", h.must(200, req{method: "GET", path: "/readyz"}).json(t)["status"], "ready")

	var fail error = errors.New("dial tcp db.internal:5432: connection refused")
	h2 := newHarness(t, "mem", harnessOptions{server: func(o *Options) {
		o.Ready = func(ctx context.Context) error { return fail }
	}})
	resp := h2.must(503, req{method: "GET", path: "/readyz"})
	want(t, "status", resp.json(t)["status"], "not_ready")
	if strings.Contains(string(resp.body), "db.internal") {
		t.Errorf("/readyz leaks the cause to anyone: %s", resp.body)
	}
	fail = nil
	h2.must(200, req{method: "GET", path: "/readyz"})
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	if again := NewMetrics(reg); again == nil {
		t.Fatal("NewMetrics on the same registry twice")
	}
	h := newHarness(t, "mem", harnessOptions{metrics: m})
	id := h.pending("m1", "c_m")
	h.decide(200, "bob", id, "approve", nil, nil)
	h.call("alice", refund("m1", "c_m", 40))
	m.WebhookObserved("payments.refund", "execute", 120*time.Millisecond, 200)
	m.WebhookObserved("payments.refund", "execute", time.Second, 0)
	m.LeaseLost("prp_x")

	body := string(h.must(200, req{method: "GET", path: "/metrics"}).body)
	for _, w := range []string{
		`countersign_proposal_transitions_total{status="pending"} 1`,
		`countersign_proposal_transitions_total{status="approved"} 1`,
		`countersign_proposal_transitions_total{status="succeeded"} 1`,
		`countersign_decision_latency_seconds_count{decision="approved"} 1`,
		`countersign_execution_duration_seconds_count{action="payments.refund",result="succeeded"} 1`,
		`countersign_executions_total{action="payments.refund",result="succeeded"} 1`,
		`countersign_lease_losses_total 1`,
		`countersign_webhook_duration_seconds_count{action="payments.refund",endpoint="execute",status="200"} 1`,
		`countersign_webhook_duration_seconds_count{action="payments.refund",endpoint="execute",status="error"} 1`,
		`countersign_http_request_duration_seconds_count{method="POST",route="/v1/calls",status="200"} 2`,
		`countersign_http_request_duration_seconds_count{method="POST",route="/v1/proposals/{id}/approve",status="200"} 1`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}

	m.Executed("payments.refund", time.Millisecond, countersign.NotApplied(errors.New("no")))
	m.Executed("payments.refund", time.Millisecond, errors.New("timeout"))
	body = string(h.must(200, req{method: "GET", path: "/metrics"}).body)
	for _, w := range []string{
		`countersign_executions_total{action="payments.refund",result="not_applied"} 1`,
		`countersign_executions_total{action="payments.refund",result="uncertain"} 1`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

func TestMetricsRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{server: func(o *Options) { o.MetricsRole = "operator" }})
	h.must(401, req{method: "GET", path: "/metrics"})
	h.must(401, req{method: "GET", path: "/metrics", token: "mallory"})
	h.must(403, req{method: "GET", path: "/metrics", token: "bob"})
	body := string(h.must(200, req{method: "GET", path: "/metrics", token: "carol"}).body)
	if !strings.Contains(body, "countersign_http_request_duration_seconds") {
		t.Error("the private registry lacks the HTTP metrics")
	}
	if !strings.Contains(body, "go_goroutines") {
		t.Error("the private registry lacks the Go collector")
	}
}

func TestCORS(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{server: func(o *Options) { o.CORSOrigins = []string{"https://inbox.example"} }})
	pre := h.must(204, req{method: "OPTIONS", path: "/v1/proposals/x/approve", unrouted: true, header: map[string]string{
		"Origin": "https://inbox.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, countersign-via",
	}})
	if pre.header.Get("Access-Control-Allow-Origin") != "https://inbox.example" ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Headers"), "Countersign-Via") ||
		!strings.Contains(pre.header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight headers: %v", pre.header)
	}
	resp := h.must(200, req{method: "GET", path: "/v1/proposals", token: "alice", header: map[string]string{"Origin": "https://inbox.example"}})
	if resp.header.Get("Access-Control-Allow-Origin") != "https://inbox.example" {
		t.Errorf("allowed origin: %v", resp.header)
	}
	if !strings.Contains(resp.header.Get("Access-Control-Expose-Headers"), NextHeader) {
		t.Errorf("Expose-Headers = %q", resp.header.Get("Access-Control-Expose-Headers"))
	}
	resp = h.must(200, req{method: "GET", path: "/v1/proposals", token: "alice", header: map[string]string{"Origin": "https://evil.example"}})
	if resp.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a foreign origin is allowed: %v", resp.header)
	}
	if !strings.Contains(resp.header.Get("Access-Control-Expose-Headers"), NextHeader) {
		t.Error("Expose-Headers missing without CORS")
	}
	pre = h.must(204, req{method: "OPTIONS", path: "/v1/calls", unrouted: true, header: map[string]string{
		"Origin": "https://evil.example", "Access-Control-Request-Method": "POST",
	}})
	if pre.header.Get("Access-Control-Allow-Origin") != "" || pre.header.Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("a foreign preflight is allowed: %v", pre.header)
	}

	wild := newHarness(t, "mem", harnessOptions{server: func(o *Options) { o.CORSOrigins = []string{"*"} }})
	resp = wild.must(200, req{method: "GET", path: "/healthz", header: map[string]string{"Origin": "https://anyone.example"}})
	if resp.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("wildcard: %v", resp.header)
	}
}

func TestUnmatchedRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	resp := h.must(404, req{method: "GET", path: "/v2/nothing", token: "alice", unrouted: true})
	if code := resp.errorCode(t); code != CodeNotFound {
		t.Errorf("code %s", code)
	}
	resp = h.must(405, req{method: "DELETE", path: "/v1/calls", token: "alice", unrouted: true})
	if code := resp.errorCode(t); code != CodeMethodNotAllowed || resp.header.Get("Allow") != "POST" {
		t.Errorf("code %s, Allow %q", code, resp.header.Get("Allow"))
	}
	resp = h.must(405, req{method: "PUT", path: "/v1/proposals/x", token: "alice", unrouted: true})
	if resp.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("Allow %q", resp.header.Get("Allow"))
	}
	// /v1 routes need a token; the open ones do not.
	for _, p := range []string{"/v1/proposals", "/v1/proposals/x", "/v1/proposals/x/events", "/v1/threads/t1", "/v1/threads/t1/proposals", "/v1/grants", "/v1/events"} {
		h.must(401, req{method: "GET", path: p})
	}
	for _, p := range []string{"approve", "reject", "cancel"} {
		h.must(401, req{method: "POST", path: "/v1/proposals/x/" + p})
	}
	h.must(401, req{method: "POST", path: "/v1/proposals/x/resolve", body: map[string]any{"outcome": "failed", "note": "n"}})
	h.must(401, req{method: "DELETE", path: "/v1/grants/x"})
	h.must(401, req{method: "GET", path: "/v1/proposals", token: "two words"})
}

// TestPanicIsInternal: a panicking hook answers 500 INTERNAL and the server
// lives on.
func TestPanicIsInternal(t *testing.T) {
	t.Parallel()
	boom, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "boom.read", Kind: countersign.KindRead,
		Hooks: countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			panic("boom")
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "mem", harnessOptions{engine: func(o *countersign.Options) { o.Actions = append(o.Actions, boom) }})
	resp := h.must(500, req{method: "POST", path: "/v1/calls", token: "alice", body: map[string]any{"thread_id": "t1", "tool_call_id": "b1", "action": "boom.read", "input": map[string]any{}}})
	if code := resp.errorCode(t); code != CodeInternal {
		t.Errorf("code %s", code)
	}
	h.must(200, req{method: "GET", path: "/healthz"})
}

// syncBuffer is a log destination the server's goroutines may share.
type syncBuffer = testlog.Buffer

// Request lines log at info by default; RequestLogLevel turns them down
// (here to debug, under an info logger: gone), while a 5xx still logs at
// error.
func TestRequestLogLevel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		level slog.Level
		lines int // of the 200
	}{{"default", 0, 1}, {"debug", slog.LevelDebug, 0}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var buf syncBuffer
			h := newHarness(t, "mem", harnessOptions{server: func(o *Options) {
				o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
				o.RequestLogLevel = c.level
			}})
			// Through the handler itself: it returns once the line is logged.
			for token, status := range map[string]int{"alice": 200, "broken": 500} {
				r := httptest.NewRequest("GET", "/v1/proposals", nil)
				r.Header.Set("Authorization", "Bearer "+token)
				rec := httptest.NewRecorder()
				h.srv.Handler().ServeHTTP(rec, r)
				if rec.Code != status {
					t.Fatalf("%s: %d, want %d", token, rec.Code, status)
				}
			}
			var ok, failed int
			for _, line := range strings.Split(buf.String(), "\n") {
				switch {
				case strings.Contains(line, `msg="http request"`) && strings.Contains(line, "status=200"):
					ok++
					if !strings.Contains(line, "level=INFO") {
						t.Errorf("request line %q, want INFO", line)
					}
				case strings.Contains(line, `msg="http request"`) && strings.Contains(line, "status=500"):
					failed++
					if !strings.Contains(line, "level=ERROR") {
						t.Errorf("request line %q, want ERROR", line)
					}
				}
			}
			if ok != c.lines || failed != 1 {
				t.Fatalf("%d lines for the 200 (want %d), %d for the 500 (want 1):\n%s", ok, c.lines, failed, buf.String())
			}
		})
	}
}
