package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/recheck"
	"github.com/countersign/countersign/server/auth"
)

// Limits and time-outs of the HTTP server.
const (
	// MaxWait bounds every long-poll: a call's wait_seconds and a proposal's
	// wait_seconds.
	MaxWait = 60 * time.Second
	// DefaultCallWait is a wait-mode call's wait when wait_seconds is absent.
	DefaultCallWait = 25 * time.Second
	// ReadHeaderTimeout bounds reading a request's line and headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request, body included. Once the
	// body is read, net/http lifts it: handlers may outlive it.
	ReadTimeout = 30 * time.Second
	// IdleTimeout bounds a kept-alive connection between requests.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
	// handlerWriteTimeout bounds writing one answer: the longest long-poll,
	// an execution that may follow it, and the write itself. Event streams
	// set a deadline per event instead.
	handlerWriteTimeout = 3 * time.Minute
)

// NextHeader carries the next page's cursor of a listing, escaped so that
// JavaScript's decodeURIComponent restores it.
const NextHeader = "X-Action-Proposals-Next"

// ViaHeader lets the CLI ("cli") record its
// decisions under their own channel instead of "api".
const ViaHeader = "Countersign-Via"

// Options configures a Server.
type Options struct {
	// Engine runs calls and decisions. Required.
	Engine *countersign.Engine
	// Auth resolves bearer tokens to identities. Required.
	Auth auth.Authenticator
	// CORSOrigins are the origins ("https://inbox.example.com") browsers may
	// call the API from; "*" allows any. Empty: no cross-origin access.
	CORSOrigins []string
	// MetricsRole, if set, is the role a bearer token needs to read /metrics.
	// Empty: /metrics is open (keep it behind your network).
	MetricsRole string
	// Logger receives request logs and the causes of 500s. Default
	// slog.Default().
	Logger *slog.Logger
	// RequestLogLevel is the level of the line each request logs: the zero
	// value is info; slog.LevelDebug keeps a busy server's log for what
	// matters. Probes and scrapes log at debug whatever it is, and a 5xx at
	// error.
	RequestLogLevel slog.Level
	// Ready reports readiness for /readyz: the store reachable, its schema
	// current. Nil: ready whenever the process serves.
	Ready func(ctx context.Context) error
	// Metrics records HTTP metrics and serves /metrics. Pass the same value
	// as the engine's Options.Observer to get engine metrics too. Nil: a
	// private registry with HTTP and Go runtime metrics only.
	Metrics *Metrics
	// Agents drives the runs the chat route starts (package agent's
	// Runtime). Nil: messages are stored for an external agent.
	Agents Agents
	// DefaultAgent is the agent a message without "agent" runs.
	DefaultAgent string
	// MaxStreamsPerActor bounds the event streams (GET /v1/events and
	// StreamEvents) one actor of a tenant holds open at once in this
	// process; one more answers 429 TOO_MANY_REQUESTS with Retry-After.
	// 0 means DefaultMaxStreamsPerActor.
	MaxStreamsPerActor int
}

func (o *Options) validate() error {
	switch {
	case o.Engine == nil:
		return errors.New("server: Options.Engine is required")
	case o.Auth == nil:
		return errors.New("server: Options.Auth is required")
	}
	for i, origin := range o.CORSOrigins {
		if origin == "*" {
			continue
		}
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("server: Options.CORSOrigins[%d] %q: want \"*\" or scheme://host[:port]", i, origin)
		}
	}
	if o.MaxStreamsPerActor < 0 {
		return fmt.Errorf("server: Options.MaxStreamsPerActor %d: want 0 (the default) or more", o.MaxStreamsPerActor)
	}
	if strings.TrimSpace(o.MetricsRole) != o.MetricsRole {
		return fmt.Errorf("server: Options.MetricsRole %q: surrounding spaces", o.MetricsRole)
	}
	return nil
}

// Server serves the HTTP API. It is safe for concurrent use.
type Server struct {
	engine       *countersign.Engine
	auth         auth.Authenticator
	cors         []string
	metRole      string
	log          *slog.Logger
	reqLog       slog.Level
	ready        func(ctx context.Context) error
	metrics      *Metrics
	streams      *streamLimit
	creds        *recheck.Guard[string, countersign.Identity] // credentialguard.go
	agents       Agents
	defaultAgent string
	handler      http.Handler
	mux          *http.ServeMux

	// base ends when an http.Server from HTTPServer shuts down, so that
	// event streams and proposal long-polls end instead of holding Shutdown.
	base     context.Context
	shutdown context.CancelFunc

	// Test knobs: how soon an event stream reads again after a failed read
	// (retryEvery), how often it reads with nothing waking it (recheckEvery,
	// a last resort: the engine's watcher wakes it for other processes'
	// changes), its keep-alive period, and a cap on every long-poll.
	retryEvery     time.Duration
	recheckEvery   time.Duration
	keepAliveEvery time.Duration
	waitCap        time.Duration
}

