package main

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/channels/email"
	"github.com/countersign/countersign/channels/slack"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/mcpgateway"
	"github.com/countersign/countersign/notifications"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/server/auth"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/countersign/countersign/web"
	"github.com/countersign/countersign/webhook"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// shutdownTimeout bounds a graceful stop: in-flight requests and executions
// get this long to finish.
const shutdownTimeout = 30 * time.Second

func serverCommands() []*cobra.Command {
	return []*cobra.Command{serveCmd(), workerCmd(), migrateCmd(), configCmd(), mcpCmd()}
}

// setupFlags are the flags of the commands that run the server side.
type setupFlags struct {
	config, listen, store string
	// dryRun builds everything serve builds before it binds, on an
	// in-memory store and without starting upstream MCP servers: what
	// `config validate` runs, so that every refusal of serve's start is one
	// of validate's too.
	dryRun bool
	// role names the process in its spans' resource ("serve", "worker").
	role string
}

// load reads the configuration: the file, then the environment, then flags.
// Without a file it is the demo.
func (f *setupFlags) load() (cfg *config.Config, demo bool, err error) {
	if f.config == "" {
		cfg, demo = config.Default(), true
	} else if cfg, err = config.Load(f.config); err != nil {
		return nil, false, &exitErr{exitUsage, err.Error()}
	}
	if err := cfg.ApplyEnv(); err != nil {
		return nil, false, &exitErr{exitUsage, err.Error()}
	}
	if f.listen != "" {
		if err := cfg.SetListen(f.listen); err != nil {
			return nil, false, &exitErr{exitUsage, err.Error()}
		}
	}
	if f.store != "" {
		if err := cfg.SetStore(f.store); err != nil {
			return nil, false, &exitErr{exitUsage, err.Error()}
		}
	}
	return cfg, demo, nil
}

// openStore opens the configured store, migrating it when asked. A
// PostgreSQL store's pool has pgMaxConns connections (0: the default,
// pgstore.DefaultMaxConns) unless the URL sets pool_max_conns.
func openStore(ctx context.Context, spec string, migrate bool, pgMaxConns int) (store.Store, error) {
	driver, location, err := config.ParseStore(spec)
	if err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	switch driver {
	case "sqlite":
		return sqlitestore.Open(ctx, location, &sqlitestore.Options{SkipMigrations: !migrate})
	case "postgres":
		dsn, schema, err := splitSchema(location)
		if err != nil {
			return nil, &exitErr{exitUsage, err.Error()}
		}
		return pgstore.Open(ctx, dsn, &pgstore.Options{Schema: schema, SkipMigrations: !migrate, MaxConns: pgMaxConns})
	}
	return nil, &exitErr{exitUsage, fmt.Sprintf("store %q: unknown driver %q", spec, driver)}
}

// ready reports whether the store answers and its schema is current.
func ready(st store.Store) func(context.Context) error {
	type versioned interface {
		SchemaVersion(context.Context) (int, error)
	}
	latest := 0
	switch st.(type) {
	case *sqlitestore.Store:
		latest = sqlitestore.LatestSchemaVersion()
	case *pgstore.Store:
		latest = pgstore.LatestSchemaVersion()
	}
	return func(ctx context.Context) error {
		v, ok := st.(versioned)
		if !ok {
			return nil
		}
		got, err := v.SchemaVersion(ctx)
		if err != nil {
			return fmt.Errorf("store unreachable: %w", err)
		}
		if got != latest {
			return fmt.Errorf("schema version %d, want %d: run countersign migrate", got, latest)
		}
		return nil
	}
}

