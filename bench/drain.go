package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
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
			"Commits needed per action: 2 (claim, settle) — what one-at-a-time execution costs; batching lets the worker pay less. The seeding process watches for the end every 5 ms.", drainSlots),
		run: func(e *env) ([]Figure, error) {
			var figs []Figure
			for _, procs := range []int{1, 4} {
				rate, err := drain(e, procs)
				if err != nil {
					return figs, fmt.Errorf("%d processes: %w", procs, err)
				}
				figs = append(figs, Figure{Key: fmt.Sprintf("b1.%s.procs%d", e.target.name, procs),
					Label: fmt.Sprintf("drain %s no-op proposals, %d worker process(es)", thousands(fmt.Sprint(e.cfg.N)), procs),
					Value: rate, Unit: "proposals/s"})
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

// workerMain is one worker process of a drain run.
func workerMain(spec string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	st, err := workload.OpenStore(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer st.Close()
	e, err := newEngine(st, countersign.ModeIndependent, func() {})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 50 * time.Millisecond, LeaseDuration: time.Minute, MaxConcurrency: drainSlots})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("READY")
	// Wait for the go-ahead, so that every process starts draining at once.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "no go-ahead:", err)
		return 2
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// drain seeds N approved proposals and times procs worker processes
// draining them.
func drain(e *env, procs int) (float64, error) {
	st, spec, closeStore, err := e.open()
	if err != nil {
		return 0, err
	}
	defer closeStore()
	ctx := e.ctx
	n := e.cfg.N
	seed := newBar(n, "B1 %s: seed", e.target.title)
	if err := seedApproved(ctx, st, n, seed); err != nil {
		return 0, err
	}
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}()
	// Start every process, then release them together.
	var gos []io.WriteCloser
	for range procs {
		c := exec.Command(e.self)
		c.Env = append(os.Environ(), workerEnv+"="+spec)
		c.Stderr = os.Stderr
		out, err := c.StdoutPipe()
		if err != nil {
			return 0, err
		}
		in, err := c.StdinPipe()
		if err != nil {
			return 0, err
		}
		gos = append(gos, in)
		if err := c.Start(); err != nil {
			return 0, err
		}
		cmds = append(cmds, c)
		sc := bufio.NewScanner(out)
		if !sc.Scan() || sc.Text() != "READY" {
			return 0, fmt.Errorf("worker process did not start")
		}
		go func() {
			for sc.Scan() {
			}
		}()
	}
	b := newBar(n, "B1 %s: drain, %d process(es)", e.target.title, procs)
	start := time.Now()
	for _, in := range gos {
		if _, err := io.WriteString(in, "go\n"); err != nil {
			return 0, err
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
		return 0, err
	}
	b.set(n)
	b.done()
	counts, err := workload.Tally(ctx, st)
	if err != nil {
		return 0, err
	}
	if counts[store.StatusSucceeded] != n {
		return 0, fmt.Errorf("statuses %v, want %d succeeded", counts, n)
	}
	return float64(n) / elapsed.Seconds(), nil
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
