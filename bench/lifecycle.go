package main

import (
	"context"
	"encoding/json"
	"fmt"
	rtrace "runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"

	"go.opentelemetry.io/otel/trace"
)

func init() {
	register(scenario{ID: "B3", order: 30, perStore: true,
		Title: "Full lifecycle over HTTP",
		Method: "One process runs the HTTP server (API keys, metrics, request logs) and a worker (64 slots). A agents (goroutines) each call " +
			"`POST /v1/calls` (independent mode) over loopback HTTP and hand the proposal id to A approvers, which `POST " +
			"/v1/proposals/{id}/approve`; the worker executes. The hand-off holds no queue: an agent waits, before its next call, until an approver takes " +
			"the id, so no more proposals wait for an approver than there are agents, and the latency does not grow with the run's length. " +
			"(Until 2026-12-06 the ids queued without bound: where approvers were slower than agents, the call → Execute-start p50 measured that " +
			"queue, 496 ms at 2,500 actions and 1,805 ms at 10,000 on PostgreSQL with the same handlers.) It runs once at each load of -b3-loads (A = 4, 32 and 64 by default) and at " +
			"-agents (32 by default), the main load, whose figures have no load in their keys and are the ones the goals judge (but for issue 32's load goal, which compares every load); each " +
			"run on a fresh store, the smallest load first, after a GC and a pause. Timed from the first call until every action has executed and settled; " +
			"the latency is from sending the call to the start of Execute. Where the time goes, action by action, p50/p99 of each step: the call handler (the agent sends `POST /v1/calls` → its answer arrives), the hand-off (its answer → an approver sends `…/approve`: the wait for a free approver), the decision handler (the approver sends `…/approve` → its answer arrives), the wait for a claim (the decision's answer → Execute entered; 0 when the worker entered Execute before the answer reached the approver), the execution (Execute entered → returned) and the settlement (Execute returned → the engine's OnSettled hook, which runs after the settlement committed); at the other loads, the wait for a claim alone. " +
			"At every load, the decision committed → Execute-start: from the moment the store's Decide (the approval's compare-and-set, in the server) returned having applied it to the moment Execute was entered (0 when a worker woken by the commit's notification entered Execute before Decide had returned to the server): the wake-up and claim path, without HTTP. " +
			"Commits needed per action: 4 (create, approve, claim, settle). On PostgreSQL, at the main load, a pgx tracer counts round trips to the server (each query, prepare and batch) by the context they serve: the HTTP route (call, decision) or the worker's step (claim batches, settlements, renewals), ÷ actions.",
		run: lifecycle})
}

// lifecycle runs B3 at each load, the smallest first. The main load
// (-agents) keeps the keys it has always had; the others carry theirs.
func lifecycle(e *env) ([]Figure, error) {
	var figs []Figure
	for i, agents := range b3Loads(e.cfg) {
		if i > 0 {
			quiet(e.cfg)
		}
		f, err := lifecycleAt(e, agents)
		figs = append(figs, f...)
		if err != nil {
			return figs, fmt.Errorf("%d agents: %w", agents, err)
		}
	}
	return figs, nil
}

// lifecycleMain is B3 at its main load alone, as the audit scenario
// repeats it.
func lifecycleMain(e *env) ([]Figure, error) { return lifecycleAt(e, e.cfg.Agents) }

// b3Loads are the loads B3 runs at, ascending, each once: -b3-loads and
// -agents.
func b3Loads(cfg config) []int {
	loads := slices.Clone(cfg.B3Loads)
	if cfg.Agents > 0 {
		loads = append(loads, cfg.Agents)
	}
	slices.Sort(loads)
	return slices.Compact(loads)
}

// b3Key is the prefix of B3's figure keys at a load: b3.<store> at the
// main load, b3.<store>.agents<N> at the others.
func b3Key(st string, agents, mainLoad int) string {
	if agents == mainLoad {
		return "b3." + st
	}
	return fmt.Sprintf("b3.%s.agents%d", st, agents)
}