// runtime is everything serve and worker assemble from the configuration.
type runtime struct {
	cfg     *config.Config
	demo    bool
	dryRun  bool // setupFlags.dryRun
	store   store.Store
	engine  *countersign.Engine
	metrics *server.Metrics
	log     *slog.Logger
	reg     *prometheus.Registry
	counts  *server.ProposalCounts
	// agents drives the runs of the configured agents (the demo's scripted
	// one without a file); defaultAgent answers messages that name none.
	agents       *agent.Runtime
	defaultAgent string
	// notify delivers the notification outbox. build writes its targets
	// to the store before anything is served; the worker runs it
	// (workerOptions), which writes them again as it starts.
	notify *notifications.Deliverer
	// slack is the Slack approver channel; nil when channels.slack is not
	// configured.
	slack *slack.Slack
	// email is channels.email (its outbox channel and its /d/ pages); nil
	// when not configured.
	email *email.Channel
	// signingKey signs the audit chain's checkpoints
	// (audit.signing_key_file); nil: none are signed.
	signingKey ed25519.PrivateKey
	// tracing is the tracer provider (nil: tracing is off), and tp the
	// same provider, which the process shuts down at exit to export its
	// last spans.
	tracing trace.TracerProvider
	tp      *sdktrace.TracerProvider
}

// close closes the store and exports the last spans.
func (rt *runtime) close() {
	rt.store.Close()
	shutdownTracing(rt.tp, rt.log)
}

// workerOptions are the configured worker's, with the checkpoint key and
// the notification outbox's delivery: the worker is the one start point of
// the periodic jobs (internal/maintenance), in serve and in worker alike.
func (rt *runtime) workerOptions() countersign.WorkerOptions {
	o := rt.cfg.WorkerOptions()
	o.Sealer.SigningKey = rt.signingKey
	o.Notifications = rt.notify
	return o
}

