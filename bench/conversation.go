package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
	"github.com/countersign/countersign/internal/runhost"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/server"
	"github.com/countersign/countersign/store"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// conversationSizes are B7's sizes: its own flags, which main's -quick
// does not know of (conversationSizesFor applies it).
type conversationSizes struct {
	Turns   int // turns timed
	Clients int // concurrent HTTP clients, each one turn at a time
	Parked  int // runs parked for the memory measurement
	// WarmParked are the runs parked before it, to fill what is bounded
	// but grows with the first runs: the pools, and pgstore's memory of
	// the last 4,096 proposals it touched.
	WarmParked int
}

// b7Sizes are the flags' values; the tests set them.
var b7Sizes = conversationSizes{Turns: 2000, Clients: 16, Parked: 100000, WarmParked: 5000}

// quickB7Sizes replace the turns and the parked runs of a -quick run.
var quickB7Sizes = conversationSizes{Turns: 400, Parked: 5000}

// turnPoll is how often a client re-reads a run it waits on when nothing
// in the process signalled a change to it.
const turnPoll = 10 * time.Millisecond

// turnTimeout bounds one turn; a run that does not finish within it fails
// the scenario.
const turnTimeout = time.Minute

func init() {
	flag.IntVar(&b7Sizes.Turns, "turns", b7Sizes.Turns, "B7: turns timed (a message, a text decision, the run resumed and finished)")
	flag.IntVar(&b7Sizes.Clients, "turn-clients", b7Sizes.Clients, "B7: concurrent HTTP clients, each one turn at a time")
	flag.IntVar(&b7Sizes.Parked, "parked", b7Sizes.Parked, "B7: runs parked for the memory measurement")
	register(scenario{ID: "B7", order: 70, perStore: true,
		Title: "Conversations: a turn decided by text over HTTP, and parked runs",
		Method: fmt.Sprintf("One process runs the HTTP server (API keys, metrics, request logs) with the demo's scripted agent as the default "+
			"agent, and the agent runtime's Work loop (agent.Runtime.Work, as `countersign serve` runs it), which resumes parked runs; "+
			"no engine worker runs, since the policy (payments.* asked of role:finance, Mode wait) has the run execute the approved call "+
			"itself. A turn: the agent's user posts \"refund 40 EUR to c_N\" to a fresh thread (`POST /v1/threads/{id}/messages`; the "+
			"server drives the run, whose wait-mode payments.refund call parks it, and answers parked), an approver posts \"yes\" to the "+
			"thread (a text decision, same route, answered applied), and the Work loop claims the run, executes the call once and "+
			"finishes the run. C clients make turns one after another, after one untimed turn each; a turn is timed from sending the "+
			"first POST to the client seeing the run finished (`GET /v1/threads/{id}/runs/{run_id}`, read whenever the engine signals "+
			"a change to the run, RunHost.WatchRun, and at least every %s); resumption is from the answer to \"yes\" to the same "+
			"moment. Every run must finish and every refund execute once. On PostgreSQL a pgx tracer counts round trips to the server "+
			"(each query, prepare and batch) by the context they serve: the user's message (its request and the run's steps up to "+
			"parking, which the server drives), the decision, the Work loop (its claims and the resumed steps), the clients' reads of "+
			"the run, ÷ turns. Parked runs, on a fresh store: P runs are parked through the engine (Engine.PostMessage, then "+
			"Runtime.Drive; one thread and one wait-mode call each, C at a time, no Work loop), after W = %s parked the same way "+
			"to fill what is bounded but grows with the first runs (the pools; pgstore remembers the last 4,096 proposals it touched); "+
			"before and after the P, goroutines are runtime.NumGoroutine() and memory is the Go runtime's live heap "+
			"objects + goroutine stacks (runtime/metrics, after GCs until they stop shrinking, as in B5), and on PostgreSQL the "+
			"store's pool is read for its connections in use and open; the memory the W left behind, from before the first, is "+
			"reported apart. Last, with none of the W + P ready, RunHost.ClaimRuns (what the Work loop calls on each change in the "+
			"process and each second) is timed, as it was after the W. On PostgreSQL the runs and proposals are analyzed before each "+
			"timing of the claim, after the W and after the P, as autovacuum would have done (the bench's server may run without "+
			"it): without statistics the planner checks each parked run's proposal by a scan of the pending proposals' index, so "+
			"that the claim grows with the square of the parked runs, and parking itself slows down as runs accumulate.", turnPoll, thousands(fmt.Sprint(b7Sizes.WarmParked))),
		run: conversations})
}