// lifecycleAt runs B3 once with agents agents and as many approvers, on a
// fresh store.
func lifecycleAt(e *env, agents int) ([]Figure, error) {
	st, _, rt, closeStore, err := e.openTraced()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	// The bench's own reads count against it, not against the requests.
	ctx, stop := context.WithCancel(withClass(e.ctx, rtBench))
	defer stop()
	n := e.cfg.Actions
	t := newStepTimes(n)
	var count, settledCount atomic.Int64
	metrics := newMetrics()
	// The agents name each proposal's action before handing it to an
	// approver, so its decision finds its index.
	var index sync.Map // proposal id → action index
	timed := timeDecisions(st, func(id string, at int64) {
		if i, ok := index.Load(id); ok {
			t.committed[i.(int)].CompareAndSwap(0, at)
		}
	})
	eng, err := newLifecycleEngine(tagSteps(timed), metrics, lifecycleHooks{
		start: func(i int, _ string) {
			t.executed[i].Store(time.Now().UnixNano())
			count.Add(1)
		},
		end: func(i int) { t.returned[i].Store(time.Now().UnixNano()) },
		settled: func(i int) {
			t.settled[i].Store(time.Now().UnixNano())
			settledCount.Add(1)
		},
		tracer: e.tracer,
	})
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
	api, err := startTracedAPI(eng, metrics, 2*agents, e.httpTracer)
	if err != nil {
		return nil, err
	}
	defer api.close()

	b := newBar(n, "B3 %s: actions, %d agents", e.target.title, agents)
	// Unbuffered: see the method above. A buffered queue of n let the
	// latency measure how far the approvers fell behind over the run.
	ids := make(chan called)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	errs := make(chan error, 2*agents)
	before := rt.counts()
	start := time.Now()
	// The timed run is a region of the execution trace (-exectrace), so
	// that go run ./internal/tracestat reads this window alone.
	region := rtrace.StartRegion(ctx, "bench.B3")
	for a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t.sent[i].Store(time.Now().UnixNano())
				var ans callAnswer
				err := api.post(ctx, "/v1/calls", agentKey, map[string]any{
					"thread_id": fmt.Sprintf("agent-%d", a), "tool_call_id": fmt.Sprint("call-", i), "action": "noop",
					"input": map[string]int{"n": i}, "mode": "independent"}, &ans)
				t.called[i].Store(time.Now().UnixNano())
				if err == nil && (ans.Status != "pending" || ans.ProposalID == "") {
					err = fmt.Errorf("call %d answered %+v, want pending with a proposal id", i, ans)
				}
				if err != nil {
					errs <- err
					return
				}
				index.Store(ans.ProposalID, i)
				ids <- called{i: i, id: ans.ProposalID}
			}
		}()
	}
	var approvers sync.WaitGroup
	for range agents {
		approvers.Add(1)
		go func() {
			defer approvers.Done()
			for c := range ids {
				var ans decisionAnswer
				t.deciding[c.i].Store(time.Now().UnixNano())
				err := api.post(ctx, "/v1/proposals/"+c.id+"/approve", approverKey, map[string]any{}, &ans)
				t.decided[c.i].Store(time.Now().UnixNano())
				if err == nil && ans.Status != "applied" {
					err = fmt.Errorf("approve %s answered %q", c.id, ans.Status)
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
	region.End()
	trips := rt.counts().sub(before)
	b.set(n)
	b.done()
	<-done
	// The store is drained once the last settlement committed; its
	// OnSettled hook runs just after.
	for settledCount.Load() < int64(n) {
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("%d of %d settlements reached the OnSettled hook", settledCount.Load(), n)
		case <-time.After(time.Millisecond):
		}
	}
	counts, err := st.CountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	if counts[store.StatusSucceeded] != n || count.Load() != int64(n) || settledCount.Load() != int64(n) {
		return nil, fmt.Errorf("statuses %v, %d executions and %d settlements seen, want %d succeeded once each", counts, count.Load(), settledCount.Load(), n)
	}
	for i := range n {
		if t.committed[i].Load() == 0 {
			return nil, fmt.Errorf("action %d executed, but its approval never reached the store's Decide as applied", i)
		}
	}
	isMain := agents == e.cfg.Agents
	k := b3Key(e.target.name, agents, e.cfg.Agents)
	load := fmt.Sprintf("%d agents and %d approvers", agents, agents)
	lat := t.between(&t.sent, &t.executed)
	commit := t.between(&t.committed, &t.executed)
	figs := []Figure{
		{Key: k + ".actions", Label: fmt.Sprintf("%s actions, %s over HTTP, 1 worker", thousands(fmt.Sprint(n)), load), Value: float64(n) / elapsed.Seconds(), Unit: "actions/s"},
		{Key: k + ".p50", Label: load + ": call sent → Execute-start, p50", Value: ms(pct(lat, 50)), Unit: "ms"},
		{Key: k + ".p99", Label: load + ": call sent → Execute-start, p99", Value: ms(pct(lat, 99)), Unit: "ms"},
		{Key: k + ".commit_to_exec.p50", Label: load + ": decision committed → Execute-start, p50", Value: ms(pct(commit, 50)), Unit: "ms"},
		{Key: k + ".commit_to_exec.p99", Label: load + ": decision committed → Execute-start, p99", Value: ms(pct(commit, 99)), Unit: "ms"},
	}
	steps := t.figures(k, load)
	if !isMain {
		// Beside the main load's breakdown, the other loads show the step
		// that grows with the load: the wait for a claim.
		steps = slices.DeleteFunc(steps, func(f Figure) bool { return !strings.HasPrefix(f.Key, k+".step_claim.") })
	}
	figs = append(figs, steps...)
	if rt != nil && isMain {
		figs = append(figs, lifecycleTrips(k, trips, n, poolConns(st), e.cfg.PGMaxConns)...)
	}
	return figs, nil
}

// timeDecisions wraps st so that each decision the store applied is
// reported to at, with its proposal's id and the moment (unix nanos) the
// store's Decide returned: the approval's commit, as near as the server can
// see it. The store's optional interfaces (Listen, lanes, planner
// statistics) stay in reach through Unwrap (store.Wrapper).
func timeDecisions(st store.Store, at func(id string, unixNano int64)) store.Store {
	return decisionTimer{Store: st, at: at}
}

type decisionTimer struct {
	store.Store
	at func(id string, unixNano int64)
}

// Unwrap implements store.Wrapper.
func (s decisionTimer) Unwrap() store.Store { return s.Store }

func (s decisionTimer) Decide(ctx context.Context, p *store.DecideParams) (*store.DecideResult, error) {
	res, err := s.Store.Decide(ctx, p)
	if err == nil && res != nil && res.Outcome == store.DecideApplied {
		s.at(p.ID, time.Now().UnixNano())
	}
	return res, err
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

// called is a proposal an agent's call created, with the action's index.
type called struct {
	i  int
	id string
}

// stepTimes are the moments of each action of B3, by index, in unix nanos.
type stepTimes struct {
	sent, called      []atomic.Int64 // the agent sent POST /v1/calls; its answer arrived
	deciding, decided []atomic.Int64 // the approver sent …/approve; its answer arrived
	committed         []atomic.Int64 // the store's Decide returned, the approval applied
	executed          []atomic.Int64 // Execute entered
	returned          []atomic.Int64 // Execute about to return
	settled           []atomic.Int64 // the OnSettled hook ran
}

func newStepTimes(n int) *stepTimes {
	return &stepTimes{sent: make([]atomic.Int64, n), called: make([]atomic.Int64, n), deciding: make([]atomic.Int64, n),
		decided: make([]atomic.Int64, n), committed: make([]atomic.Int64, n), executed: make([]atomic.Int64, n), returned: make([]atomic.Int64, n), settled: make([]atomic.Int64, n)}
}

// between is, sorted, each action's time from its moment in from to its
// moment in to. A negative span counts as 0: the worker may enter Execute
// before the approver has read the decision's answer, and then the wait
// for a claim took no time.
func (t *stepTimes) between(from, to *[]atomic.Int64) []time.Duration {
	out := make([]time.Duration, len(*from))
	for i := range out {
		out[i] = max(0, time.Duration((*to)[i].Load()-(*from)[i].Load()))
	}
	slices.Sort(out)
	return out
}

// figures are the p50 and p99 of each step, so that a regression of B3
// names the step it is in; load names the run's load in their labels.
func (t *stepTimes) figures(k, load string) []Figure {
	steps := []struct {
		key, label string
		from, to   *[]atomic.Int64
	}{
		{"call", "call handler (POST /v1/calls sent → answered)", &t.sent, &t.called},
		{"handoff", "hand-off (call answered → POST …/approve sent)", &t.called, &t.deciding},
		{"decision", "decision handler (POST …/approve sent → answered)", &t.deciding, &t.decided},
		{"claim", "wait for a claim (decision answered → Execute entered)", &t.decided, &t.executed},
		{"execute", "execution (Execute entered → returned)", &t.executed, &t.returned},
		{"settle", "settlement (Execute returned → OnSettled)", &t.returned, &t.settled},
	}
	var figs []Figure
	for _, s := range steps {
		d := t.between(s.from, s.to)
		figs = append(figs,
			Figure{Key: k + ".step_" + s.key + ".p50", Label: load + ": step: " + s.label + ", p50", Value: ms(pct(d, 50)), Unit: "ms"},
			Figure{Key: k + ".step_" + s.key + ".p99", Label: load + ": step: " + s.label + ", p99", Value: ms(pct(d, 99)), Unit: "ms"})
	}
	return figs
}

// lifecycleHooks are told, by the action's index, when Execute starts (with
// the proposal's id) and ends and when the settlement's OnSettled hook runs;
// nil ones are not.
type lifecycleHooks struct {
	start        func(i int, proposalID string)
	end, settled func(i int)
	// tracer, when set, is the engine's TracerProvider.
	tracer trace.TracerProvider
}

// newLifecycleEngine has a no-op action whose input names its index, with
// metrics observed as the server runs them.
func newLifecycleEngine(st store.Store, obs countersign.Observer, h lifecycleHooks) (*countersign.Engine, error) {
	noop, err := countersign.NewRawAction(countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			i, err := actionIndex(req.Input)
			if err != nil {
				return nil, countersign.NotApplied(err)
			}
			if h.start != nil {
				h.start(i, req.ProposalID)
			}
			if h.end != nil {
				h.end(i)
			}
			return &countersign.Receipt{ID: "ok"}, nil
		},
	}})
	if err != nil {
		return nil, err
	}
	var settled []countersign.SettledFunc
	if h.settled != nil {
		settled = append(settled, func(_ context.Context, p *cstype.Proposal) error {
			i, err := actionIndex(p.Input)
			if err != nil {
				return err
			}
			h.settled(i)
			return nil
		})
	}
	return countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop}, Observer: obs, OnSettled: settled, TracerProvider: h.tracer,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent}}}})
}

// actionIndex is the index an action's input names: {"n": i}.
func actionIndex(input []byte) (int, error) {
	var in struct{ N int }
	if err := json.Unmarshal(input, &in); err != nil {
		return 0, fmt.Errorf("bench: the input %s names no index: %w", input, err)
	}
	return in.N, nil
}