// build loads the configuration and builds the engine on its store. A nil
// log means the configured one (log.level, log.format) on standard error.
func build(ctx context.Context, f *setupFlags, log *slog.Logger) (_ *runtime, err error) {
	cfg, demo, err := f.load()
	if err != nil {
		return nil, err
	}
	// Before anything starts: a missing secret, or one shared where it
	// must not be (a receiver holding a backend's), fails the start.
	if err := cfg.CheckSecrets(os.Getenv); err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	if log == nil {
		log = cfg.Log.Logger(os.Stderr)
	}
	// Before anything that logs or serves: every span and log line of the
	// process is traced from the start.
	var tp *sdktrace.TracerProvider
	if !f.dryRun {
		if tp, err = newTracing(ctx, cfg, cmp.Or(f.role, "serve")); err != nil {
			return nil, &exitErr{exitUsage, err.Error()}
		}
		log = tracedLogger(log, tp != nil)
		defer func() {
			if err != nil {
				shutdownTracing(tp, log)
			}
		}()
	}
	// Before the store: a key the process cannot use is a configuration
	// error, found at once (by config validate's dry run too).
	var key ed25519.PrivateKey
	if path := cfg.Audit.SigningKeyFile; path != "" {
		if key, err = readSigningKey(path); err != nil {
			return nil, err
		}
		if !f.dryRun {
			log.Info("audit checkpoints are signed", "key_id", auditchain.KeyID(key.Public().(ed25519.PublicKey)), "every", cfg.Audit.CheckpointEvery)
		}
	}
	var st store.Store
	if f.dryRun {
		st = memstore.New(nil)
	} else {
		for _, w := range cfg.Warnings() {
			log.Warn(w)
		}
		if st, err = openStoreWaiting(ctx, cfg, log); err != nil {
			return nil, err
		}
	}
	rt := &runtime{cfg: cfg, demo: demo, dryRun: f.dryRun, store: st, log: log, reg: prometheus.NewRegistry(), signingKey: key}
	if tp != nil {
		rt.tracing, rt.tp = tp, tp
	}
	rt.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rt.metrics = server.NewMetrics(rt.reg)
	rt.counts = server.NewProposalCounts()
	rt.reg.MustRegister(rt.counts)
	opts := cfg.EngineOptions()
	// Passkeys' relying party and the links the engine gives (step-up).
	opts.PublicURL = cfg.PublicURL
	opts.Store, opts.Observer, opts.Logger, opts.TracerProvider = st, rt.metrics, log, rt.tracing
	if opts.TextDecisions, err = cfg.TextVocabulary(); err != nil {
		st.Close()
		return nil, &exitErr{exitUsage, err.Error()}
	}
	if demo {
		opts.Policy = demoPolicy()
		if opts.Actions, err = newDemoBackend().actions(); err != nil {
			st.Close()
			return nil, err
		}
	} else if opts.Actions, err = webhookActions(cfg, rt.metrics.WebhookObserved, rt.tracing); err != nil {
		st.Close()
		return nil, err
	}
	if rt.engine, err = countersign.New(opts); err != nil {
		st.Close()
		return nil, err
	}
	rt.metrics.InitActions(rt.engine.Actions())
	if err := rt.buildAgents(); err != nil {
		st.Close()
		return nil, err
	}
	if rt.email, err = rt.emailChannel(); err != nil {
		st.Close()
		return nil, err
	}
	if rt.notify, err = rt.deliverer(); err != nil {
		st.Close()
		return nil, err
	}
	if err := rt.notify.Sync(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return rt, nil
}

// buildAgents makes the agent runtime: the demo's agent, or the configured
// ones.
func (rt *runtime) buildAgents() error {
	var agents []*agent.Agent
	if rt.demo {
		a, err := demoAgent()
		if err != nil {
			return err
		}
		agents, rt.defaultAgent = append(agents, a), demoAgentName
	} else {
		var err error
		if agents, err = configuredAgents(rt.cfg, os.Getenv); err != nil {
			return &exitErr{exitUsage, err.Error()}
		}
		rt.defaultAgent = rt.cfg.DefaultAgentName()
	}
	var err error
	rt.agents, err = agent.NewRuntime(agent.RuntimeOptions{Engine: rt.engine, Agents: agents, Logger: rt.log, TracerProvider: rt.tracing})
	if err != nil {
		return &exitErr{exitUsage, err.Error()}
	}
	return nil
}

// webhookActions turns the configured actions into webhook actions.
func webhookActions(cfg *config.Config, observe func(action, endpoint string, d time.Duration, status int), tp trace.TracerProvider) ([]*countersign.Action, error) {
	if len(cfg.Actions) == 0 {
		return nil, nil
	}
	var out []*countersign.Action
	for i, a := range cfg.Actions {
		spec := webhook.Spec{
			Name: a.Name, Version: a.Version, Kind: a.Kind, Description: a.Description, InputSchema: a.InputSchema,
			Confirmation:   countersign.Confirmation{Title: a.Confirmation.Title, Verb: a.Confirmation.Verb},
			ReplacementKey: a.ReplacementKey, Idempotent: a.Idempotent,
			Prepare: endpoint(a.Prepare), Execute: endpoint(a.Execute), Reconcile: endpoint(a.Reconcile),
			ExecuteByCaller: a.ExecutedByCaller(),
		}
		if spec.ExecuteByCaller {
			spec.Execute = nil
		}
		// Each action signs with its own webhook_secret_env, or the
		// top-level one. An action that calls no backend (executed by its
		// caller, with no prepare or reconcile) needs none.
		var secret []byte
		if spec.Execute != nil || spec.Prepare != nil || spec.Reconcile != nil {
			var err error
			if secret, err = cfg.ActionWebhookSecret(i); err != nil {
				return nil, &exitErr{exitUsage, err.Error()}
			}
		}
		act, err := webhook.NewAction(spec, webhook.Options{Secret: secret, Observe: observe, TracerProvider: tp})
		if err != nil {
			return nil, err
		}
		out = append(out, act)
	}
	return out, nil
}

func endpoint(e *config.Endpoint) *webhook.Endpoint {
	if e == nil {
		return nil
	}
	return &webhook.Endpoint{URL: e.URL, Timeout: e.Timeout}
}

// authenticator builds the token checks: API keys, then JWT.
func (rt *runtime) authenticator() (auth.Authenticator, error) {
	var keys []auth.APIKey
	if rt.demo {
		for _, k := range demoKeys {
			keys = append(keys, auth.APIKey{Key: k.Key, Tenant: k.Tenant, Actor: k.Actor, Roles: k.Roles, Kind: countersign.CredentialKind(k.Kind)})
		}
	}
	for _, k := range rt.cfg.APIKeys() {
		keys = append(keys, auth.APIKey{KeySHA256: k.KeySHA256, Tenant: k.Tenant, Actor: k.Actor, Roles: k.Roles, Kind: countersign.CredentialKind(k.Kind)})
	}
	apiKeys, err := auth.NewAPIKeys(keys)
	if err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	j := rt.cfg.JWT()
	if j == nil {
		return apiKeys, nil
	}
	jc := auth.JWTConfig{Issuer: j.Issuer, Audience: j.Audience, JWKSFile: j.JWKSFile,
		Claims:      auth.ClaimNames{Tenant: j.Claims.Tenant, Actor: j.Claims.Actor, Roles: j.Claims.Roles, Kind: j.Claims.Kind},
		DefaultKind: countersign.CredentialKind(j.DefaultKind)}
	if j.HS256SecretEnv != "" {
		if jc.HS256Secret, err = rt.cfg.HS256Secret(); err != nil {
			return nil, &exitErr{exitUsage, err.Error()}
		}
	}
	jwt, err := auth.NewJWT(jc)
	if err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	return auth.Chain(apiKeys, jwt), nil
}

func serveCmd() *cobra.Command {
	var f setupFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API and the workers (SQLite ./countersign.db on 127.0.0.1:8080 by default)",
		Long: `Run the HTTP API of docs/api.md, with workers, on the configured store.

Without --config it runs a self-contained demo: demo actions with a built-in
backend, and development API keys printed at start with curl commands that
work as printed. SIGTERM stops accepting requests, lets in-flight decisions
and executions finish (up to 30s), and stops.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), &f, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&f.config, "config", "", "configuration file (YAML); none: the demo")
	cmd.Flags().StringVar(&f.listen, "listen", "", "address to listen on (default 127.0.0.1:8080)")
	cmd.Flags().StringVar(&f.store, "store", "", "store: sqlite:<path> or postgres://… (default sqlite:countersign.db)")
	return cmd
}

// apiPaths are the paths the API serves besides /v1/.
var apiPaths = []string{"/healthz", "/readyz", "/metrics", "/openapi.json"}

// routes is the process's one mux: the API at /v1/ and at its operational
// endpoints, the approver's inbox at /. Each surface gets only its own
// paths, so neither passes requests on to the other.
func routes(api, inbox http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	for _, p := range apiPaths {
		mux.Handle(p, api)
	}
	mux.Handle("/", inbox)
	return mux
}

// mountChannels mounts the configured approver channels' routes; an
// unconfigured channel's route stays the API's 404 (Slack's) or the
// inbox's 404 (email's /d/ pages).
func (rt *runtime) mountChannels(mux *http.ServeMux) {
	if rt.slack != nil {
		rt.slack.Mount(mux)
	}
	if rt.email != nil {
		mux.Handle("/d/", rt.email.Handler())
	}
}

// app is the composed process: one engine and its store (in rt), the HTTP
// surfaces on one mux, and the background work.
type app struct {
	rt      *runtime
	api     *server.Server
	handler http.Handler
	worker  *countersign.Worker
	// gateway is the MCP gateway, mounted at mcp.path; nil when the
	// configuration names no MCP server.
	gateway *mcpgateway.Gateway
}

// compose builds the surfaces on rt's engine and mounts them on one mux.
func compose(rt *runtime, log *slog.Logger) (*app, error) {
	authn, err := rt.authenticator()
	if err != nil {
		return nil, err
	}
	api, err := server.New(server.Options{Engine: rt.engine, Auth: authn, CORSOrigins: rt.cfg.AllowedOrigins(),
		MetricsRole: rt.cfg.MetricsRole(), Logger: log, RequestLogLevel: rt.cfg.Log.RequestLevel(),
		Ready: ready(rt.store), Metrics: rt.metrics,
		MaxStreamsPerActor: rt.cfg.Events.MaxStreamsPerActor,
		Agents:             rt.agents, DefaultAgent: rt.defaultAgent})
	if err != nil {
		return nil, err
	}
	inbox, err := web.New(webOptions(rt, authn, api, log))
	if err != nil {
		return nil, err
	}
	// serve's worker also counts the proposals its /metrics reports.
	wo := rt.workerOptions()
	wo.OnProposalCounts, wo.ProposalCountsEvery = rt.counts.Set, rt.cfg.Metrics.ProposalCountsEvery
	w, err := rt.engine.NewWorker(wo)
	if err != nil {
		return nil, &exitErr{exitUsage, err.Error()}
	}
	gw, err := rt.gateway(authn, true)
	if err != nil {
		return nil, err
	}
	if gw == nil {
		mux := routes(api.Handler(), inbox.Handler())
		rt.mountChannels(mux)
		return &app{rt: rt, api: api, handler: rt.traced(mux), worker: w}, nil
	}
	mcpHandler, err := gw.Handler()
	if err != nil {
		return nil, err
	}
	mux := routes(readyWithUpstreams(api.Handler(), gw), inbox.Handler())
	rt.mountChannels(mux)
	mux.Handle(rt.cfg.MCP.Path, mcpHandler)
	return &app{rt: rt, api: api, handler: rt.traced(mux), worker: w, gateway: gw}, nil
}

// traced makes every request to h a server span when tracing is on,
// continuing the trace its traceparent header names: an agent's trace
// goes on through the call, its proposal and the execution.
func (rt *runtime) traced(h http.Handler) http.Handler {
	if rt.tracing == nil {
		return h
	}
	return otelhttp.NewHandler(h, "countersign", otelhttp.WithTracerProvider(rt.tracing),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		// One name a method: the paths hold ids, too many names for a
		// tracing backend; the path is the span's url.path attribute.
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "HTTP " + r.Method }))
}

// httpServer is the process's HTTP server on addr. Its shutdown closes the
// MCP gateway's sessions, whose streams would otherwise hold it open until
// its deadline.
func (a *app) httpServer(addr string) *http.Server {
	hs := a.api.HTTPServer(addr)
	hs.Handler = a.handler
	if a.gateway != nil {
		hs.RegisterOnShutdown(a.gateway.CloseSessions)
	}
	return hs
}

// run does the background work until ctx ends: the worker (executions and
// every periodic job: expiry, escalations, reminders, sessions, the sealer,
// notifications, and the proposal counts /metrics reports), agent runs and
// the MCP gateway's upstreams.
func (a *app) run(ctx context.Context, log *slog.Logger) {
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.worker.Run(ctx); err != nil {
			log.Error("worker stopped", "err", err)
		}
	})
	wg.Go(func() {
		if err := a.rt.agents.Work(ctx); err != nil {
			log.Error("agent runtime stopped", "err", err)
		}
	})
	if a.gateway != nil {
		wg.Go(func() { _ = a.gateway.Run(ctx) })
	}
	wg.Wait()
}

func serve(ctx context.Context, f *setupFlags, out io.Writer) error {
	f.role = "serve"
	rt, err := build(ctx, f, nil)
	if err != nil {
		return err
	}
	defer rt.close()
	log := rt.log
	a, err := compose(rt, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", rt.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", rt.cfg.Listen, err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "countersign listening on %s (store %s)\n", base, redact(rt.cfg.Store))
	fmt.Fprintf(out, "approver's inbox: %s/ (sign in with an API key)\n", base)
	if rt.demo {
		printDemo(out, base)
	}
	hs := a.httpServer(rt.cfg.Listen)

	// The background work runs until the server has drained, so that
	// executions the last requests approved still settle.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	worked := make(chan struct{})
	go func() {
		defer close(worked)
		a.run(workCtx, log)
	}()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
		log.Info("shutting down: no new requests; finishing in-flight work", "deadline", shutdownTimeout)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		serveErr = hs.Shutdown(sctx)
		cancel()
		<-served
	}
	stopWork()
	<-worked
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

func workerCmd() *cobra.Command {
	var f setupFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run workers (executions, agent runs and notifications) without the HTTP API (scale out on PostgreSQL)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.role = "worker"
			rt, err := build(cmd.Context(), &f, nil)
			if err != nil {
				return err
			}
			defer rt.close()
			w, err := rt.engine.NewWorker(rt.workerOptions())
			if err != nil {
				return &exitErr{exitUsage, err.Error()}
			}
			// The MCP gateway's upstreams, connected, register its tools as
			// actions: this worker executes their approved calls (MCP
			// tasks, independent rules) as serve's does. It serves no
			// client, so it needs no authenticator.
			gw, err := rt.gateway(nil, false)
			if err != nil {
				return err
			}
			var wg sync.WaitGroup
			stopGateway := func() {}
			if gw != nil {
				var gctx context.Context
				gctx, stopGateway = context.WithCancel(context.WithoutCancel(cmd.Context()))
				defer stopGateway()
				wg.Go(func() { _ = gw.Run(gctx) })
			}
			fmt.Fprintf(cmd.OutOrStdout(), "countersign worker running (store %s)\n", redact(rt.cfg.Store))
			// Executions, the periodic jobs (notifications among them) and
			// agent runs: a parked run whose proposal was decided, or whose
			// process died, resumes here too.
			wg.Go(func() {
				if err := rt.agents.Work(cmd.Context()); err != nil {
					rt.log.Error("agent runtime stopped", "err", err)
				}
			})
			err = w.Run(cmd.Context())
			// The worker's executions are done: the upstreams they used
			// may close.
			stopGateway()
			wg.Wait()
			return err
		},
	}
	cmd.Flags().StringVar(&f.config, "config", "", "configuration file (YAML); none: the demo actions")
	cmd.Flags().StringVar(&f.store, "store", "", "store: sqlite:<path> or postgres://…")
	return cmd
}

func migrateCmd() *cobra.Command {
	var storeURL string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations to the store",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := storeURL
			if spec == "" {
				spec = envOr("COUNTERSIGN_STORE", config.Default().Store)
			}
			st, err := openStore(cmd.Context(), spec, true, 0)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := ready(st)(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "store %s: schema is current\n", redact(spec))
			return nil
		},
	}
	cmd.Flags().StringVar(&storeURL, "store", "", "store: sqlite:<path> or postgres://… (env COUNTERSIGN_STORE)")
	return cmd
}

func configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with configuration files"}
	var noEnv bool
	validate := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a configuration file and the secrets it names; errors name the file, the line and the reason",
		Long: `Check a configuration file as serve reads it: every field, and the secrets
the environment variables it names hold (set, and not shared where they must
differ: each notification target's secret is its own). --no-env checks the
file alone, where its secrets are not at hand.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(args[0])
			if err == nil && !noEnv {
				err = dryRun(cmd.Context(), args[0])
			}
			if err != nil {
				if ee, ok := errors.AsType[*exitErr](err); ok {
					return ee
				}
				return &exitErr{exitUsage, err.Error()}
			}
			for _, w := range cfg.Warnings() {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid\n", args[0])
			return nil
		},
	}
	validate.Flags().BoolVar(&noEnv, "no-env", false, "check the file alone: read no environment variable it names")
	cmd.AddCommand(validate)
	return cmd
}

// dryRun builds what serve builds from the file before it binds its
// address: the secrets, the actions, the engine and its policy, the agents,
// the notification targets, the authenticator (a JWKS file is read), the
// API, the inbox, the worker and the MCP upstreams' settings, on an
// in-memory store. Every refusal of serve's start is an error here.
func dryRun(ctx context.Context, file string) error {
	rt, err := build(ctx, &setupFlags{config: file, dryRun: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer rt.store.Close()
	_, err = compose(rt, rt.log)
	return err
}

// splitSchema takes the "schema" query parameter (Countersign's, not
// libpq's) out of a PostgreSQL URL: postgres://host/db?schema=countersign.
func splitSchema(dsn string) (rest, schema string, err error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", fmt.Errorf("store %q: %w", dsn, err)
	}
	q := u.Query()
	schema = q.Get("schema")
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// redact hides a password in a store URL before it is printed.
func redact(store string) string {
	if u, err := url.Parse(store); err == nil && u.User != nil {
		return u.Redacted()
	}
	return store
}

// webOptions are the inbox's options from the configuration.
func webOptions(rt *runtime, authn auth.Authenticator, api *server.Server, log *slog.Logger) web.Options {
	return web.Options{Engine: rt.engine, Auth: authn, API: api, Logger: log,
		SecureCookies: web.SecureCookies(rt.cfg.Web.SecureCookies), TrustedProxies: rt.cfg.TrustedProxies()}
}
