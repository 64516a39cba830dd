// Command bench runs Countersign's benchmark suite on the machine it runs on
// and writes the report: docs/benchmarks.md (the part between the bench
// markers) and docs/benchmarks.json.
//
//	go run ./bench                       # everything, on SQLite and PostgreSQL
//	go run ./bench -scenarios B1,B2 -stores sqlite -n 5000
//	go run ./bench -quick                # small sizes, a smoke run
//
// The scenarios (issue 6) are:
//
//	limit  the single-row durable commit rate of the same SQLite and PostgreSQL
//	B1     drain: N approved no-op proposals executed by 1 and 4 worker processes
//	B2     latency: approve → Execute-start with an idle worker, p50/p95/p99
//	B3     full lifecycle: agents calling and approvers approving over HTTP,
//	       a worker executing; actions per second end to end and latencies,
//	       at each load of -b3-loads (and at -agents, the main load)
//	B4     listing: a page of 1000 from a thread and from the inbox at 10k,
//	       100k and 1M stored proposals
//	B5     waiting: 10,000 concurrent wait-mode calls in one process
//	B6     deciding: the decide endpoint over loopback HTTP
//	B7     conversations: a turn decided by text over HTTP, and parked runs
//	B8     connections: 10,000 wait-mode long-polls and 1,000 event streams
//	       on one server process, the bench's own process their client
//	B9     many approvers: 64 approvers deciding 100,000 pending proposals
//	       over HTTP while 4 workers execute them; each executed once
//	audit  B3 and B6 with and without the audit chain's sealer, side by
//	       side in alternating rounds: medians and their ratio
//	river  the peer: River burning down N no-op jobs and its insert → work
//	       latency, with its defaults and tuned, run from its own module in
//	       bench/river (go run there), so this module never depends on River
//
// On PostgreSQL, B1, B3 and B6 also count round trips to the server (a pgx
// tracer on the store's pool: each query, each statement prepared, each
// batch as one), attributed by context to the HTTP route (call, decision)
// or to the worker's step (claims, settlements, renewals). Every
// PostgreSQL store has a pool of -pg-max-conns connections, by default a
// server's (pgstore.DefaultMaxConns).
//
// PostgreSQL runs in fresh schemas of the server named by
// COUNTERSIGN_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test),
// dropped at the end; SQLite in temporary files, removed at the end.
// Progress bars go to standard error.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	rtrace "runtime/trace"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/countersign/countersign/store/pgstore"

	"go.opentelemetry.io/otel/trace"
)

// config is the run's flags.
type config struct {
	N         int      // B1: proposals per drain; river: jobs per burn-down
	Samples   int      // B2: approvals timed
	Stores    []string // "sqlite", "postgres"
	Scenarios []string // empty: all
	Quick     bool
	// limit: how long each commit-rate measurement runs
	LimitWindow time.Duration
	// Settle is the pause before each scenario on each store.
	Settle time.Duration
	// B3: Agents is the main load, whose figures keep the keys without a
	// load (b3.<store>.actions); B3Loads are the other loads B3 also runs
	// at, each keyed b3.<store>.agents<N>.…
	Actions int
	Agents  int
	B3Loads []int
	// B4
	Sizes []int
	// B5
	Waiters int
	// B6
	Decisions int
	Clients   int
	// B9
	ManyProposals int
	ManyApprovers int
	// PGMaxConns is the pool size of every PostgreSQL store the bench
	// opens, its worker processes' included.
	PGMaxConns int
	// WorkerProfiles, when set, is the folder where each worker process of
	// B1 writes a CPU profile of its drain (from the go-ahead to its exit).
	WorkerProfiles string
	// IdleProfiles, when set, is the folder where B8's server process
	// writes a CPU profile of its idle window (everything open, nothing
	// happening), b8-<store>-idle.prof.
	IdleProfiles string
	// audit: rounds of B3 and B6, each with and without the sealer
	AuditRounds int
	// tracing: rounds of B3 and B6, each with and without tracing
	TracingRounds int
	// TracingParts is what the tracing scenario traces (tracingParts):
	// everything, as serve does, or one part, to tell the parts' costs
	// apart.
	TracingParts string
	// TracingMeasures are the runs it compares: B3, B6 or both.
	TracingMeasures []string
	// TracingProfiles, when set, is the folder for a CPU profile of each
	// run of the tracing scenario.
	TracingProfiles string
	// river
	RiverSamples int
	RiverDir     string
}

