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
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
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
}

// seedApproved stores n approved independent proposals of action, directly in
// the store (as remembered approvals would), for the worker to drain.
func seedApproved(b testing.TB, st store.Store, action string, n int) {
	b.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("prp_bench_%s_%08d", action, i)
		_, err := st.CreateProposal(ctx, &store.CreateProposalParams{
			Proposal: &store.Proposal{
				ID: id, Tenant: "acme", Requester: "alice", ThreadID: "t", ToolCallID: id, Action: action, ActionVersion: "1",
				Input: json.RawMessage(`{}`), RawInput: json.RawMessage(`{}`), Mode: store.ModeIndependent,
				InputDigest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
				Approvers:   []string{"requester"}, Quorum: 1, ExpiresAt: time.Now().Add(time.Hour), OperationID: "op_" + id,
				ConfirmationID: "cnf_" + id,
			},
			ApprovedBy: &store.Decision{Actor: "grant:bench", Via: "grant"},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDrain measures how fast one worker process drains approved no-op
// proposals: b.N of them, reported as proposals/s.
func BenchmarkDrain(b *testing.B) {
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
			w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Millisecond, LeaseDuration: time.Minute, MaxConcurrency: 64})
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
					Statuses: []store.Status{store.StatusApproved, store.StatusExecuting}})
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
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				res, err := e.Call(ctx, &countersign.Call{Identity: tAlice, ThreadID: "t", ToolCallID: fmt.Sprint("c", i), Action: "noop", Input: json.RawMessage(`{}`)})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, (<-started).Sub(st.committed))
			}
			b.StopTimer()
			stop()
			<-ran
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
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
