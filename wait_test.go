package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/teststores"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"go.uber.org/goleak"
)

var (
	waitAlice = countersign.Identity{Tenant: "acme", Actor: "alice"}
	waitBob   = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
)

// countingStore counts proposal reads.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (s *countingStore) GetProposal(ctx context.Context, p *store.GetProposalParams) (*cstype.Proposal, error) {
	s.reads.Add(1)
	return s.Store.GetProposal(ctx, p)
}

// waitEngine is an engine whose every call waits for role:finance.
func waitEngine(t *testing.T, st store.Store, poll time.Duration, executed *atomic.Int64) *countersign.Engine {
	t.Helper()
	noop := mustAction(t, countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			executed.Add(1)
			return &countersign.Receipt{ID: "ok"}, nil
		},
	}})
	e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop}, WaitPoll: poll,
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeWait}}}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func waitCall(tool string) *countersign.Call {
	return &countersign.Call{Identity: waitAlice, ThreadID: "t", ToolCallID: tool, Action: "noop", Input: json.RawMessage(`{}`)}
}

// pendingIDs waits until n proposals are pending and returns them.
func pendingIDs(t *testing.T, e *countersign.Engine, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ids []string
		params := countersign.ListParams{Statuses: []cstype.Status{cstype.StatusPending}}
		for {
			page, err := e.List(context.Background(), waitBob, params)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range page.Proposals {
				ids = append(ids, p.ID)
			}
			if page.Next == "" {
				break
			}
			params.After = page.Next
		}
		if len(ids) >= n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d proposals pending, want %d", len(ids), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A decision taken by another engine (another process: nothing signals
// across) wakes the waiter within about WaitPoll, and idle waiters cost no
// store reads of their own.
func TestWaiterWokenByAnotherEngine(t *testing.T) {
	t.Parallel()
	const poll = 100 * time.Millisecond
	for name, open := range map[string]func(t *testing.T) (store.Store, store.Store){
		"memory": func(t *testing.T) (store.Store, store.Store) { s := memstore.New(nil); return s, s },
		"sqlite": func(t *testing.T) (store.Store, store.Store) { return teststores.SQLitePair(t, time.Now) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s1, s2 := open(t)
			counted := &countingStore{Store: s1}
			var executed atomic.Int64
			waiting, deciding := waitEngine(t, counted, poll, &executed), waitEngine(t, s2, poll, &executed)
			const n = 20
			results := make(chan *countersign.Result, n)
			for i := range n {
				go func() {
					res, err := waiting.Call(context.Background(), waitCall(fmt.Sprint("c", i)))
					if err != nil {
						t.Error(err)
					}
					results <- res
				}()
			}
			ids := pendingIDs(t, deciding, n)
			time.Sleep(2 * poll) // every waiter is blocked
			before := counted.reads.Load()
			time.Sleep(5 * poll)
			if reads := counted.reads.Load() - before; reads > 0 {
				t.Errorf("%d idle waiters read their proposals %d times in %v, want 0 (the watcher reads events)", n, reads, 5*poll)
			}
			start := time.Now()
			for _, id := range ids {
				if _, err := deciding.Decide(context.Background(), &countersign.Decision{Identity: waitBob, ProposalID: id, Verdict: countersign.Approve}); err != nil {
					t.Fatal(err)
				}
			}
			for range n {
				select {
				case res := <-results:
					if res == nil || res.Status != countersign.ResultSucceeded {
						t.Fatalf("result %+v, want succeeded", res)
					}
				case <-time.After(100 * poll):
					t.Fatalf("waiters not woken within %v of the decisions", 100*poll)
				}
			}
			// The watcher wakes them within a WaitPoll or so; the bound only
			// has to tell that from the last-resort re-read (300 WaitPolls
			// or more), on a busy machine under the race detector.
			if took := time.Since(start); took > 100*poll {
				t.Errorf("woken %v after the decisions in another engine, want about WaitPoll (%v), far less than the last-resort re-read", took, poll)
			}
			if got := executed.Load(); got != n {
				t.Errorf("%d executions, want %d", got, n)
			}
		})
	}
}