// env is what a scenario runs with.
type env struct {
	ctx    context.Context
	cfg    config
	target target
	self   string // this executable, for worker processes
	// limit is the store's single-row commit rate (commits/s), if measured.
	limit float64
	// sealer says whether the audit chain's sealer runs beside B3 and B6;
	// the audit scenario runs them both ways.
	sealer sealerMode
	// seals, when set, times every seal of the runs' stores (audit).
	seals *sealClock
	// tracer, when set, traces B3's and B6's engine, and httpTracer their
	// HTTP server, as serve does with tracing on (the tracing scenario).
	tracer, httpTracer trace.TracerProvider
}

// sealerMode is whether a scenario runs the audit sealer.
type sealerMode int

const (
	// sealerDefault: as each scenario describes (B3's worker seals, as a
	// served worker does; B6 runs no worker).
	sealerDefault sealerMode = iota
	sealerOn
	sealerOff
)

// scenario is one entry of the suite. run measures one store; a scenario
// with perStore false runs once (then env.target is the zero value).
type scenario struct {
	ID       string // "B1", or "limit", "river"
	Title    string
	Method   string // how it is measured, for the report
	order    int
	perStore bool
	run      func(*env) ([]Figure, error)
}

var scenarios []scenario

// register adds a scenario to the suite; each scenario's file registers
// itself.
func register(s scenario) { scenarios = append(scenarios, s) }

// registry is the suite in order.
func registry() []scenario {
	out := slices.Clone(scenarios)
	slices.SortStableFunc(out, func(a, b scenario) int { return cmp.Compare(a.order, b.order) })
	return out
}

func main() { os.Exit(realMain()) }

