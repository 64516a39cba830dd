package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// drainSlots is each worker process's MaxConcurrency in B1: what River's
// tuned configuration runs (MaxWorkers 1000), so that the two drain with
// the same concurrency.
const drainSlots = 1000

// slots is the worker's MaxConcurrency in the other scenarios (the
// default of a worker that serves an application).
const slots = 64

func init() {
	register(scenario{ID: "B1", order: 10, perStore: true,
		Title: "Drain",
		Method: fmt.Sprintf("N approved no-op proposals (independent mode) are seeded, then 1 or 4 worker processes (this binary, %d execution slots each, as River tuned has 1000 workers) "+
			"are started, released together, and timed until no proposal is approved or executing; every one must have succeeded. "+
			"Commits needed per action: 2 (claim, settle) — what one-at-a-time execution costs; batching lets the worker pay less. The seeding process watches for the end every 5 ms. On PostgreSQL a pgx tracer counts round trips to the server (each query, prepare and batch) by the context they serve: each worker process counts its claim batches, settlements and renewals and reports them on exit; their sum ÷ N.", drainSlots),
		run: func(e *env) ([]Figure, error) {
			var figs []Figure
			for _, procs := range []int{1, 4} {
				rate, trips, err := drain(e, procs)
				if err != nil {
					return figs, fmt.Errorf("%d processes: %w", procs, err)
				}
				k := fmt.Sprintf("b1.%s.procs%d", e.target.name, procs)
				figs = append(figs, Figure{Key: k,
					Label: fmt.Sprintf("drain %s no-op proposals, %d worker process(es)", thousands(fmt.Sprint(e.cfg.N)), procs),
					Value: rate, Unit: "proposals/s"})
				if trips != nil {
					figs = append(figs, drainTrips(k, procs, trips.counts, e.cfg.N, trips.conns, e.cfg.PGMaxConns)...)
					figs = append(figs, walFigures(k, trips.walBefore, trips.walAfter, e.cfg.N)...)
				}
			}
			return figs, nil
		}})
}

// newEngine is the engine every scenario measures: one no-op action, asked
// of role:finance.
func newEngine(st store.Store, mode countersign.Mode, onExecute func()) (*countersign.Engine, error) {
	noop, err := countersign.NewRawAction(countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			onExecute()
			return &countersign.Receipt{ID: "ok"}, nil
		},
	}})
	if err != nil {
		return nil, err
	}
	return countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: mode}}}})
}

// workerEnv names the store a worker process of a drain run works on: the
// bench binary (or its test binary) started with it set is a worker.
const workerEnv = "COUNTERSIGN_BENCH_WORKER"

// workerPoolEnv gives a worker process its PostgreSQL pool size
// (-pg-max-conns).
const workerPoolEnv = "COUNTERSIGN_BENCH_PG_MAX_CONNS"

// workerProfileEnv, when set, is the file a worker process writes a CPU
// profile of its drain to, less its ".prof" (-worker-cpuprofiles).
const workerProfileEnv = "COUNTERSIGN_BENCH_WORKER_CPUPROFILE"

// drainTrips are a drain's round trips per proposal, its worker processes'
// summed, step by step.
func drainTrips(k string, procs int, c rtCounts, n, conns, maxConns int) []Figure {
	const unit = "round trips"
	return []Figure{
		{Key: k + ".rt_claim", Label: "round trips per proposal: claim batches", Value: perOp(c[rtClaim], n), Unit: unit},
		{Key: k + ".rt_settle", Label: "round trips per proposal: settlements", Value: perOp(c[rtSettle], n), Unit: unit},
		{Key: k + ".rt_renew", Label: "round trips per proposal: lease renewals", Value: perOp(c[rtRenew], n), Unit: unit},
		{Key: k + ".rt_worker", Label: "round trips per proposal: the worker's, every step", Value: perOp(c.worker(), n), Unit: unit},
		{Key: k + ".rt_other", Label: "other round trips per proposal (notifications sent after commit)", Value: perOp(c[rtOther], n), Unit: unit},
		{Key: k + ".conns", Label: fmt.Sprintf("connections the %d pool(s) opened (of %d each)", procs, maxConns), Value: float64(conns), Unit: "connections"},
	}
}

// drainCounts is what a drain's worker processes counted.
type drainCounts struct {
	counts rtCounts
	conns  int // connections their pools opened, summed
	// walBefore and walAfter are pg_stat_wal as the drain started and
	// once it was done.
	walBefore, walAfter walStats
}

