package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// BenchmarkWaitMemory measures what a blocked wait-mode call costs: 2,000
// calls wait on memstore, and the Go runtime's live heap objects plus
// goroutine stacks (after GCs until they stop shrinking, as a blocked
// goroutine's stack halves per GC down to what it uses) are compared with
// the same before the first call. Reported as bytes/waiter.
func BenchmarkWaitMemory(b *testing.B) {
	const n = 2000
	for b.Loop() {
		st := memstore.New(nil)
		created := make(chan struct{}, n)
		e := benchWaitEngine(b, &createSignal{Store: st, created: created})
		ctx, cancel := context.WithCancel(context.Background())
		before := settledMemory()
		stack0 := stackMem()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = e.Call(ctx, &countersign.Call{Identity: waitAlice, ThreadID: "t", ToolCallID: fmt.Sprint("w", i),
					Action: "noop", Input: json.RawMessage(`{}`)})
			}()
		}
		for range n {
			<-created
		}
		time.Sleep(100 * time.Millisecond) // the last waiters block
		blocked := settledMemory()
		stackB := stackMem()
		cancel()
		wg.Wait()
		b.ReportMetric((float64(blocked)-float64(before))/n, "bytes/waiter")
		b.ReportMetric((float64(stackB)-float64(stack0))/n, "stack/waiter")
	}
}

// createSignal tells created of every proposal stored.
type createSignal struct {
	store.Store
	created chan<- struct{}
}

func (s *createSignal) CreateProposal(ctx context.Context, p *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	res, err := s.Store.CreateProposal(ctx, p)
	s.created <- struct{}{}
	return res, err
}

func benchWaitEngine(b *testing.B, st store.Store) *countersign.Engine {
	noop, err := countersign.NewRawAction(countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: "ok"}, nil
		},
	}})
	if err != nil {
		b.Fatal(err)
	}
	e, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "*", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance"}, Mode: countersign.ModeWait}}}})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// settledMemory is the live heap objects plus goroutine stacks after GCs
// until the total stops shrinking (at most 10).
func settledMemory() uint64 {
	read := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64() + s[1].Value.Uint64()
	}
	m := read()
	for range 10 {
		next := read()
		if next >= m*99/100 {
			return min(m, next)
		}
		m = next
	}
	return m
}

func stackMem() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
