package sqlitestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// Each write commits with synchronous=FULL, so these figures include an
// fsync per transaction and depend on the disk.

func BenchmarkCreateProposal(b *testing.B) {
	s, c, _ := freshB(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: proposal(c, "t1", "th1")}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	s, c, _ := freshB(b)
	ctx := context.Background()
	ps := make([]*store.Proposal, b.N)
	for i := range ps {
		ps[i] = proposal(c, "t1", "th1")
		if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: ps[i]}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Decide(ctx, &store.DecideParams{Tenant: "t1", ID: ps[i].ID, Actor: "alice", Verdict: store.VerdictApproved}); err != nil {
			b.Fatal(err)
		}
	}
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