// workerMain is one worker process of a drain run.
func workerMain(spec string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	maxConns, err := strconv.Atoi(os.Getenv(workerPoolEnv))
	if err != nil || maxConns <= 0 {
		maxConns = pgstore.DefaultMaxConns
	}
	var rt *roundTrips
	if strings.HasPrefix(spec, "postgres:") {
		rt = newRoundTrips()
	}
	st, err := openSpec(ctx, spec, maxConns, rt)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	e, err := newEngine(tagSteps(st), countersign.ModeIndependent, func() {})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 50 * time.Millisecond, LeaseDuration: time.Minute, MaxConcurrency: drainSlots})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Opening the store (migrating) is not the drain's.
	base := rt.counts()
	fmt.Println("READY")
	// Wait for the go-ahead, so that every process starts draining at once.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "no go-ahead:", err)
		return 2
	}
	if path := os.Getenv(workerProfileEnv); path != "" {
		stopProfile, err := startRunProfile(filepath.Dir(path), filepath.Base(path))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer stopProfile()
	}
	if err := w.Run(withClass(ctx, rtWorker)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if rt != nil {
		// Run returned: every settlement is written. The parent reads this.
		fmt.Println(rt.counts().sub(base).line(poolConns(st)))
	}
	return 0
}

// drain seeds N approved proposals and times procs worker processes
// draining them. On PostgreSQL it also returns what the processes counted
// of their round trips.
func drain(e *env, procs int) (float64, *drainCounts, error) {
	st, spec, closeStore, err := e.open()
	if err != nil {
		return 0, nil, err
	}
	defer closeStore()
	ctx := e.ctx
	n := e.cfg.N
	seed := newBar(n, "B1 %s: seed", e.target.title)
	if err := seedApproved(ctx, st, n, seed); err != nil {
		return 0, nil, err
	}
	type proc struct {
		cmd  *exec.Cmd
		line chan string // its round-trip line, or "" when its output ends without one
	}
	var ps []proc
	// stop ends every process and returns the lines they printed on their
	// way out. It reads each one's output to the end before waiting for it.
	stop := func() []string {
		for _, p := range ps {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		var lines []string
		for _, p := range ps {
			lines = append(lines, <-p.line)
			_ = p.cmd.Wait()
		}
		ps = nil
		return lines
	}
	defer stop()
	// Start every process, then release them together.
	var gos []io.WriteCloser
	for i := range procs {
		c := exec.Command(e.self)
		c.Env = append(os.Environ(), workerEnv+"="+spec, fmt.Sprintf("%s=%d", workerPoolEnv, e.cfg.PGMaxConns))
		if dir := e.cfg.WorkerProfiles; dir != "" {
			c.Env = append(c.Env, workerProfileEnv+"="+filepath.Join(dir, fmt.Sprintf("worker-%s-%dp-%d", e.target.name, procs, i+1)))
		}
		c.Stderr = os.Stderr
		out, err := c.StdoutPipe()
		if err != nil {
			return 0, nil, err
		}
		in, err := c.StdinPipe()
		if err != nil {
			return 0, nil, err
		}
		gos = append(gos, in)
		if err := c.Start(); err != nil {
			return 0, nil, err
		}
		p := proc{cmd: c, line: make(chan string, 1)}
		ps = append(ps, p)
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "READY" {
			p.line <- ""
			return 0, nil, fmt.Errorf("worker process did not start")
		}
		go func() {
			last := ""
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), rtLinePrefix) {
					last = sc.Text()
				}
			}
			p.line <- last
		}()
	}
	var walBefore walStats
	if e.target.name == "postgres" {
		if walBefore, err = readWAL(ctx); err != nil {
			return 0, nil, err
		}
	}
	b := newBar(n, "B1 %s: drain, %d process(es)", e.target.title, procs)
	start := time.Now()
	for _, in := range gos {
		if _, err := io.WriteString(in, "go\n"); err != nil {
			return 0, nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	last := time.Now()
	err = workload.WaitDrained(wctx, st, 5*time.Millisecond, func() {
		if time.Since(last) > 500*time.Millisecond {
			last = time.Now()
			if c, err := st.CountByStatus(ctx); err == nil {
				b.set(c[store.StatusSucceeded])
			}
		}
	})
	elapsed := time.Since(start)
	if err != nil {
		return 0, nil, err
	}
	b.set(n)
	b.done()
	counts, err := workload.Tally(ctx, st)
	if err != nil {
		return 0, nil, err
	}
	if counts[store.StatusSucceeded] != n {
		return 0, nil, fmt.Errorf("statuses %v, want %d succeeded", counts, n)
	}
	rate := float64(n) / elapsed.Seconds()
	if e.target.name != "postgres" {
		return rate, nil, nil
	}
	sum := drainCounts{walBefore: walBefore}
	if sum.walAfter, err = readWAL(ctx); err != nil {
		return rate, nil, err
	}
	for _, l := range stop() {
		c, conns, err := parseRTLine(l)
		if err != nil {
			return rate, nil, fmt.Errorf("a worker process: %w", err)
		}
		sum.counts, sum.conns = sum.counts.add(c), sum.conns+conns
	}
	return rate, &sum, nil
}

// seedApproved seeds n approved proposals in chunks, moving the bar.
func seedApproved(ctx context.Context, st store.Store, n int, b *bar) error {
	defer b.done()
	const chunk = 500
	for i := 0; i < n; i += chunk {
		m := min(chunk, n-i)
		if _, err := workload.SeedApproved(ctx, st, "noop", fmt.Sprintf("b%07d", i), m); err != nil {
			return err
		}
		b.add(m)
	}
	return nil
}
