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
