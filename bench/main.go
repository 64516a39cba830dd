// Command bench measures Countersign's worker on the machine it runs on: how
// fast 1 and 4 worker processes drain approved no-op proposals, and the
// latency from an approval to the start of its execution, on SQLite and
// PostgreSQL. It prints a Markdown report.
//
//	go run ./bench [-n 10000] [-samples 2000] [-stores sqlite,postgres]
//
// PostgreSQL runs in a fresh schema of the server named by
// COUNTERSIGN_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test),
// dropped at the end.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
	"github.com/jackc/pgx/v5"
)

func main() {
	n := flag.Int("n", 10000, "approved proposals to drain per run")
	samples := flag.Int("samples", 2000, "approvals timed for the latency figures")
	stores := flag.String("stores", "sqlite,postgres", "stores to measure")
	workerStore := flag.String("worker", "", "internal: run as a worker process on this store spec")
	flag.Parse()
	if *workerStore != "" {
		os.Exit(workerMain(*workerStore))
	}
	if err := run(*n, *samples, strings.Split(*stores, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

const concurrency = 64

func newEngine(st store.Store, onExecute func()) (*countersign.Engine, error) {
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
			Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent}}}})
}

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
	e, err := newEngine(st, func() {})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 50 * time.Millisecond, LeaseDuration: time.Minute, MaxConcurrency: concurrency})
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

type target struct {
	name string
	// spec opens a fresh, empty store; cleanup removes it.
	spec    func() (spec string, cleanup func(), err error)
	details string
}

func targets() map[string]target {
	return map[string]target{
		"sqlite": {name: "SQLite", details: "modernc.org/sqlite, WAL, synchronous=FULL, one writer connection per process",
			spec: func() (string, func(), error) {
				dir, err := os.MkdirTemp("", "countersign-bench-")
				if err != nil {
					return "", nil, err
				}
				return "sqlite:" + filepath.Join(dir, "bench.db"), func() { os.RemoveAll(dir) }, nil
			}},
		"postgres": {name: "PostgreSQL", details: "pgx v5 pool, local server, fsync and synchronous_commit on",
			spec: func() (string, func(), error) {
				var b [6]byte
				_, _ = rand.Read(b[:])
				schema := "cs_bench_" + hex.EncodeToString(b[:])
				drop := func() {
					conn, err := pgx.Connect(context.Background(), pgtest.DSN())
					if err == nil {
						_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
						_ = conn.Close(context.Background())
					}
				}
				return "postgres:" + schema, drop, nil
			}},
	}
}

func run(n, samples int, stores []string) error {
	fmt.Printf("# Worker benchmarks\n\n%s\n\n", machine())
	fmt.Printf("| store | scenario | result |\n| --- | --- | --- |\n")
	all := targets()
	for _, name := range stores {
		t, ok := all[strings.TrimSpace(name)]
		if !ok {
			return fmt.Errorf("unknown store %q", name)
		}
		for _, procs := range []int{1, 4} {
			rate, err := drain(t, n, procs)
			if err != nil {
				return fmt.Errorf("%s drain with %d processes: %w", t.name, procs, err)
			}
			fmt.Printf("| %s | drain %d no-op proposals, %d worker process(es) × %d slots | %.0f proposals/s |\n", t.name, n, procs, concurrency, rate)
		}
		p50, p99, err := latency(t, samples)
		if err != nil {
			return fmt.Errorf("%s latency: %w", t.name, err)
		}
		fmt.Printf("| %s | approve → Execute-start, idle worker, %d samples | p50 %.3f ms, p99 %.3f ms |\n", t.name, samples, ms(p50), ms(p99))
	}
	fmt.Println()
	for _, name := range stores {
		t := all[strings.TrimSpace(name)]
		fmt.Printf("- %s: %s\n", t.name, t.details)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// drain seeds n approved proposals and times procs worker processes
// draining them.
func drain(t target, n, procs int) (float64, error) {
	spec, cleanup, err := t.spec()
	if err != nil {
		return 0, err
	}
	defer cleanup()
	ctx := context.Background()
	st, err := workload.OpenStore(ctx, spec)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	if _, err := workload.SeedApproved(ctx, st, "noop", "bench", n); err != nil {
		return 0, err
	}
	self, err := os.Executable()
	if err != nil {
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
		c := exec.Command(self, "-worker", spec)
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
	start := time.Now()
	for _, in := range gos {
		if _, err := io.WriteString(in, "go\n"); err != nil {
			return 0, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := workload.WaitDrained(wctx, st, time.Millisecond, nil); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	counts, err := workload.Tally(ctx, st)
	if err != nil {
		return 0, err
	}
	if counts[store.StatusSucceeded] != n {
		return 0, fmt.Errorf("statuses %v, want %d succeeded", counts, n)
	}
	return float64(n) / elapsed.Seconds(), nil
}

// timedStore records when the last decision committed: the moment the
// approval exists.
type timedStore struct {
	store.Store
	committed atomic.Int64
}

func (s *timedStore) Decide(ctx context.Context, p *store.DecideParams) (*store.DecideResult, error) {
	res, err := s.Store.Decide(ctx, p)
	s.committed.Store(time.Now().UnixNano())
	return res, err
}

// latency approves proposals one at a time and measures how long after the
// approval committed the worker started Execute. The approver and the worker
// are separate engines on separate connections, as separate processes would
// be: on PostgreSQL only LISTEN/NOTIFY wakes the worker; on SQLite, which has
// no cross-process signal, they share one engine (one process).
func latency(t target, samples int) (p50, p99 time.Duration, err error) {
	spec, cleanup, err := t.spec()
	if err != nil {
		return 0, 0, err
	}
	defer cleanup()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	raw, err := workload.OpenStore(ctx, spec)
	if err != nil {
		return 0, 0, err
	}
	defer raw.Close()
	approverStore := &timedStore{Store: raw}
	started := make(chan int64, 1)
	approver, err := newEngine(approverStore, func() { started <- time.Now().UnixNano() })
	if err != nil {
		return 0, 0, err
	}
	workerEngine := approver
	if strings.HasPrefix(spec, "postgres:") {
		ws, err := workload.OpenStore(ctx, spec)
		if err != nil {
			return 0, 0, err
		}
		defer ws.Close()
		if workerEngine, err = newEngine(ws, func() { started <- time.Now().UnixNano() }); err != nil {
			return 0, 0, err
		}
	}
	w, err := workerEngine.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Second, LeaseDuration: time.Minute})
	if err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { stop(); <-done }()
	time.Sleep(300 * time.Millisecond) // the listener connects
	alice := countersign.Identity{Tenant: workload.Tenant, Actor: "alice"}
	bob := countersign.Identity{Tenant: workload.Tenant, Actor: "bob", Roles: []string{"finance"}}
	lat := make([]time.Duration, 0, samples)
	for i := range samples {
		res, err := approver.Call(ctx, &countersign.Call{Identity: alice, ThreadID: "t", ToolCallID: fmt.Sprint("c", i), Action: "noop", Input: json.RawMessage(`{}`)})
		if err != nil {
			return 0, 0, err
		}
		if _, err := approver.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
			return 0, 0, err
		}
		select {
		case at := <-started:
			lat = append(lat, time.Duration(at-approverStore.committed.Load()))
		case <-time.After(30 * time.Second):
			return 0, 0, fmt.Errorf("approval %d never executed", i)
		}
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100], nil
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1] + " kB memory"
	}
	return fmt.Sprintf("Machine: %s, %d cores, %s, %s %s/%s.", cpu, runtime.NumCPU(), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
