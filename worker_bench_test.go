package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/sqlitestore"
)

// benchStores opens each driver the worker benchmarks run on.
var benchStores = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"memory", func(b *testing.B) store.Store { return memstore.New(nil) }},
	{"sqlite", func(b *testing.B) store.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"postgres", func(b *testing.B) store.Store {
		_, schema := pgtest.NewSchema(b)
		s, err := pgstore.Open(context.Background(), pgtest.DSN(), &pgstore.Options{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// seedApproved stores n approved independent proposals of action.
func seedApproved(b testing.TB, st store.Store, action string, n int) {
	b.Helper()
	if _, err := workload.SeedApproved(context.Background(), st, action, "bench", n); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDrain measures how fast one worker process drains approved no-op
// proposals: b.N of them, reported as proposals/s.
func BenchmarkDrain(b *testing.B) { benchDrain(b, 64) }

// BenchmarkDrainWide is BenchmarkDrain with 1,000 slots, the MaxWorkers of
// River's "tuned" configuration in docs/benchmarks.md: with 64, a worker
// holds at most 64 claims, and each claim waits for its commit's fsync, so
// the slots, not the store, bound the rate (see docs/profiles/drain.md).
func BenchmarkDrainWide(b *testing.B) { benchDrain(b, 1000) }

func benchDrain(b *testing.B, slots int) {
	for _, sb := range benchStores {
		b.Run(sb.name, func(b *testing.B) {
			st := sb.open(b)
			var done atomic.Int64
			noop := mustAction(b, countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
				Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
					done.Add(1)
					return &countersign.Receipt{ID: "ok"}, nil
				},
			}})
			e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop}})
			if err != nil {
				b.Fatal(err)
			}
			seedApproved(b, st, "noop", b.N)
			w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Millisecond, LeaseDuration: time.Minute, MaxConcurrency: slots})
			if err != nil {
				b.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			b.ResetTimer()
			start := time.Now()
			ran := make(chan error)
			go func() { ran <- w.Run(ctx) }()
			for done.Load() < int64(b.N) {
				time.Sleep(200 * time.Microsecond)
			}
			// Wait for the last settlements too.
			for {
				page, err := st.ListProposals(context.Background(), &store.ListProposalsParams{Tenant: "acme", Limit: 1,
					Statuses: []cstype.Status{cstype.StatusApproved, cstype.StatusExecuting}})
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Proposals) == 0 {
					break
				}
				time.Sleep(200 * time.Microsecond)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			stop()
			<-ran
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
		})
	}
}

// BenchmarkApproveToExecute measures the latency from an approval being
// recorded (Decide returned) to the worker starting Execute, with the worker
// idle and woken by the engine's signal. It reports p50 and p99.
func BenchmarkApproveToExecute(b *testing.B) {
	for _, sb := range benchStores {
		b.Run(sb.name, func(b *testing.B) {
			st := &decideTimer{Store: sb.open(b)}
			started := make(chan time.Time, 1)
			noop := mustAction(b, countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
				Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
					started <- time.Now()
					return &countersign.Receipt{ID: "ok"}, nil
				},
			}})
			e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop}, Policy: independentRule()})
			if err != nil {
				b.Fatal(err)
			}
			// A poll far slower than the measured latency: only wake-ups count.
			w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Second, LeaseDuration: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			ran := make(chan error)
			go func() { ran <- w.Run(ctx) }()
			timeApprovals(b, e, st, started)
			stop()
			<-ran
		})
	}
}

// decideTimer records when the store committed the last decision: the moment
// an approval exists, from which approve → Execute-start is measured.
type decideTimer struct {
	store.Store
	committed time.Time
}

func (d *decideTimer) Decide(ctx context.Context, p *store.DecideParams) (*store.DecideResult, error) {
	res, err := d.Store.Decide(ctx, p)
	d.committed = time.Now()
	return res, err
}

// BenchmarkApproveToExecuteAcrossProcesses is BenchmarkApproveToExecute on
// PostgreSQL with the approver and the worker on separate engines and
// connection pools, as in separate processes: only LISTEN/NOTIFY wakes the
// worker.
func BenchmarkApproveToExecuteAcrossProcesses(b *testing.B) {
	_, schema := pgtest.NewSchema(b)
	open := func() store.Store {
		s, err := pgstore.Open(context.Background(), pgtest.DSN(), &pgstore.Options{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	approverStore := &decideTimer{Store: open()}
	workerStore := open()
	started := make(chan time.Time, 1)
	noop := mustAction(b, countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			started <- time.Now()
			return &countersign.Receipt{ID: "ok"}, nil
		},
	}})
	approver, err := countersign.New(countersign.Options{Store: approverStore, Actions: []*countersign.Action{noop}, Policy: independentRule()})
	if err != nil {
		b.Fatal(err)
	}
	workerEngine, err := countersign.New(countersign.Options{Store: workerStore, Actions: []*countersign.Action{noop}, Policy: independentRule()})
	if err != nil {
		b.Fatal(err)
	}
	w, err := workerEngine.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Second, LeaseDuration: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error)
	go func() { ran <- w.Run(ctx) }()
	time.Sleep(200 * time.Millisecond) // let the listener connect
	timeApprovals(b, approver, approverStore, started)
	stop()
	<-ran
}

// timeApprovals proposes and approves b.N calls of the noop action, one at
// a time, and reports the p50 and p99 of approval commit → Execute start.
func timeApprovals(b *testing.B, approver *countersign.Engine, st *decideTimer, started <-chan time.Time) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		res, err := approver.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: fmt.Sprint("c", i), Action: "noop", Input: json.RawMessage(`{}`)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := approver.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-started).Sub(st.committed))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
