package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
)

// manyWorkers is how many workers execute in B9 beside the approvers.
const manyWorkers = 4

func init() {
	register(scenario{ID: "B9", order: 90, perStore: true,
		Title: "Many approvers at once",
		Method: fmt.Sprintf("N pending no-op proposals (independent mode) are created through the engine first. Then A approvers "+
			"`POST /v1/proposals/{id}/approve` over loopback HTTP to the real server (API keys, metrics, request logs, as B6 builds it), "+
			"each proposal once, as fast as answers come, while %d workers (%d execution slots each, polling every second, so that wake-ups "+
			"count) execute the approved ones. On PostgreSQL the workers are %d engines in this process, each on its own pool, as separate "+
			"worker processes would be: only LISTEN/NOTIFY wakes them. SQLite has no cross-process signal and is served by one process, so "+
			"there they are %d workers of the engine that serves HTTP. Decisions/s runs from the first approval sent to the last answer; "+
			"executions/s from the first approval sent until every proposal has settled; the latency runs from the moment the decision's "+
			"transaction committed (the store's Decide returned, in the server) to the moment a worker entered Execute. Every Execute "+
			"entry is counted by proposal id: a proposal executed twice fails the scenario.",
			manyWorkers, slots, manyWorkers, manyWorkers),
		run: manyApprovers})
}

// decideClock records, by action index, when each decision's transaction
// committed: the moment the approval exists.
type decideClock struct {
	store.Store
	index map[string]int // proposal id → action index; read only once deciding starts
	at    []atomic.Int64 // unix nanos
}

func (s *decideClock) Unwrap() store.Store { return s.Store }

func (s *decideClock) Decide(ctx context.Context, p *store.DecideParams) (*store.DecideResult, error) {
	res, err := s.Store.Decide(ctx, p)
	if i, ok := s.index[p.ID]; ok && err == nil {
		s.at[i].Store(time.Now().UnixNano())
	}
	return res, err
}

// executions counts Execute entries by proposal id and remembers when each
// action's first began.
type executions struct {
	mu      sync.Mutex
	byID    map[string]int
	doubles []string
	started []atomic.Int64 // unix nanos, by action index
	count   atomic.Int64
}

func (x *executions) enter(i int, id string) {
	x.started[i].CompareAndSwap(0, time.Now().UnixNano())
	x.count.Add(1)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.byID[id]++
	if x.byID[id] == 2 {
		x.doubles = append(x.doubles, id)
	}
}

func manyApprovers(e *env) ([]Figure, error) {
	raw, spec, closeStore, err := e.open()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	n, approvers := e.cfg.ManyProposals, e.cfg.ManyApprovers
	clock := &decideClock{Store: raw, index: make(map[string]int, n), at: make([]atomic.Int64, n)}
	x := &executions{byID: make(map[string]int, n), started: make([]atomic.Int64, n)}
	hooks := lifecycleHooks{start: x.enter}
	metrics := newMetrics()
	eng, err := newLifecycleEngine(clock, metrics, hooks)
	if err != nil {
		return nil, err
	}

	ids := make([]string, n)
	seed := newBar(n, "B9 %s: seed pending", e.target.title)
	alice := countersign.Identity{Tenant: workload.Tenant, Actor: "alice"}
	err = parallel(n, 16, func(w, i int) error {
		res, err := eng.Call(ctx, &countersign.Call{Identity: alice, ThreadID: fmt.Sprint("t", w), ToolCallID: fmt.Sprint("c", i),
			Action: "noop", Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			return err
		}
		if res.ProposalID == "" {
			return fmt.Errorf("call %d made no proposal", i)
		}
		ids[i] = res.ProposalID
		seed.add(1)
		return nil
	})
	seed.done()
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		clock.index[id] = i
	}

	// The workers, started before the first decision and idle until then.
	engines := []*countersign.Engine{eng, eng, eng, eng}
	if strings.HasPrefix(spec, "postgres:") {
		for w := range engines {
			ws, err := openSpec(ctx, spec, e.cfg.PGMaxConns, nil)
			if err != nil {
				return nil, err
			}
			defer ws.Close()
			if engines[w], err = newLifecycleEngine(ws, nil, hooks); err != nil {
				return nil, err
			}
		}
	}
	ran := make(chan error, len(engines))
	for _, we := range engines {
		w, err := we.NewWorker(countersign.WorkerOptions{PollInterval: time.Second, LeaseDuration: time.Minute, MaxConcurrency: slots})
		if err != nil {
			return nil, err
		}
		go func() { ran <- w.Run(ctx) }()
	}
	defer func() {
		stop()
		for range engines {
			<-ran
		}
	}()
	api, err := startAPI(eng, clock, metrics, approvers)
	if err != nil {
		return nil, err
	}
	defer api.close()
	if engines[0] != eng {
		// The workers' listeners connect (as B2 gives them): the engine
		// does not say when LISTEN is in place. One that missed a
		// notification still polls every second, which p99 would show.
		time.Sleep(300 * time.Millisecond)
	}

	b := newBar(n, "B9 %s: decisions, %d approvers, %d workers", e.target.title, approvers, manyWorkers)
	start := time.Now()
	err = parallel(n, approvers, func(_, i int) error {
		var ans decisionAnswer
		if err := api.post(ctx, "/v1/proposals/"+ids[i]+"/approve", approverKey, map[string]any{}, &ans); err != nil {
			return err
		}
		if ans.Status != "applied" {
			return fmt.Errorf("approve %s answered %q", ids[i], ans.Status)
		}
		b.add(1)
		return nil
	})
	decided := time.Since(start)
	b.done()
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := workload.WaitDrained(wctx, raw, time.Millisecond, nil); err != nil {
		return nil, fmt.Errorf("waiting for the executions: %w", err)
	}
	executed := time.Since(start)

	k := "b9." + e.target.name
	x.mu.Lock()
	doubles := slices.Clone(x.doubles)
	x.mu.Unlock()
	figs := []Figure{{Key: k + ".doubles", Label: "proposals executed more than once", Value: float64(len(doubles)), Unit: "proposals"}}
	if len(doubles) > 0 {
		return figs, fmt.Errorf("%d proposals executed more than once, %s among them", len(doubles), doubles[0])
	}
	counts, err := raw.CountByStatus(ctx)
	if err != nil {
		return figs, err
	}
	if counts[store.StatusSucceeded] != n || x.count.Load() != int64(n) {
		return figs, fmt.Errorf("statuses %v and %d Execute entries, want %d succeeded once each", counts, x.count.Load(), n)
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = time.Duration(x.started[i].Load() - clock.at[i].Load())
	}
	slices.Sort(lat)
	label := fmt.Sprintf("%s pending proposals, %d approvers over HTTP, %d workers", thousands(fmt.Sprint(n)), approvers, manyWorkers)
	return append(figs,
		Figure{Key: k + ".decisions", Label: label + ": decisions", Value: float64(n) / decided.Seconds(), Unit: "decisions/s"},
		Figure{Key: k + ".executions", Label: label + ": executions, to the last settlement", Value: float64(n) / executed.Seconds(), Unit: "executions/s"},
		Figure{Key: k + ".p50", Label: "decision committed → Execute-start, p50", Value: ms(pct(lat, 50)), Unit: "ms"},
		Figure{Key: k + ".p99", Label: "decision committed → Execute-start, p99", Value: ms(pct(lat, 99)), Unit: "ms"},
	), nil
}
