package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
)

func init() {
	register(scenario{ID: "B2", order: 20, perStore: true,
		Title: "Latency: approve → Execute-start",
		Method: "Proposals are approved one at a time; each sample runs from the moment the decision's transaction committed (the store's Decide " +
			"returned) to the moment the worker entered Execute. The worker is idle between samples and polls only every 10 s, so only " +
			"wake-ups count. On PostgreSQL the approver and the worker are separate engines on separate pools, as separate processes " +
			"would be, so only LISTEN/NOTIFY wakes the worker; SQLite has no cross-process signal, so they share one engine.",
		run: func(e *env) ([]Figure, error) {
			lat, err := latency(e)
			if err != nil {
				return nil, err
			}
			label := fmt.Sprintf("approve → Execute-start, %s samples", thousands(fmt.Sprint(len(lat))))
			k := "b2." + e.target.name
			return []Figure{
				{Key: k + ".p50", Label: label + ", p50", Value: ms(pct(lat, 50)), Unit: "ms"},
				{Key: k + ".p95", Label: label + ", p95", Value: ms(pct(lat, 95)), Unit: "ms"},
				{Key: k + ".p99", Label: label + ", p99", Value: ms(pct(lat, 99)), Unit: "ms"},
			}, nil
		}})
}

// ms is a duration in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the nearest-rank percentile p of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p+99)/100 - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// timedStore records when the last decision committed: the moment the
// approval exists.
type timedStore struct {
	store.Store
	committed atomic.Int64
}

func (s *timedStore) Unwrap() store.Store { return s.Store }

func (s *timedStore) Decide(ctx context.Context, p *store.DecideParams) (*store.DecideResult, error) {
	res, err := s.Store.Decide(ctx, p)
	s.committed.Store(time.Now().UnixNano())
	return res, err
}

// latency returns the sorted samples.
func latency(e *env) ([]time.Duration, error) {
	raw, spec, closeStore, err := e.open()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	approverStore := &timedStore{Store: raw}
	started := make(chan int64, 1)
	approver, err := newEngine(approverStore, countersign.ModeIndependent, func() { started <- time.Now().UnixNano() })
	if err != nil {
		return nil, err
	}
	workerEngine := approver
	if strings.HasPrefix(spec, "postgres:") {
		ws, err := openSpec(ctx, spec, e.cfg.PGMaxConns, nil)
		if err != nil {
			return nil, err
		}
		defer ws.Close()
		if workerEngine, err = newEngine(ws, countersign.ModeIndependent, func() { started <- time.Now().UnixNano() }); err != nil {
			return nil, err
		}
	}
	w, err := workerEngine.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Second, LeaseDuration: time.Minute})
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { stop(); <-done }()
	time.Sleep(300 * time.Millisecond) // the listener connects
	alice := countersign.Identity{Tenant: workload.Tenant, Actor: "alice"}
	bob := countersign.Identity{Tenant: workload.Tenant, Actor: "bob", Roles: []string{"finance"}}
	samples := e.cfg.Samples
	b := newBar(samples, "B2 %s: approvals", e.target.title)
	defer b.done()
	lat := make([]time.Duration, 0, samples)
	for i := range samples {
		res, err := approver.Call(ctx, &countersign.Call{Identity: alice, ThreadID: "t", ToolCallID: fmt.Sprint("c", i), Action: "noop", Input: json.RawMessage(`{}`)})
		if err != nil {
			return nil, err
		}
		if _, err := approver.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
			return nil, err
		}
		select {
		case at := <-started:
			lat = append(lat, time.Duration(at-approverStore.committed.Load()))
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("approval %d never executed", i)
		}
		b.add(1)
	}
	slices.Sort(lat)
	return lat, nil
}
