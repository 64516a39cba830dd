package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
)

// BenchmarkDecideConcurrent measures the decision path without HTTP: b.N
// pending proposals, then 32 goroutines deciding them through
// Engine.Decide (a read of the proposal, then its compare-and-set), as fast
// as they can; reported as decisions/s. It is the engine-only probe of
// docs/profiles/postgres.md, where on PostgreSQL concurrent decisions share
// statements (store/pgstore/casgroup.go, readgroup.go).
//
//	go test -run '^$' -bench 'DecideConcurrent/(sqlite|postgres)' -benchtime 6000x .
func BenchmarkDecideConcurrent(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			ctx := context.Background()
			st := bs.open(b)
			noop := mustAction(b, countersign.RawActionSpec{Name: "noop", Hooks: countersign.Hooks{
				Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
					return &countersign.Receipt{ID: "ok"}, nil
				},
			}})
			eng, err := countersign.New(countersign.Options{Store: st, Actions: []*countersign.Action{noop}, Policy: independentRule()})
			if err != nil {
				b.Fatal(err)
			}
			alice := countersign.Identity{Tenant: "acme", Actor: "alice"}
			ids := make([]string, b.N)
			for i := range b.N {
				res, err := eng.Call(ctx, &countersign.Call{Identity: alice, ThreadID: fmt.Sprint("t", i%16), ToolCallID: fmt.Sprint("c", i),
					Action: "noop", Input: json.RawMessage(`{}`)})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = res.ProposalID
			}
			bob := countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, 32)
			b.ResetTimer()
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1) - 1)
						if i >= b.N {
							return
						}
						res, err := eng.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: ids[i], Verdict: countersign.Approve})
						if err == nil && res.Status != countersign.DecideApplied {
							err = fmt.Errorf("decision %d: %s", i, res.Status)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
