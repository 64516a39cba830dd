package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/store"
	"github.com/prometheus/client_golang/prometheus"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The API keys of the HTTP scenarios: agents call as alice, approvers
// decide as bob of role finance.
const (
	agentKey    = "bench-agent-key"
	approverKey = "bench-approver-key"
)

// apiServer is the real HTTP server on a loopback port, as `countersign
// serve` runs it: API-key auth, metrics on the engine and the server,
// request logs formatted (and discarded).
type apiServer struct {
	url    string
	client *http.Client
	close  func()
}

func startAPI(e *countersign.Engine, st store.Store, metrics *server.Metrics, clients int) (*apiServer, error) {
	return serveAPI(server.Options{Engine: e, Metrics: metrics}, tagRoutes, clients)
}

// startTracedAPI is startAPI with the routes traced by tp as serve traces
// them (otelhttp, a span a request, the caller's traceparent continued);
// tp nil: not traced.
func startTracedAPI(e *countersign.Engine, metrics *server.Metrics, clients int, tp trace.TracerProvider) (*apiServer, error) {
	if tp == nil {
		return serveAPI(server.Options{Engine: e, Metrics: metrics}, tagRoutes, clients)
	}
	tag := func(h http.Handler) http.Handler {
		return otelhttp.NewHandler(tagRoutes(h), "countersign", otelhttp.WithTracerProvider(tp),
			otelhttp.WithPropagators(propagation.TraceContext{}),
			otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "HTTP " + r.Method }))
	}
	return serveAPI(server.Options{Engine: e, Metrics: metrics}, tag, clients)
}

// serveAPI serves the API of opts (its Auth the bench's two keys, its log
// discarded) on a free port, each request tagged by tag for the round-trip
// count, for clients clients at once.
func serveAPI(opts server.Options, tag func(http.Handler) http.Handler, clients int) (*apiServer, error) {
	keys, err := auth.NewAPIKeys([]auth.APIKey{
		{Key: agentKey, Tenant: "acme", Actor: "alice"},
		{Key: approverKey, Tenant: "acme", Actor: "bob", Roles: []string{"finance"}},
	})
	if err != nil {
		return nil, err
	}
	opts.Auth = keys
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := server.New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := srv.HTTPServer(ln.Addr().String())
	// Each request's round trips to PostgreSQL count against its route.
	hs.Handler = tag(hs.Handler)
	go func() { _ = hs.Serve(ln) }()
	tr := &http.Transport{MaxIdleConns: 4 * clients, MaxIdleConnsPerHost: 4 * clients, IdleConnTimeout: time.Minute}
	return &apiServer{url: "http://" + ln.Addr().String(), client: &http.Client{Transport: tr, Timeout: time.Minute},
		close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = hs.Shutdown(ctx)
			tr.CloseIdleConnections()
		}}, nil
}

// newMetrics is a fresh metrics registry, one per run.
func newMetrics() *server.Metrics { return server.NewMetrics(prometheus.NewRegistry()) }

// post sends a JSON body and decodes a 200 answer into out.
func (a *apiServer) post(ctx context.Context, path, token string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(raw))
	}
	return json.Unmarshal(raw, out)
}

// callAnswer is the part of a POST /v1/calls answer the scenarios read.
type callAnswer struct {
	Status     string `json:"status"`
	ProposalID string `json:"proposal_id"`
}

// decisionAnswer is the part of a decision's answer the scenarios read.
type decisionAnswer struct {
	Status string `json:"status"`
}
