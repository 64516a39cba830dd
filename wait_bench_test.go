package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/sqlitestore"
)

// BenchmarkWaitMemory measures what a blocked wait-mode call costs: 2,000
// calls wait, and the Go runtime's live heap objects plus goroutine stacks
// (after GCs until they stop shrinking, as a blocked goroutine's stack halves
// per GC while its frames use less than a quarter of it) are compared with
// the same before the first call. Reported as bytes/waiter, and the stacks'
// part as stack/waiter. On SQLite the calls before the wait grow each stack
// far more than on memstore, so what the waiting frames keep decides how far
// it shrinks back.
func BenchmarkWaitMemory(b *testing.B) {
	for _, s := range []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"memory", func(b *testing.B) store.Store { return memstore.New(nil) }},
		{"sqlite", func(b *testing.B) store.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "wait.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st
		}},
	} {
		b.Run(s.name, func(b *testing.B) {
			const n = 2000
			for b.Loop() {
				created := make(chan struct{}, n)
				e := benchWaitEngine(b, &createSignal{Store: s.open(b), created: created})
				ctx, cancel := context.WithCancel(context.Background())
				before, stacksBefore := settledMemory()
				var wg sync.WaitGroup
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _ = e.Call(ctx, &countersign.Call{Identity: waitAlice, ThreadID: fmt.Sprint("t", i%64), ToolCallID: fmt.Sprint("w", i),
							Action: "noop", Input: json.RawMessage(`{}`)})
					}()
				}
				for range n {
					<-created
				}
				time.Sleep(100 * time.Millisecond) // the last waiters block
				blocked, stacksBlocked := settledMemory()
				cancel()
				wg.Wait()
				b.ReportMetric((float64(blocked)-float64(before))/n, "bytes/waiter")
				b.ReportMetric((float64(stacksBlocked)-float64(stacksBefore))/n, "stack/waiter")
			}
		})
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

// settledMemory is the live heap objects plus goroutine stacks, and the
// stacks alone, after GCs until the total stops shrinking (at most 10).
func settledMemory() (total, stacks uint64) {
	read := func() (uint64, uint64) {
		runtime.GC()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64() + s[1].Value.Uint64(), s[1].Value.Uint64()
	}
	total, stacks = read()
	for range 10 {
		t, st := read()
		if t >= total*99/100 {
			if t < total {
				return t, st
			}
			return total, stacks
		}
		total, stacks = t, st
	}
	return total, stacks
}