// conversationSizesFor is B7's sizes for a run's configuration.
func conversationSizesFor(cfg config) conversationSizes {
	s := b7Sizes
	if cfg.Quick {
		s.Turns, s.Parked = quickB7Sizes.Turns, quickB7Sizes.Parked
	}
	return s
}

func conversations(e *env) ([]Figure, error) {
	sz := conversationSizesFor(e.cfg)
	if sz.Turns <= 0 || sz.Clients <= 0 || sz.Parked <= 0 || sz.WarmParked < sz.Clients {
		return nil, fmt.Errorf("-turns %d, -turn-clients %d, -parked %d: want positive numbers", sz.Turns, sz.Clients, sz.Parked)
	}
	figs, err := turns(e, sz)
	if err != nil {
		return figs, err
	}
	quiet(e.cfg)
	parked, err := parkedRuns(e, sz)
	return append(figs, parked...), err
}

// refundInput is the refund the scripted agent asks for.
type refundInput struct {
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

// newConversationEngine has the demo's refund action, asked of role:finance
// in wait mode, so that the run that calls it parks and, once approved,
// executes it; onExecute is told of each execution.
func newConversationEngine(st store.Store, obs countersign.Observer, onExecute func()) (*countersign.Engine, error) {
	refund, err := countersign.NewAction(countersign.ActionSpec[refundInput]{
		Name:         "payments.refund",
		Description:  "Refund a payment to a customer.",
		Confirmation: countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
		Execute: func(_ context.Context, _ *countersign.ExecuteRequest, in refundInput) (*countersign.Receipt, error) {
			onExecute()
			return &countersign.Receipt{ID: "rf_" + in.Customer}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	return countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{refund}, Observer: obs,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeWait}}},
		Logger: warnLogger()})
}

