package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/workload"
	"github.com/countersign/countersign/store"
)

// approvers is how many goroutines approve the waiters in B5.
const approvers = 32

// idleWindow is how long B5 watches the blocked waiters for CPU.
const idleWindow = 5 * time.Second

func init() {
	register(scenario{ID: "B5", order: 50, perStore: true,
		Title: "Waiting: concurrent wait-mode calls in one process",
		Method: fmt.Sprintf("N goroutines each make one wait-mode call (countersign.Call, the no-op action, Mode wait, the engine's default WaitPoll); "+
			"the call stores its proposal and blocks. With all N blocked: memory is the Go runtime's (runtime/metrics: live heap objects + "+
			"goroutine stacks, after forced GCs until the total stops shrinking — a blocked goroutine's stack halves per GC down to what it uses — "+
			"and, separately, after a single GC) minus the same before the first call, ÷ N; RSS is /proc/self/status VmRSS, same difference; "+
			"idle CPU is this process's user+system time (getrusage) over %s of doing nothing, and store reads are counted over the same window. "+
			"Then %d goroutines approve all N through the same engine's Decide, as fast as they can, one decision per proposal (no batching: "+
			"each is its own compare-and-set, as N humans' clicks would be). A waiter counts as woken when its Execute hook is entered (it saw "+
			"its approval, claimed it and is executing). Wake-all runs from the moment the last approval committed (the store's Decide "+
			"returned) to the moment the last waiter was woken; per-waiter latency from its own approval's commit to its Execute; "+
			"every Call must return succeeded.", idleWindow, approvers),
		run: waiting})
}

// waiter is one wait-mode call of B5.
type waiter struct {
	id        string
	committed atomic.Int64 // its approval's commit (unix ns)
	woken     atomic.Int64 // its Execute was entered
	returned  atomic.Int64 // its Call returned
	free      func()       // frees its creation slot
	once      sync.Once
}

func (w *waiter) release() { w.once.Do(w.free) }

type waiterKey struct{}

// waitStore counts reads and records, per waiter, its proposal and the
// commit of its approval.
type waitStore struct {
	store.Store
	byID    sync.Map // proposal id → *waiter
	reads   atomic.Int64
	created func(*waiter)
}

func (s *waitStore) Unwrap() store.Store { return s.Store }

func (s *waitStore) CreateProposal(ctx context.Context, p *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	res, err := s.Store.CreateProposal(ctx, p)
	if w, ok := ctx.Value(waiterKey{}).(*waiter); ok && err == nil {
		w.id = res.Proposal.ID
		s.byID.Store(w.id, w)
		s.created(w)
		w.release()
	}
	return res, err
}

func (s *waitStore) Decide(ctx context.Context, p *store.DecideParams) (*store.DecideResult, error) {
	res, err := s.Store.Decide(ctx, p)
	if v, ok := s.byID.Load(p.ID); ok && err == nil {
		v.(*waiter).committed.Store(time.Now().UnixNano())
	}
	return res, err
}

func (s *waitStore) GetProposal(ctx context.Context, p *store.GetProposalParams) (*store.Proposal, error) {
	s.reads.Add(1)
	return s.Store.GetProposal(ctx, p)
}

func (s *waitStore) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*store.Event, error) {
	s.reads.Add(1)
	return s.Store.ListEvents(ctx, p)
}

func (s *waitStore) ListProposals(ctx context.Context, p *store.ListProposalsParams) (*store.ProposalPage, error) {
	s.reads.Add(1)
	return s.Store.ListProposals(ctx, p)
}

// waitEngine is newEngine's engine (one no-op action asked of role:finance)
// in wait mode, with an Execute hook that knows which proposal it runs.
func waitEngine(st store.Store, onExecute func(proposalID string)) (*countersign.Engine, error) {
	noop, err := countersign.NewRawAction(countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			onExecute(req.ProposalID)
			return &countersign.Receipt{ID: "ok"}, nil
		},
	}})
	if err != nil {
		return nil, err
	}
	return countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeWait}}}})
}

