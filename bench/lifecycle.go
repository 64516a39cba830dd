package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
)

func init() {
	register(scenario{ID: "B3", order: 30, perStore: true,
		Title: "Full lifecycle over HTTP",
		Method: "One process runs the HTTP server (API keys, metrics, request logs) and a worker (64 slots). A agents (goroutines) each call " +
			"`POST /v1/calls` (independent mode) over loopback HTTP and hand the proposal id to A approvers, which `POST " +
			"/v1/proposals/{id}/approve`; the worker executes. Timed from the first call until every action has executed and settled; " +
			"the latency is from sending the call to the start of Execute. Commits needed per action: 4 (create, approve, claim, settle). On PostgreSQL a pgx tracer counts round trips to the server (each query, prepare and batch) by the context they serve: the HTTP route (call, decision) or the worker's step (claim batches, settlements, renewals), ÷ actions.",
		run: lifecycle})
}

func lifecycle(e *env) ([]Figure, error) {
	st, _, rt, closeStore, err := e.openTraced()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	// The bench's own reads count against it, not against the requests.
	ctx, stop := context.WithCancel(withClass(e.ctx, rtBench))
	defer stop()
	n, agents := e.cfg.Actions, e.cfg.Agents
	sent := make([]atomic.Int64, n)     // unix nanos when the call was sent
	executed := make([]atomic.Int64, n) // unix nanos when Execute began
	var count atomic.Int64
	noopStart := func(id int) {
		executed[id].Store(time.Now().UnixNano())
		count.Add(1)
	}
	metrics := newMetrics()
	eng, err := newLifecycleEngine(tagSteps(st), metrics, noopStart)
	if err != nil {
		return nil, err
	}
	w, err := eng.NewWorker(countersign.WorkerOptions{PollInterval: 50 * time.Millisecond, LeaseDuration: time.Minute, MaxConcurrency: slots,
		NoSealer: e.sealer == sealerOff})
	if err != nil {
		return nil, err
	}
	ran := make(chan error, 1)
	go func() { ran <- w.Run(withClass(ctx, rtWorker)) }()
	defer func() { stop(); <-ran }()
	api, err := startAPI(eng, st, metrics, 2*agents)
	if err != nil {
		return nil, err
	}
	defer api.close()

	b := newBar(n, "B3 %s: actions", e.target.title)
	ids := make(chan string, n)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*agents)
	before := rt.counts()
	start := time.Now()
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				sent[i].Store(time.Now().UnixNano())
				var ans callAnswer
				err := api.post(ctx, "/v1/calls", agentKey, map[string]any{
					"thread_id": fmt.Sprintf("agent-%d", a), "tool_call_id": fmt.Sprint("call-", i), "action": "noop",
					"input": map[string]int{"n": i}, "mode": "independent"}, &ans)
				if err == nil && (ans.Status != "pending" || ans.ProposalID == "") {
					err = fmt.Errorf("call %d answered %+v, want pending with a proposal id", i, ans)
				}
				if err != nil {
					errs <- err
					return
				}
				ids <- ans.ProposalID
			}
		}()
	}
	var approvers sync.WaitGroup
	for range agents {
		approvers.Add(1)
		go func() {
			defer approvers.Done()
			for id := range ids {
				var ans decisionAnswer
				err := api.post(ctx, "/v1/proposals/"+id+"/approve", approverKey, map[string]any{}, &ans)
				if err == nil && ans.Status != "applied" {
					err = fmt.Errorf("approve %s answered %q", id, ans.Status)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(ids) }()
	done := make(chan struct{})
	go func() { approvers.Wait(); close(done) }()
	// Wait for every execution, then for the last settlements.
	for count.Load() < int64(n) {
		select {
		case err := <-errs:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		b.set(int(count.Load()))
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := workload.WaitDrained(wctx, st, time.Millisecond, nil); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	trips := rt.counts().sub(before)
	b.set(n)
	b.done()
	<-done
	counts, err := st.CountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	if counts[store.StatusSucceeded] != n || count.Load() != int64(n) {
		return nil, fmt.Errorf("statuses %v and %d executions, want %d succeeded once each", counts, count.Load(), n)
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = time.Duration(executed[i].Load() - sent[i].Load())
	}
	slices.Sort(lat)
	label := fmt.Sprintf("%s actions, %d agents and %d approvers over HTTP, 1 worker", thousands(fmt.Sprint(n)), agents, agents)
	k := "b3." + e.target.name
	figs := []Figure{
		{Key: k + ".actions", Label: label, Value: float64(n) / elapsed.Seconds(), Unit: "actions/s"},
		{Key: k + ".p50", Label: "call sent → Execute-start, p50", Value: ms(pct(lat, 50)), Unit: "ms"},
		{Key: k + ".p99", Label: "call sent → Execute-start, p99", Value: ms(pct(lat, 99)), Unit: "ms"},
	}
	if rt != nil {
		figs = append(figs, lifecycleTrips(k, trips, n, poolConns(st), e.cfg.PGMaxConns)...)
	}
	return figs, nil
}

// lifecycleTrips are B3's round trips to PostgreSQL: per HTTP call and
// decision, and the worker's per proposal, step by step.
func lifecycleTrips(k string, c rtCounts, n, conns, maxConns int) []Figure {
	const unit = "round trips"
	return []Figure{
		{Key: k + ".rt_call", Label: "round trips per call (POST /v1/calls)", Value: perOp(c[rtCall], n), Unit: unit},
		{Key: k + ".rt_decision", Label: "round trips per decision (POST …/approve)", Value: perOp(c[rtDecision], n), Unit: unit},
		{Key: k + ".rt_worker", Label: "worker round trips per proposal (claims, settlements, renewals, the rest)", Value: perOp(c.worker(), n), Unit: unit},
		{Key: k + ".rt_claim", Label: "worker round trips per proposal: claim batches", Value: perOp(c[rtClaim], n), Unit: unit},
		{Key: k + ".rt_settle", Label: "worker round trips per proposal: settlements", Value: perOp(c[rtSettle], n), Unit: unit},
		{Key: k + ".rt_renew", Label: "worker round trips per proposal: lease renewals", Value: perOp(c[rtRenew], n), Unit: unit},
		{Key: k + ".rt_other", Label: "other round trips per action (notifications sent after commit)", Value: perOp(c[rtOther], n), Unit: unit},
		{Key: k + ".conns", Label: fmt.Sprintf("connections the pool opened over the run (of %d)", maxConns), Value: float64(conns), Unit: "connections"},
	}
}

// newLifecycleEngine has a no-op action whose input names its index, with
// metrics observed as the server runs them.
func newLifecycleEngine(st store.Store, obs countersign.Observer, onExecute func(i int)) (*countersign.Engine, error) {
	noop, err := countersign.NewRawAction(countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			var in struct{ N int }
			if err := json.Unmarshal(req.Input, &in); err != nil {
				return nil, countersign.NotApplied(err)
			}
			onExecute(in.N)
			return &countersign.Receipt{ID: "ok"}, nil
		},
	}})
	if err != nil {
		return nil, err
	}
	return countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop}, Observer: obs,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent}}}})
}
