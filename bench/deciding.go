package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
)

func init() {
	register(scenario{ID: "B6", order: 60, perStore: true,
		Title: "Deciding over HTTP",
		Method: "D pending proposals are created through the engine first. Then C clients `POST /v1/proposals/{id}/approve` over loopback " +
			"HTTP to the real server (API keys, metrics, request logs), each decision once, as fast as answers come; no worker runs, so " +
			"the figure is the decide endpoint's own. Each request is timed from send to the decoded answer, which must be \"applied\". On PostgreSQL a pgx tracer counts round trips to the server (each query, prepare and batch) by the context they serve: the decision requests' ÷ decisions.",
		run: deciding})
}

func deciding(e *env) ([]Figure, error) {
	st, _, rt, closeStore, err := e.openTraced()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	ctx := e.ctx
	metrics := newMetrics()
	eng, err := newLifecycleEngine(st, metrics, lifecycleHooks{tracer: e.tracer})
	if err != nil {
		return nil, err
	}
	if e.sealer == sealerOn {
		// As a worker beside the server would, from the start: the seeded
		// creations are sealed as they are written, as they would be. The
		// sealer alone, with a worker's defaults: a Worker would also
		// execute the approved proposals, and B6 measures deciding only.
		// (bench is a composition root: it may build the service itself.)
		sealer := maintenance.NewSealer(st, maintenance.SealerConfig{
			Owner: "bench-b6-sealer", Interval: countersign.DefaultSealInterval,
			LeaseDuration: countersign.DefaultSealLease, Batch: store.DefaultSealBatch,
		})
		sctx, stopSealer := context.WithCancel(ctx)
		sealed := make(chan error, 1)
		go func() { sealed <- sealer.Run(sctx) }()
		defer func() { stopSealer(); <-sealed }()
	}
	n, clients := e.cfg.Decisions, e.cfg.Clients
	ids := make([]string, n)
	seed := newBar(n, "B6 %s: seed pending", e.target.title)
	alice := countersign.Identity{Tenant: workload.Tenant, Actor: "alice"}
	err = parallel(n, 16, func(w, i int) error {
		res, err := eng.Call(ctx, &countersign.Call{Identity: alice, ThreadID: fmt.Sprint("t", w), ToolCallID: fmt.Sprint("c", i),
			Action: "noop", Input: json.RawMessage(`{"n":0}`)})
		if err != nil {
			return err
		}
		ids[i] = res.ProposalID
		seed.add(1)
		return nil
	})
	seed.done()
	if err != nil {
		return nil, err
	}
	api, err := startTracedAPI(eng, metrics, clients, e.httpTracer)
	if err != nil {
		return nil, err
	}
	defer api.close()
	b := newBar(n, "B6 %s: decisions, %d clients", e.target.title, clients)
	lat := make([]time.Duration, n)
	before := rt.counts()
	start := time.Now()
	err = parallel(n, clients, func(_, i int) error {
		t0 := time.Now()
		var ans decisionAnswer
		if err := api.post(ctx, "/v1/proposals/"+ids[i]+"/approve", approverKey, map[string]any{"reason": "ok"}, &ans); err != nil {
			return err
		}
		if ans.Status != "applied" {
			return fmt.Errorf("approve %s answered %q", ids[i], ans.Status)
		}
		lat[i] = time.Since(t0)
		b.add(1)
		return nil
	})
	elapsed := time.Since(start)
	trips := rt.counts().sub(before)
	b.done()
	if err != nil {
		return nil, err
	}
	slices.Sort(lat)
	k := "b6." + e.target.name
	label := fmt.Sprintf("%s approvals, %d clients", thousands(fmt.Sprint(n)), clients)
	figs := []Figure{
		{Key: k + ".rate", Label: label, Value: float64(n) / elapsed.Seconds(), Unit: "decisions/s"},
		{Key: k + ".p50", Label: "decision latency, p50", Value: ms(pct(lat, 50)), Unit: "ms"},
		{Key: k + ".p99", Label: "decision latency, p99", Value: ms(pct(lat, 99)), Unit: "ms"},
	}
	if rt != nil {
		figs = append(figs,
			Figure{Key: k + ".rt_decision", Label: "round trips per decision", Value: perOp(trips[rtDecision], n), Unit: "round trips"},
			Figure{Key: k + ".rt_other", Label: "other round trips per decision (notifications sent after commit)", Value: perOp(trips[rtOther], n), Unit: "round trips"},
			Figure{Key: k + ".conns", Label: fmt.Sprintf("connections the pool opened over the run, seeding included (of %d)", e.cfg.PGMaxConns), Value: float64(poolConns(st)), Unit: "connections"})
	}
	return figs, nil
}
