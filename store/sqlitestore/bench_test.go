package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/countersign/countersign/store/storetest"
)

// Each write commits with synchronous=FULL, so these figures include an
// fsync per transaction and depend on the disk.

// BenchmarkStore runs the shared store benchmarks (create, decide, claim,
// batch claim), each on a fresh file.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func BenchmarkListProposals(b *testing.B) {
	s, c, _ := freshB(b)
	ctx := context.Background()
	for i := range 2000 {
		if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: proposal(c, "t1", fmt.Sprint("th", i%10))}); err != nil {
			b.Fatal(err)
		}
		c.Advance(time.Millisecond)
	}
	page, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", Limit: 1000})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t1", Limit: 50, After: page.Next}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimBatchLimits claims from an empty store with the same limit
// every time and with a limit that changes every time, as the worker's free
// slots do. The claim's LIMIT reaches the planner as a bound value only if
// it is written `LIMIT ?`: SQLite then prepares the statement again
// whenever the value changes (docs/profiles/scale.md, change 14).
func BenchmarkClaimBatchLimits(b *testing.B) {
	for _, c := range []struct {
		name  string
		limit func(i int) int
	}{
		{"same", func(int) int { return 8 }},
		{"changing", func(i int) int { return 1 + i%8 }},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, _, _ := freshB(b)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				if _, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w", Limit: c.limit(i), LeaseDuration: time.Minute}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