// goMemory is the Go runtime's live heap objects plus goroutine stacks,
// after one forced GC (first) and after as many (up to 10) as it takes to stop
// shrinking (settled): each GC halves the stack of a goroutine that uses less
// than a quarter of it, so a waiter's stack, grown by the store calls that
// preceded its wait, shrinks over the first few cycles of its wait.
func goMemory() (first, settled uint64) {
	read := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
		metrics.Read(s)
		if os.Getenv("B5_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "heap objects %d, stacks %d, goroutines %d, at %s\n", s[0].Value.Uint64(), s[1].Value.Uint64(), runtime.NumGoroutine(), time.Now().Format("05.000"))
		}
		return s[0].Value.Uint64() + s[1].Value.Uint64()
	}
	first = read()
	settled = first
	for range 10 {
		m := read()
		if m >= settled*99/100 {
			return first, min(settled, m)
		}
		settled = m
	}
	return first, settled
}

// rss is the process's resident set (VmRSS), in bytes.
func rss() uint64 { return procRSS(os.Getpid()) }

// cpuTime is the process's user + system time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func waiting(e *env) ([]Figure, error) {
	raw, _, closeStore, err := e.open()
	if err != nil {
		return nil, err
	}
	defer closeStore()
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	n := e.cfg.Waiters
	ws := make([]*waiter, n)
	for i := range ws {
		ws[i] = &waiter{}
	}
	var woken atomic.Int64
	creating := newBar(n, "B5 %s: create waiters", e.target.title)
	st := &waitStore{Store: raw, created: func(*waiter) { creating.add(1) }}
	eng, err := waitEngine(st, func(id string) {
		if v, ok := st.byID.Load(id); ok {
			v.(*waiter).woken.Store(time.Now().UnixNano())
			woken.Add(1)
		}
	})
	if err != nil {
		return nil, err
	}
	alice := countersign.Identity{Tenant: workload.Tenant, Actor: "alice"}
	bob := countersign.Identity{Tenant: workload.Tenant, Actor: "bob", Roles: []string{"finance"}}

	// Warm the engine and the store up with one call, so that the baseline
	// holds what any call needs once (connections, prepared statements).
	if err := warmUp(ctx, eng, alice, bob); err != nil {
		return nil, err
	}
	_, before := goMemory()
	rssBefore := rss()

	type outcome struct {
		res *countersign.Result
		err error
	}
	results := make([]outcome, n)
	var calls sync.WaitGroup
	// At most 64 creations in flight, so that the store's pool and writer
	// are not what is measured; the waiters themselves all block at once.
	slots := make(chan struct{}, 64)
	for i, w := range ws {
		slots <- struct{}{}
		w.free = func() { <-slots }
		calls.Add(1)
		go func() {
			defer calls.Done()
			res, err := eng.Call(context.WithValue(ctx, waiterKey{}, w), &countersign.Call{Identity: alice, ThreadID: fmt.Sprint("t", i%64),
				ToolCallID: fmt.Sprint("w", i), Action: "noop", Input: json.RawMessage(`{}`), Mode: countersign.ModeWait})
			w.returned.Store(time.Now().UnixNano())
			w.release() // if the creation failed
			results[i] = outcome{res, err}
		}()
	}
	for range cap(slots) {
		slots <- struct{}{}
	}
	creating.done()
	// Every proposal exists; give the last waiters time to block.
	time.Sleep(500 * time.Millisecond)
	for i, w := range ws {
		if w.returned.Load() != 0 || w.id == "" {
			stop()
			calls.Wait()
			return nil, fmt.Errorf("waiter %d returned before its approval: %+v", i, results[i])
		}
	}
	blockedFirst, blocked := goMemory()
	rssBlocked := rss()
	readsBefore, cpuBefore, idleStart := st.reads.Load(), cpuTime(), time.Now()
	time.Sleep(idleWindow)
	idleCPU := cpuTime() - cpuBefore
	idleReads := st.reads.Load() - readsBefore
	idleElapsed := time.Since(idleStart)

	// Approve them all, concurrently.
	approving := newBar(n, "B5 %s: approve", e.target.title)
	waking := newBar(n, "B5 %s: wake", e.target.title)
	wakeDone := make(chan struct{})
	go func() {
		defer close(wakeDone)
		for int(woken.Load()) < n && ctx.Err() == nil {
			waking.set(int(woken.Load()))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	err = parallel(n, approvers, func(_, i int) error {
		res, err := eng.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: ws[i].id, Verdict: countersign.Approve})
		if err != nil {
			return err
		}
		if res.Status != countersign.DecideApplied {
			return fmt.Errorf("decision on %s: %s", ws[i].id, res.Status)
		}
		approving.add(1)
		return nil
	})
	approving.done()
	if err != nil {
		stop()
		calls.Wait()
		return nil, err
	}
	allReturned := make(chan struct{})
	go func() { calls.Wait(); close(allReturned) }()
	select {
	case <-allReturned:
	case <-time.After(5 * time.Minute):
		stop()
		<-allReturned
		return nil, fmt.Errorf("the waiters did not all return within 5 minutes of their approvals (%d woken)", woken.Load())
	}
	<-wakeDone
	waking.set(n)
	waking.done()
	for i, r := range results {
		if r.err != nil {
			return nil, fmt.Errorf("waiter %d: %w", i, r.err)
		}
		if r.res.Status != countersign.ResultSucceeded {
			return nil, fmt.Errorf("waiter %d: status %s, want succeeded", i, r.res.Status)
		}
	}
	var lastCommit, lastWoken, lastReturned int64
	lat := make([]time.Duration, 0, n)
	for i, w := range ws {
		c, k, r := w.committed.Load(), w.woken.Load(), w.returned.Load()
		if c == 0 || k == 0 {
			return nil, fmt.Errorf("waiter %d: approval committed at %d, woken at %d", i, c, k)
		}
		lastCommit, lastWoken, lastReturned = max(lastCommit, c), max(lastWoken, k), max(lastReturned, r)
		lat = append(lat, time.Duration(k-c))
	}
	slices.Sort(lat)

	k := "b5." + e.target.name
	nn := thousands(fmt.Sprint(n))
	perWaiter := func(after, before uint64) float64 { return (float64(after) - float64(before)) / float64(n) }
	return []Figure{
		{Key: k + ".bytes_per_waiter", Label: fmt.Sprintf("Go memory per waiter (runtime/metrics heap objects + goroutine stacks, after GCs until they stop shrinking, %s blocked minus before, ÷ N)", nn),
			Value: perWaiter(blocked, before), Unit: "bytes"},
		{Key: k + ".bytes_per_waiter_first_gc", Label: "the same after one GC only (stacks not yet shrunk)",
			Value: perWaiter(blockedFirst, before), Unit: "bytes"},
		{Key: k + ".rss_per_waiter", Label: fmt.Sprintf("RSS per waiter (VmRSS with %s blocked minus before, ÷ N)", nn),
			Value: perWaiter(rssBlocked, rssBefore), Unit: "bytes"},
		{Key: k + ".idle_cpu", Label: fmt.Sprintf("process CPU while %s waiters are blocked and nothing happens (getrusage over %s)", nn, idleWindow),
			Value: 100 * idleCPU.Seconds() / idleElapsed.Seconds(), Unit: "% of a core"},
		{Key: k + ".idle_reads", Label: fmt.Sprintf("store reads while %s waiters are idle", nn),
			Value: float64(idleReads) / idleElapsed.Seconds(), Unit: "reads/s"},
		{Key: k + ".wake_all_ms", Label: fmt.Sprintf("last approval committed → last of %s waiters woken (Execute entered)", nn),
			Value: ms(time.Duration(lastWoken - lastCommit)), Unit: "ms"},
		{Key: k + ".wake_p50", Label: "its approval committed → waiter woken, p50", Value: ms(pct(lat, 50)), Unit: "ms"},
		{Key: k + ".wake_p99", Label: "its approval committed → waiter woken, p99", Value: ms(pct(lat, 99)), Unit: "ms"},
		{Key: k + ".all_returned_ms", Label: fmt.Sprintf("last approval committed → last of %s Calls returned succeeded", nn),
			Value: ms(time.Duration(lastReturned - lastCommit)), Unit: "ms"},
	}, nil
}

// warmUp makes one wait-mode call and approves it.
func warmUp(ctx context.Context, eng *countersign.Engine, alice, bob countersign.Identity) error {
	done := make(chan error, 1)
	call := &countersign.Call{Identity: alice, ThreadID: "warm", ToolCallID: "warm", Action: "noop", Input: json.RawMessage(`{}`), Mode: countersign.ModeWait}
	go func() {
		res, err := eng.Call(ctx, call)
		if err == nil && res.Status != countersign.ResultSucceeded {
			err = fmt.Errorf("warm-up call: %s", res.Status)
		}
		done <- err
	}()
	for {
		page, err := eng.List(ctx, bob, countersign.ListParams{ThreadID: "warm", Limit: 1})
		if err != nil {
			return err
		}
		if len(page.Proposals) == 1 {
			if _, err := eng.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: page.Proposals[0].ID, Verdict: countersign.Approve}); err != nil {
				return err
			}
			return <-done
		}
		time.Sleep(10 * time.Millisecond)
	}
}