// New validates opts and returns a Server.
func New(opts Options) (*Server, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		engine:         opts.Engine,
		auth:           opts.Auth,
		cors:           slices.Clone(opts.CORSOrigins),
		metRole:        opts.MetricsRole,
		log:            opts.Logger,
		reqLog:         opts.RequestLogLevel,
		ready:          opts.Ready,
		metrics:        opts.Metrics,
		streams:        newStreamLimit(cmp.Or(opts.MaxStreamsPerActor, DefaultMaxStreamsPerActor)),
		agents:         opts.Agents,
		defaultAgent:   opts.DefaultAgent,
		retryEvery:     500 * time.Millisecond,
		recheckEvery:   streamRecheck,
		keepAliveEvery: 15 * time.Second,
		waitCap:        MaxWait,
	}
	s.base, s.shutdown = context.WithCancel(context.Background())
	s.creds = recheck.New[string, countersign.Identity](credentialRecheck, s.recheckCredentials)
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.metrics == nil {
		s.metrics = NewMetrics(nil)
	}
	s.mux = http.NewServeMux()
	s.routes()
	s.handler = s.observe(s.recover(s.withCORS(s.withDeadlines(s.mux))))
	return s, nil
}

// Handler returns the API's handler.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer returns an http.Server for the API on addr, with time-outs and
// limits against slow clients and oversized headers. WriteTimeout stays 0 so
// long-polls and event streams live; each handler bounds its own writes.
// The http.Server's Shutdown ends open event streams and long-polls (of
// every http.Server of s, for good: a Server serves one process life).
func (s *Server) HTTPServer(addr string) *http.Server {
	srv := &http.Server{
		Addr:              addr,
		Handler:           s.handler,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(s.shutdown)
	return srv
}

// routes registers the routes of docs/api.md this server serves; server/openapi.json
// describes exactly these, and test/docs checks that the two agree.
func (s *Server) routes() {
	m := s.mux
	m.Handle("POST /v1/calls", s.authed(s.handleCall))
	m.Handle("GET /v1/proposals", s.authed(s.handleListProposals))
	m.Handle("GET /v1/proposals/{id}", s.authed(s.handleGetProposal))
	m.Handle("GET /v1/proposals/{id}/events", s.authed(s.handleProposalEvents))
	m.Handle("POST /v1/proposals/{id}/approve", s.authed(s.handleDecide(countersign.Approve)))
	m.Handle("POST /v1/proposals/{id}/reject", s.authed(s.handleDecide(countersign.Reject)))
	m.Handle("POST /v1/proposals/{id}/step-up", s.authed(s.handleStepUp))
	m.Handle("POST /v1/passkeys/enrollments", s.authed(s.handleCreateEnrollment))
	m.Handle("POST /v1/proposals/{id}/cancel", s.authed(s.handleCancel))
	m.Handle("POST /v1/proposals/{id}/resolve", s.authed(s.handleResolve))
	m.Handle("POST /v1/proposals/{id}/settle", s.authed(s.handleSettle))
	m.Handle("POST /v1/proposals/{id}/renew", s.authed(s.handleRenew))
	m.Handle("GET /v1/threads/{thread_id}", s.authed(s.handleGetThread))
	m.Handle("GET /v1/threads/{thread_id}/proposals", s.authed(s.handleThreadProposals))
	m.Handle("POST /v1/threads/{thread_id}/messages", s.authed(s.handlePostMessage))
	m.Handle("GET /v1/threads/{thread_id}/runs/{run_id}", s.authed(s.handleGetRun))
	m.Handle("POST /v1/threads/{thread_id}/runs/{run_id}/cancel", s.authed(s.handleCancelRun))
	m.Handle("POST /v1/agui", s.authed(s.handleAGUI))
	m.Handle("POST /v1/agui/{agent}", s.authed(s.handleAGUI))
	m.Handle("GET /v1/grants", s.authed(s.handleListGrants))
	m.Handle("DELETE /v1/grants/{id}", s.authed(s.handleRevokeGrant))
	m.Handle("GET /v1/events", s.authed(s.handleEvents))
	m.Handle("GET /v1/notifications", s.authed(s.handleListNotifications))
	m.Handle("POST /v1/notifications/{id}/retry", s.authed(s.handleRetryNotification))
	m.Handle("GET /v1/audit", s.authed(s.handleAudit))
	m.Handle("GET /v1/me", s.authed(s.handleMe))
	m.Handle("GET /v1/actions", s.authed(s.handleListActions))
	m.Handle("GET /v1/audit/checkpoints", s.authed(s.handleAuditCheckpoints))
	m.Handle("GET /healthz", s.open(s.handleHealth))
	m.Handle("GET /readyz", s.open(s.handleReady))
	m.Handle("GET /metrics", http.HandlerFunc(s.handleMetrics))
	m.Handle("GET /openapi.json", s.open(s.handleOpenAPI))
	m.Handle("/", s.open(s.handleUnmatched))
}

// authedFunc is a handler of an authenticated route. It returns an error
// (an *apiError, or anything else for a 500) instead of writing one.
type authedFunc func(w http.ResponseWriter, r *http.Request, id countersign.Identity) error

// authed resolves the bearer token, then runs h and writes its error.
func (s *Server) authed(h authedFunc) http.Handler {
	return s.open(func(w http.ResponseWriter, r *http.Request) error {
		id, err := s.identify(r)
		if err != nil {
			return err
		}
		if rec, ok := w.(*recorder); ok {
			rec.actor = id.Tenant + "/" + id.Actor
		}
		w.Header().Set("Cache-Control", "no-store")
		return h(w, r, id)
	})
}

// identify authenticates the request's bearer token.
func (s *Server) identify(r *http.Request) (countersign.Identity, error) {
	token, err := auth.BearerToken(r)
	if err != nil {
		return countersign.Identity{}, errUnauthenticated(err.Error())
	}
	id, err := s.auth.Authenticate(r.Context(), token)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return countersign.Identity{}, errUnauthenticated("the token is not valid")
	case err != nil:
		// The authenticator could not decide (a key store is down): not the
		// client's fault, and not a refusal.
		return countersign.Identity{}, fmt.Errorf("authenticate: %w", err)
	case id.Tenant == "" || id.Actor == "":
		return countersign.Identity{}, errors.New("authenticate: the authenticator returned an identity without tenant or actor")
	}
	return id, nil
}