// Many waiters, decided concurrently by this engine and by another one,
// while others start waiting: every one is woken, none waits for the
// backstop re-read (600 polls), and none executes twice.
func TestNoMissedWakeups(t *testing.T) {
	t.Parallel()
	const poll = 10 * time.Millisecond // the backstop is at least 3s away
	st := memstore.New(nil)
	var executed atomic.Int64
	local, remote := waitEngine(t, st, poll, &executed), waitEngine(t, st, poll, &executed)
	const n = 300
	var wg sync.WaitGroup
	start := time.Now()
	var slowest atomic.Int64
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			res, err := local.Call(context.Background(), waitCall(fmt.Sprint("w", i)))
			if err != nil || res.Status != countersign.ResultSucceeded {
				t.Errorf("call %d: %+v, %v", i, res, err)
			}
		}()
		go func() {
			defer wg.Done()
			// Decide as soon as the proposal exists, racing the waiter's
			// registration: half here, half in the other engine.
			e := local
			if i%2 == 1 {
				e = remote
			}
			for {
				res, err := e.Call(context.Background(), &countersign.Call{Identity: waitAlice, ThreadID: "t", ToolCallID: fmt.Sprint("w", i),
					Action: "noop", Input: json.RawMessage(`{}`), WaitTimeout: time.Nanosecond})
				if err != nil {
					t.Error(err)
					return
				}
				if res.ProposalID == "" {
					continue
				}
				t0 := time.Now()
				if _, err := e.Decide(context.Background(), &countersign.Decision{Identity: waitBob, ProposalID: res.ProposalID, Verdict: countersign.Approve}); err != nil {
					t.Error(err)
				}
				for {
					p, err := e.Proposal(context.Background(), waitAlice, res.ProposalID)
					if err != nil || p.Status.Terminal() {
						break
					}
					time.Sleep(time.Millisecond)
				}
				d := int64(time.Since(t0))
				for old := slowest.Load(); d > old && !slowest.CompareAndSwap(old, d); old = slowest.Load() {
				}
				return
			}
		}()
	}
	wg.Wait()
	if got := executed.Load(); got != n {
		t.Errorf("%d executions, want %d", got, n)
	}
	if d := time.Duration(slowest.Load()); d > 2*time.Second {
		t.Errorf("slowest waiter settled %v after its approval: a wake-up was missed (took %v in all)", d, time.Since(start))
	}
}

// When the last waiter leaves, the watcher stops: no goroutine outlives the
// waits, whether they end by a decision, a timeout or a cancellation.
func TestWaitersLeaveNoGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	st := memstore.New(nil)
	var executed atomic.Int64
	e := waitEngine(t, st, 20*time.Millisecond, &executed)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := waitCall(fmt.Sprint("g", i))
			cctx := context.Background()
			switch i % 3 {
			case 1:
				c.WaitTimeout = 50 * time.Millisecond
			case 2:
				cctx = ctx
			}
			res, err := e.Call(cctx, c)
			switch i % 3 {
			case 0:
				if err != nil || res.Status != countersign.ResultSucceeded {
					t.Errorf("decided call: %+v, %v", res, err)
				}
			case 1:
				if err != nil || res.Status != countersign.ResultPending {
					t.Errorf("timed-out call: %+v, %v, want pending", res, err)
				}
			case 2:
				if err == nil || res == nil || res.Status != countersign.ResultPending {
					t.Errorf("cancelled call: %+v, %v, want pending and an error", res, err)
				}
			}
		}()
	}
	ids := pendingIDs(t, e, 30)
	for _, id := range ids {
		p, err := e.Proposal(context.Background(), waitAlice, id)
		if err != nil {
			t.Fatal(err)
		}
		if isDecided(p.ToolCallID) {
			if _, err := e.Decide(context.Background(), &countersign.Decision{Identity: waitBob, ProposalID: id, Verdict: countersign.Approve}); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	wg.Wait()
}

// isDecided says whether TestWaitersLeaveNoGoroutines decides the call g<i>:
// those with i%3 == 0.
func isDecided(tool string) bool {
	var i int
	if _, err := fmt.Sscanf(tool, "g%d", &i); err != nil {
		return false
	}
	return i%3 == 0
}

// TestBlockedWaiterStack: a wait-mode call blocked in Engine.Call keeps a
// small stack. The runtime shrinks a stack only while it uses under a
// quarter of it, so a blocked waiter's frames (its caller's, Call's,
// await's, the select's) must stay under 1 KB for its stack to be 4 KB:
// past that each of B5's 10,000 waiters pays 8 KB. This failed when
// await's own frame grew to 464 bytes (12.3 KB per waiter in B5).
func TestBlockedWaiterStack(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector enlarges every frame; make test-race runs this test again without it")
	}
	const n = 1000
	var executed atomic.Int64
	e := waitEngine(t, memstore.New(nil), time.Hour, &executed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = e.Call(ctx, waitCall(fmt.Sprint("s", i)))
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for blockedInAwait() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waiters blocked", blockedInAwait(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC() // shrinks the stacks that use under a quarter
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	perWaiter := float64(after.StackInuse-before.StackInuse) / n
	cancel()
	wg.Wait()
	t.Logf("stack per blocked waiter: %.0f bytes", perWaiter)
	if perWaiter > 4096*1.1 {
		t.Fatalf("stack per blocked waiter %.0f bytes, want 4 KB: a frame on the blocked path grew", perWaiter)
	}
}

// blockedInAwait counts the goroutines blocked in a select inside await.
func blockedInAwait() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, "countersign.(*Engine).await(") {
			n++
		}
	}
	return n
}