// newConversationRuntime is the agent runtime with the demo's scripted
// agent, "demo" (cmd/countersign's rules).
func newConversationRuntime(eng *countersign.Engine) (*agent.Runtime, error) {
	model, err := scripted.New(scripted.Config{Rules: []scripted.Rule{
		{Match: `(?i)refund (?P<amount>\d+(?:\.\d+)?) .*to (?P<customer>\w+)`, Say: "I'll ask for that refund.",
			Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`}},
		{Match: `.*`, Say: `I can refund payments: say "refund 40 EUR to c_9".`},
	}})
	if err != nil {
		return nil, err
	}
	return agent.NewRuntime(agent.RuntimeOptions{Engine: eng, Logger: warnLogger(), Agents: []*agent.Agent{{
		Name: "demo", Instructions: "You refund payments of ACME's customers.", Model: model, Actions: []string{"payments.*"}}}})
}

// warnLogger logs what went wrong, to standard error with the progress
// bars; the rest is dropped.
func warnLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// messageAnswer is the part of a chat answer the scenario reads: a run, or
// a text decision.
type messageAnswer struct {
	Run *struct {
		ID          string   `json:"id"`
		Status      string   `json:"status"`
		ProposalIDs []string `json:"proposal_ids"`
	} `json:"run"`
	ProposalDecision *struct {
		Status   string `json:"status"`
		Proposal struct {
			Status string `json:"status"`
		} `json:"proposal"`
	} `json:"proposal_decision"`
}

// runAnswer is GET …/runs/{run_id}'s answer.
type runAnswer struct {
	Run struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	} `json:"run"`
}

// turnTimes is when one turn's steps happened.
type turnTimes struct {
	sent, decided, finished time.Time
}

func turns(e *env, sz conversationSizes) ([]Figure, error) {
	st, _, rt, closeStore, err := e.openTraced()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	// The bench's own reads count against it, not against the requests.
	ctx, stop := context.WithCancel(withClass(e.ctx, rtBench))
	defer stop()
	var executed atomic.Int64
	eng, err := newConversationEngine(st, newMetrics(), func() { executed.Add(1) })
	if err != nil {
		return nil, err
	}
	agents, err := newConversationRuntime(eng)
	if err != nil {
		return nil, err
	}
	working := make(chan error, 1)
	go func() { working <- agents.Work(withClass(ctx, rtWorker)) }()
	defer func() { stop(); <-working }()
	api, err := startChatAPI(eng, inlineRuns{agents}, sz.Clients)
	if err != nil {
		return nil, err
	}
	defer api.close()

	n, clients := sz.Turns, sz.Clients
	warm := newBar(clients, "B7 %s: warm-up turns", e.target.title)
	err = parallel(clients, clients, func(_, i int) error {
		_, err := turn(ctx, eng, api, fmt.Sprint("b7-warm-", i), i)
		warm.add(1)
		return err
	})
	warm.done()
	if err != nil {
		return nil, err
	}
	b := newBar(n, "B7 %s: turns, %d clients", e.target.title, clients)
	times := make([]turnTimes, n)
	before := rt.counts()
	notesBefore := rtNotes(rt)
	start := time.Now()
	err = parallel(n, clients, func(_, i int) error {
		t, err := turn(ctx, eng, api, fmt.Sprint("b7-", i), i)
		times[i] = t
		b.add(1)
		return err
	})
	elapsed := time.Since(start)
	trips := rt.counts().sub(before)
	notes := rtNotes(rt) - notesBefore
	b.done()
	if err != nil {
		return nil, err
	}
	counts, err := st.CountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	if want := n + clients; counts[store.StatusSucceeded] != want || executed.Load() != int64(want) {
		return nil, fmt.Errorf("statuses %v and %d executions, want %d succeeded once each", counts, executed.Load(), want)
	}
	lat := make([]time.Duration, n)
	resume := make([]time.Duration, n)
	for i, t := range times {
		lat[i], resume[i] = t.finished.Sub(t.sent), t.finished.Sub(t.decided)
	}
	slices.Sort(lat)
	slices.Sort(resume)
	k := "b7." + e.target.name
	label := fmt.Sprintf("%s turns (message, \"yes\", run resumed and finished), %d clients", thousands(fmt.Sprint(n)), clients)
	figs := []Figure{
		{Key: k + ".turns", Label: label, Value: float64(n) / elapsed.Seconds(), Unit: "turns/s"},
		{Key: k + ".p50", Label: "turn: message sent → run seen finished, p50", Value: ms(pct(lat, 50)), Unit: "ms"},
		{Key: k + ".p99", Label: "turn: message sent → run seen finished, p99", Value: ms(pct(lat, 99)), Unit: "ms"},
		{Key: k + ".resume_p50", Label: "resumption: \"yes\" answered → run seen finished, p50", Value: ms(pct(resume, 50)), Unit: "ms"},
		{Key: k + ".resume_p99", Label: "resumption: \"yes\" answered → run seen finished, p99", Value: ms(pct(resume, 99)), Unit: "ms"},
	}
	if rt != nil {
		const unit = "round trips"
		figs = append(figs,
			Figure{Key: k + ".rt_message", Label: "round trips per turn: the user's message (its request, and the run's steps up to parking)", Value: perOp(trips[rtCall], n), Unit: unit},
			Figure{Key: k + ".rt_decision", Label: "round trips per turn: the text decision (\"yes\")", Value: perOp(trips[rtDecision], n), Unit: unit},
			Figure{Key: k + ".rt_resume", Label: "round trips per turn: the Work loop (claims, the resumed run's steps, the execution)", Value: perOp(trips[rtWorker], n), Unit: unit},
			Figure{Key: k + ".rt_poll", Label: "round trips per turn: the clients' reads of the run (GET …/runs/{run_id})", Value: perOp(trips[rtBench], n), Unit: unit},
			Figure{Key: k + ".rt_other", Label: "other round trips per turn (notifications sent after commit, the engine's wait watcher)", Value: perOp(trips[rtOther], n), Unit: unit,
				Note: fmt.Sprintf("%s of them notification batches", format(perOp(notes, n)))},
			Figure{Key: k + ".conns", Label: fmt.Sprintf("connections the pool opened over the run (of %d)", e.cfg.PGMaxConns), Value: float64(poolConns(st)), Unit: "connections"})
	}
	return figs, nil
}

// rtNotes is the notification batches rt counted (0 without a tracer).
func rtNotes(rt *roundTrips) int64 {
	if rt == nil {
		return 0
	}
	return rt.Notes()
}

// turn is one turn on a fresh thread: the user's message parks a run, the
// approver's "yes" approves its proposal, and the run is watched until the
// Work loop has finished it.
func turn(ctx context.Context, eng *countersign.Engine, api *apiServer, thread string, i int) (turnTimes, error) {
	var t turnTimes
	path := "/v1/threads/" + thread + "/messages"
	t.sent = time.Now()
	var asked messageAnswer
	if err := api.post(ctx, path, agentKey, map[string]string{"text": fmt.Sprintf("refund 40 EUR to c_%d", i)}, &asked); err != nil {
		return t, err
	}
	if asked.Run == nil || asked.Run.Status != string(store.RunParked) || len(asked.Run.ProposalIDs) != 1 {
		return t, fmt.Errorf("thread %s: the message answered %+v, want a run parked on one proposal", thread, asked.Run)
	}
	// Watch before deciding, so that no change of the run goes unseen.
	changed, unwatch := eng.RunHost(runhost.Grant()).WatchRun(workload.Tenant, asked.Run.ID)
	defer unwatch()
	var decided messageAnswer
	if err := api.post(ctx, path, approverKey, map[string]string{"text": "yes"}, &decided); err != nil {
		return t, err
	}
	if d := decided.ProposalDecision; d == nil || d.Status != "applied" || d.Proposal.Status != string(store.StatusApproved) {
		return t, fmt.Errorf("thread %s: \"yes\" answered %+v, want applied and approved", thread, d)
	}
	t.decided = time.Now()
	runPath := "/v1/threads/" + thread + "/runs/" + asked.Run.ID
	deadline := time.NewTimer(turnTimeout)
	defer deadline.Stop()
	poll := time.NewTimer(turnPoll)
	defer poll.Stop()
	for {
		select {
		case <-changed:
		case <-poll.C:
		case <-deadline.C:
			return t, fmt.Errorf("thread %s: run %s did not finish within %s of its approval", thread, asked.Run.ID, turnTimeout)
		case <-ctx.Done():
			return t, ctx.Err()
		}
		var got runAnswer
		if err := api.get(ctx, runPath, agentKey, &got); err != nil {
			return t, err
		}
		switch store.RunStatus(got.Run.Status) {
		case store.RunFinished:
			t.finished = time.Now()
			return t, nil
		case store.RunParked, store.RunRunning:
		default:
			return t, fmt.Errorf("thread %s: run %s ended %s: %s", thread, asked.Run.ID, got.Run.Status, got.Run.Error)
		}
		poll.Reset(turnPoll)
	}
}

// inlineRuns is the runtime as the server's Agents: the runs the chat
// route drives itself (up to parking) count their round trips against the
// user's message, as they run on the server's context, not the request's.
type inlineRuns struct{ *agent.Runtime }

func (r inlineRuns) Drive(ctx context.Context, run *store.Run) (*store.Run, error) {
	return r.Runtime.Drive(withClass(ctx, rtCall), run)
}

// startChatAPI is startAPI's server with agents: the chat route runs the
// default agent, "demo".
func startChatAPI(eng *countersign.Engine, agents server.Agents, clients int) (*apiServer, error) {
	return serveAPI(server.Options{Engine: eng, Metrics: newMetrics(), Agents: agents, DefaultAgent: "demo"}, tagTurns, clients)
}

// tagTurns tags each request of a turn with what it counts against: the
// user's message (the agent's key), the decision (the approver's), the
// clients' reads of the run (a GET).
func tagTurns(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := rtBench
		if r.Method == http.MethodPost {
			c = rtCall
			if r.Header.Get("Authorization") == "Bearer "+approverKey {
				c = rtDecision
			}
		}
		h.ServeHTTP(w, r.WithContext(withClass(r.Context(), c)))
	})
}

// get decodes a 200 answer to a GET into out.
func (a *apiServer) get(ctx context.Context, path, token string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, raw)
	}
	return json.Unmarshal(raw, out)
}

// idleClaims is how many claims idleClaim times.
const idleClaims = 21

// idleClaim times RunHost.ClaimRuns, as the Work loop calls it, while no
// parked run is ready: the median of idleClaims calls. A run claimed is
// an error (none was decided). On PostgreSQL the store's tables are
// analyzed first, as autovacuum would have (the bench's server may run
// without it): with no statistics the planner answers the claim's NOT
// EXISTS from the pending proposals' index, one scan of it per parked
// run.
func idleClaim(ctx context.Context, eng *countersign.Engine, st store.Store, spec string) (time.Duration, error) {
	if p, ok := st.(interface{ Pool() *pgxpool.Pool }); ok {
		schema := strings.TrimPrefix(spec, "postgres:")
		if _, err := p.Pool().Exec(ctx, "ANALYZE "+pgx.Identifier{schema, "runs"}.Sanitize()+", "+pgx.Identifier{schema, "proposals"}.Sanitize()); err != nil {
			return 0, fmt.Errorf("analyze: %w", err)
		}
	}
	lat := make([]time.Duration, idleClaims)
	for i := range lat {
		t0 := time.Now()
		runs, err := eng.RunHost(runhost.Grant()).ClaimRuns(ctx, 16)
		lat[i] = time.Since(t0)
		if err != nil {
			return 0, err
		}
		if len(runs) > 0 {
			return 0, fmt.Errorf("ClaimRuns took run %s (%s), which nothing resumed", runs[0].ID, runs[0].Status)
		}
	}
	slices.Sort(lat)
	return pct(lat, 50), nil
}

// poolUse is a PostgreSQL store's pool: connections in use and open; ok
// is false for a store without a pool of its own (SQLite).
func poolUse(st store.Store) (inUse, open int, ok bool) {
	p, ok := st.(interface{ Pool() *pgxpool.Pool })
	if !ok {
		return 0, 0, false
	}
	s := p.Pool().Stat()
	return int(s.AcquiredConns()), int(s.TotalConns()), true
}

// parkedRuns parks sz.Parked runs and measures what the process holds for
// them: goroutines, Go memory, the store's connections.
func parkedRuns(e *env, sz conversationSizes) ([]Figure, error) {
	st, spec, closeStore, err := e.open()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	ctx := e.ctx
	var executed atomic.Int64
	eng, err := newConversationEngine(st, nil, func() { executed.Add(1) })
	if err != nil {
		return nil, err
	}
	rt, err := newConversationRuntime(eng)
	if err != nil {
		return nil, err
	}
	alice := countersign.Identity{Tenant: workload.Tenant, Actor: "alice"}
	park := func(thread string, i int) error {
		ans, err := eng.PostMessage(ctx, &countersign.Message{Identity: alice, ThreadID: thread, Text: fmt.Sprintf("refund 40 EUR to c_%d", i), Agent: "demo"})
		if err != nil {
			return err
		}
		if ans.Run == nil {
			return fmt.Errorf("thread %s: the message started no run", thread)
		}
		r, err := rt.Drive(ctx, ans.Run)
		if err != nil {
			return err
		}
		if r.Status != store.RunParked {
			return fmt.Errorf("thread %s: run %s is %s (%s), want parked", thread, r.ID, r.Status, r.Error)
		}
		return nil
	}
	n, workers := sz.Parked, sz.Clients
	// Fill the pools (connections, prepared statements, buffers) and the
	// store's bounded memory of rows, with as many runs in at once as the
	// measurement will have.
	_, memStart := goMemory()
	warm := newBar(sz.WarmParked, "B7 %s: park runs to warm up", e.target.title)
	err = parallel(sz.WarmParked, workers, func(_, i int) error {
		err := park(fmt.Sprint("b7-warm-", i), i)
		warm.add(1)
		return err
	})
	warm.done()
	if err != nil {
		return nil, err
	}
	claimBefore, err := idleClaim(ctx, eng, st, spec)
	if err != nil {
		return nil, err
	}
	_, memBefore := goMemory()
	goBefore := runtime.NumGoroutine()
	useBefore, openBefore, pooled := poolUse(st)
	b := newBar(n, "B7 %s: park runs", e.target.title)
	start := time.Now()
	err = parallel(n, workers, func(_, i int) error {
		err := park(fmt.Sprint("b7-", i), i)
		b.add(1)
		return err
	})
	elapsed := time.Since(start)
	b.done()
	if err != nil {
		return nil, err
	}
	_, memAfter := goMemory()
	goAfter := runtime.NumGoroutine()
	useAfter, openAfter, _ := poolUse(st)
	if executed.Load() != 0 {
		return nil, fmt.Errorf("%d refunds executed, want none: no proposal was decided", executed.Load())
	}
	claimAfter, err := idleClaim(ctx, eng, st, spec)
	if err != nil {
		return nil, err
	}
	nn := thousands(fmt.Sprint(n))
	k := "b7." + e.target.name
	figs := []Figure{
		{Key: k + ".parked_rate", Label: fmt.Sprintf("%s runs parked through the engine (PostMessage + Drive), %d at a time", nn, workers),
			Value: float64(n) / elapsed.Seconds(), Unit: "runs/s"},
		{Key: k + ".parked_goroutines_before", Label: "goroutines before the runs were parked", Value: float64(goBefore), Unit: "goroutines"},
		{Key: k + ".parked_goroutines_after", Label: fmt.Sprintf("goroutines with %s runs parked", nn), Value: float64(goAfter), Unit: "goroutines",
			Note: fmt.Sprintf("%+d", goAfter-goBefore)},
		{Key: k + ".parked_bytes_per_run", Label: fmt.Sprintf("Go memory per parked run (heap objects + stacks with %s parked minus before, ÷ runs)", nn),
			Value: (float64(memAfter) - float64(memBefore)) / float64(n), Unit: "bytes",
			Note: fmt.Sprintf("%s MB before, %s MB after", format(float64(memBefore)/(1<<20)), format(float64(memAfter)/(1<<20)))},
		{Key: k + ".parked_claim_ms", Label: fmt.Sprintf("RunHost.ClaimRuns (the Work loop's, on every change and every second) finding none ready among %s parked runs, p50 of %d", thousands(fmt.Sprint(sz.WarmParked+n)), idleClaims),
			Value: ms(claimAfter), Unit: "ms", Note: fmt.Sprintf("%s ms among the first %s", format(ms(claimBefore)), thousands(fmt.Sprint(sz.WarmParked)))},
		{Key: k + ".parked_warm_mb", Label: fmt.Sprintf("Go memory the first %s parked runs left behind (bounded: the pools, the store's memory of rows)", thousands(fmt.Sprint(sz.WarmParked))),
			Value: (float64(memBefore) - float64(memStart)) / (1 << 20), Unit: "MB"},
	}
	if pooled {
		figs = append(figs,
			Figure{Key: k + ".parked_conns_in_use", Label: fmt.Sprintf("store connections in use with %s runs parked", nn), Value: float64(useAfter), Unit: "connections",
				Note: fmt.Sprintf("%d before", useBefore)},
			Figure{Key: k + ".parked_conns_open", Label: fmt.Sprintf("store connections open with %s runs parked (of %d)", nn, e.cfg.PGMaxConns), Value: float64(openAfter), Unit: "connections",
				Note: fmt.Sprintf("%d before", openBefore)})
	}
	return figs, nil
}