// open runs h and writes its error.
func (s *Server) open(h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeErr(w, r, err)
		}
	})
}

// writeErr writes an *apiError as it is, and anything else as a logged 500.
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	if rec, ok := w.(*recorder); ok && rec.wrote {
		// A stream already answered: the error can only be logged.
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "request failed after the answer began",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		return
	}
	ae, ok := errors.AsType[*apiError](err)
	switch {
	case ok && ae.cause != nil:
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "request refused; the answer says less than the cause",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("code", ae.code), slog.Any("err", ae.cause))
	case ok:
	case agentRefused(err) != nil:
		ae = agentRefused(err)
	case errors.Is(err, cstype.ErrNotFound):
		// Deleted between two reads of one request.
		ae = errNotFound("not found")
	case errors.Is(err, cstype.ErrUnavailable):
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "request failed: the store cannot be reached",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		ae = errUnavailable()
	case r.Context().Err() != nil:
		// The client left; its request's store calls were cancelled.
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "request abandoned by its client",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		ae = errInternal
	default:
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		ae = errInternal
	}
	writeError(w, ae)
}

// handleUnmatched answers a path no route serves (404) or a method the path
// does not take (405, with Allow).
func (s *Server) handleUnmatched(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	if len(allow) == 0 {
		return errNotFound("no route for %s", r.URL.Path)
	}
	e := newError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s does not take %s", r.URL.Path, r.Method)
	e.header = http.Header{"Allow": {strings.Join(allow, ", ")}}
	return e
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if s.ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if err := s.ready(ctx); err != nil {
			// The cause may name hosts and databases: it goes to the log,
			// not to an unauthenticated caller.
			s.log.LogAttrs(r.Context(), slog.LevelWarn, "not ready", slog.Any("err", err))
			e := newError(http.StatusServiceUnavailable, CodeNotReady, "not ready: the store is unreachable or its schema is not current")
			e.bodyStatus = "not_ready"
			writeError(w, e)
			return nil
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if s.metRole != "" {
		id, err := s.identify(r)
		if err == nil && !slices.Contains(id.Roles, s.metRole) {
			err = errForbidden("/metrics needs the role %q", s.metRole)
		}
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
	}
	s.metrics.handler().ServeHTTP(w, r)
}

// StreamEvents serves id the event stream of GET /v1/events: the same
// events, visibility, Last-Event-ID resumption and shutdown. It is for a
// front end that authenticated the caller some other way (the web inbox's
// session cookie), since EventSource cannot send a bearer token.
func (s *Server) StreamEvents(w http.ResponseWriter, r *http.Request, id countersign.Identity) {
	if err := s.handleEvents(w, r, id); err != nil {
		s.writeErr(w, r, err)
	}
}

// requestContext is r's context, also ended when the server shuts down, so
// that long-polls answer instead of holding Shutdown.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel() }
}