// realMain runs the command and returns its exit code, after its deferred
// work (the CPU profile) is done.
func realMain() int {
	var (
		cfg     config
		stores  string
		scens   string
		sizes   string
		loads   string
		out     string
		jsonOut string
		cpuProf string
		memProf string
		trcFile string
	)
	flag.IntVar(&cfg.N, "n", 10000, "B1 and river: approved proposals (jobs) to drain per run")
	flag.IntVar(&cfg.Samples, "samples", 2000, "B2: approvals timed")
	flag.DurationVar(&cfg.Settle, "settle", 2*time.Second, "pause before each scenario on each store, after a GC")
	flag.DurationVar(&cfg.LimitWindow, "limit-window", 3*time.Second, "limit: how long each commit-rate measurement runs")
	flag.IntVar(&cfg.Actions, "actions", 5000, "B3: actions per run")
	flag.IntVar(&cfg.Agents, "agents", 32, "B3: concurrent agents (and as many approvers) of the main load, whose figures the goals judge")
	flag.StringVar(&loads, "b3-loads", "4,32,64", "B3: the loads (agents, and as many approvers) it runs at, one fresh store each; -agents runs as well if it is not among them")
	flag.StringVar(&sizes, "sizes", "10000,100000,1000000", "B4: stored proposals")
	flag.IntVar(&cfg.Waiters, "waiters", 10000, "B5: concurrent wait-mode calls")
	flag.IntVar(&cfg.Decisions, "decisions", 20000, "B6: decisions per run")
	flag.IntVar(&cfg.Clients, "clients", 32, "B6: concurrent HTTP clients")
	flag.IntVar(&cfg.ManyProposals, "b9-proposals", 100000, "B9: pending proposals decided")
	flag.IntVar(&cfg.ManyApprovers, "b9-approvers", 64, "B9: concurrent HTTP approvers")
	flag.IntVar(&cfg.PGMaxConns, "pg-max-conns", pgstore.DefaultMaxConns, "PostgreSQL: the pool size of every store the bench opens (default: a server's, pgstore.DefaultMaxConns)")
	flag.IntVar(&cfg.AuditRounds, "audit-rounds", 3, "audit: rounds of B3 and B6 with and without the sealer")
	flag.StringVar(&cfg.TracingProfiles, "tracing-profiles", "", "tracing: write a CPU profile of each run, traced and not, into this folder")
	flag.StringVar(&cfg.TracingParts, "tracing-parts", tracingAll, "tracing: what is traced: all (as serve traces), engine (its spans only, HTTP untraced), http (otelhttp's server spans only), unexported (all, but the batches go to an exporter that drops them)")
	flag.Func("tracing-measures", "tracing: the runs compared, comma-separated: B3, B6 (default both)", func(s string) error {
		cfg.TracingMeasures = strings.Split(s, ",")
		return nil
	})
	flag.IntVar(&cfg.TracingRounds, "tracing-rounds", 3, "tracing: rounds of B3 and B6 with and without tracing (100 % sampled, OTLP/HTTP to a local sink)")
	flag.IntVar(&cfg.RiverSamples, "river-samples", 200, "river: sequential jobs timed for latency")
	flag.StringVar(&cfg.RiverDir, "river-dir", "bench/river", "river: the peer's module directory")
	flag.StringVar(&stores, "stores", "sqlite,postgres", "stores to measure")
	flag.StringVar(&scens, "scenarios", "", "scenarios to run, comma-separated (limit,B1,…,B9,audit,tracing,river); empty: all")
	flag.BoolVar(&cfg.Quick, "quick", false, "small sizes for a smoke run (the report says so)")
	flag.StringVar(&out, "out", "docs/benchmarks.md", "Markdown report: its generated part is replaced (empty: stdout only)")
	flag.StringVar(&jsonOut, "json", "docs/benchmarks.json", "JSON report (empty: none)")
	flag.StringVar(&cfg.IdleProfiles, "b8-idle-cpuprofiles", "", "B8: the folder where the server process writes a CPU profile of the idle window (everything open, nothing happening), b8-<store>-idle.prof")
	flag.StringVar(&cfg.WorkerProfiles, "worker-cpuprofiles", "", "B1: the folder where each worker process writes a CPU profile of its drain, worker-<store>-<processes>p-<n>.prof")
	flag.StringVar(&cpuProf, "cpuprofile", "", "write a CPU profile of the whole run (this process; not worker processes, not the peer) to this file")
	flag.StringVar(&trcFile, "exectrace", "", "write an execution trace of the whole run (this process; runtime/trace, read with go tool trace) to this file")
	flag.StringVar(&memProf, "memprofile", "", "write a heap profile (allocations of the whole run, this process) to this file when the run ends")
	flag.Parse()
	if spec := os.Getenv(workerEnv); spec != "" {
		return workerMain(spec)
	}
	if spec := os.Getenv(connServerEnv); spec != "" {
		return connServerMain(spec)
	}
	if cfg.PGMaxConns <= 0 {
		fmt.Fprintf(os.Stderr, "bench: -pg-max-conns: %d is not a positive number\n", cfg.PGMaxConns)
		return 2
	}
	cfg.Stores = splitList(stores)
	cfg.Scenarios = splitList(scens)
	for _, s := range splitList(sizes) {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -sizes: %q is not a positive number\n", s)
			return 2
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if cfg.Agents <= 0 {
		fmt.Fprintf(os.Stderr, "bench: -agents: %d is not a positive number\n", cfg.Agents)
		return 2
	}
	b3Loads, err := parseLoads(loads)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: -b3-loads:", err)
		return 2
	}
	cfg.B3Loads = b3Loads
	if cfg.Quick {
		cfg.N, cfg.Samples, cfg.Actions, cfg.Waiters, cfg.Decisions, cfg.RiverSamples, cfg.ManyProposals = 2000, 200, 1000, 1000, 2000, 50, 5000
		cfg.Sizes = []int{1000, 10000}
		cfg.LimitWindow = time.Second
	}
	if cpuProf != "" {
		f, err := os.Create(cpuProf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	if trcFile != "" {
		f, err := os.Create(trcFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		if err := rtrace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer func() { rtrace.Stop(); _ = f.Close() }()
	}
	if memProf != "" {
		defer func() {
			f, err := os.Create(memProf)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: memprofile:", err)
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	md := r.markdown()
	if out != "" {
		if err := writeMarkdown(out, r); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", out)
	}
	if jsonOut != "" {
		if err := writeJSON(jsonOut, r); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "wrote %s\n", jsonOut)
	}
	fmt.Print(md)
	if len(r.Problems) > 0 {
		return 1
	}
	return 0
}

// quiet lets the machine settle before a measurement: the previous one's
// garbage collected and returned, and the databases' background work after
// it (checkpoints, autovacuum of dropped data) given a moment.
func quiet(cfg config) {
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(cfg.Settle)
}

// parseLoads reads a comma-separated list of positive whole numbers.
func parseLoads(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive whole number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// run measures every selected scenario. A scenario that fails is recorded
// as a problem and the run goes on, so that one broken figure does not cost
// the others.
func run(ctx context.Context, cfg config) (*Report, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cfg.PGMaxConns = cmp.Or(cfg.PGMaxConns, pgstore.DefaultMaxConns)
	all := targets(cfg)
	var ts []target
	for _, name := range cfg.Stores {
		t, ok := all[name]
		if !ok {
			return nil, fmt.Errorf("unknown store %q: want sqlite or postgres", name)
		}
		ts = append(ts, t)
	}
	known := map[string]bool{}
	for _, sc := range registry() {
		known[strings.ToLower(sc.ID)] = true
	}
	for _, s := range cfg.Scenarios {
		if !known[strings.ToLower(s)] {
			return nil, fmt.Errorf("unknown scenario %q", s)
		}
	}
	selected := func(id string) bool {
		return len(cfg.Scenarios) == 0 || slices.ContainsFunc(cfg.Scenarios, func(s string) bool { return strings.EqualFold(s, id) })
	}
	r := &Report{Started: time.Now(), Command: "go run ./bench " + strings.Join(os.Args[1:], " "), Machine: machine(), Stores: map[string]string{}}
	if selected("B3") {
		r.B3Agents = cfg.Agents
	}
	r.Command = strings.TrimSpace(r.Command)
	if cfg.Quick {
		r.Quick = true
	}
	for _, t := range ts {
		r.Stores[t.name] = t.details
	}
	limits := map[string]float64{}
	for _, sc := range registry() {
		if !selected(sc.ID) && !(sc.ID == "limit" && (selected("B1") || selected("B3"))) {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !sc.perStore {
			quiet(cfg)
			e := &env{ctx: ctx, cfg: cfg, self: self}
			figs, err := sc.run(e)
			r.add(figs...)
			if err != nil {
				r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", sc.ID, err))
				fmt.Fprintf(os.Stderr, "%s: %v\n", sc.ID, err)
			}
			continue
		}
		for _, t := range ts {
			quiet(cfg)
			e := &env{ctx: ctx, cfg: cfg, target: t, self: self, limit: limits[t.name]}
			figs, err := sc.run(e)
			for i := range figs {
				figs[i].Scenario, figs[i].Store = sc.ID, t.name
			}
			r.add(figs...)
			if sc.ID == "limit" {
				limits[t.name] = commitLimit(figs)
			}
			if err != nil {
				r.Problems = append(r.Problems, fmt.Sprintf("%s on %s: %v", sc.ID, t.title, err))
				fmt.Fprintf(os.Stderr, "%s on %s: %v\n", sc.ID, t.title, err)
			}
		}
	}
	annotate(r, limits)
	r.Goals = goals(r, cfg)
	r.Seconds = time.Since(r.Started).Round(time.Second).Seconds()
	return r, nil
}
