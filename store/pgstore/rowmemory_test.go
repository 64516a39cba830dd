package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
)

// TestRememberedRowIsOnlyAGuess: a Store that remembers a row another
// Store has changed since never writes over the change, and never answers
// from the stale row: a transition the stale row allows is judged again on
// the row as stored, and so is an answer that writes nothing.
func TestRememberedRowIsOnlyAGuess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(t)
	open := func() *Store {
		s, err := Open(ctx, pgtest.WithParam(dsn, "pool_max_conns", "2"), &Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s1, s2 := open(), open()
	now := time.Now()
	create := func(id string, quorum int) {
		t.Helper()
		p := createTestProposal(id, "t_"+id, now)
		p.ReplacementKey, p.Quorum = "", quorum
		if _, err := s1.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
			t.Fatal(err)
		}
	}
	decide := func(s *Store, id, actor string, v store.Verdict) store.DecideOutcome {
		t.Helper()
		res, err := s.Decide(ctx, &store.DecideParams{Tenant: "acme", ID: id, Actor: actor, Verdict: v, Via: "api"})
		if err != nil {
			t.Fatal(err)
		}
		return res.Outcome
	}

	// A write the stale row allows: s1 remembers prp_a pending; s2 rejects
	// it; s1's cancel must see the rejection.
	create("prp_a", 1)
	if got := decide(s2, "prp_a", "bob", store.VerdictRejected); got != store.DecideApplied {
		t.Fatalf("reject: %s", got)
	}
	_, err := s1.Cancel(ctx, &store.CancelParams{Tenant: "acme", ID: "prp_a", Actor: "alice"})
	var ce *store.ConflictError
	if !errors.As(err, &ce) || ce.Got != store.StatusRejected {
		t.Errorf("cancel after another store's rejection: %v, want a conflict with the rejected proposal", err)
	}

	// An answer that writes nothing: s1 remembers prp_b pending with bob's
	// approval (quorum 2); s2 rejects it; bob's approval again on s1 is a
	// conflict with the rejection, not "unchanged".
	create("prp_b", 2)
	if got := decide(s1, "prp_b", "bob", store.VerdictApproved); got != store.DecideApplied {
		t.Fatalf("approve: %s", got)
	}
	if got := decide(s2, "prp_b", "carol", store.VerdictRejected); got != store.DecideApplied {
		t.Fatalf("reject: %s", got)
	}
	if got := decide(s1, "prp_b", "bob", store.VerdictApproved); got != store.DecideConflict {
		t.Errorf("approve again after another store's rejection: %s, want conflict", got)
	}
	p, err := s1.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: "prp_b"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != store.StatusRejected || len(p.Decisions) != 2 {
		t.Errorf("prp_b is %s with %d decisions, want rejected with 2", p.Status, len(p.Decisions))
	}
}

// TestRowMemoryBounded: the memory forgets its oldest rows past its size,
// and never replaces a row by an older version of it.
func TestRowMemoryBounded(t *testing.T) {
	t.Parallel()
	m := newRowMemory(3)
	for i, id := range []string{"a", "b", "c", "d"} {
		m.put(&store.Proposal{Tenant: "acme", ID: id, Version: int64(i + 1)})
	}
	if m.len() != 3 || m.get("acme", "a") != nil || m.get("acme", "d") == nil {
		t.Errorf("after 4 puts in 3 slots: %d rows, a=%v d=%v; want 3, the first forgotten", m.len(), m.get("acme", "a"), m.get("acme", "d"))
	}
	m.put(&store.Proposal{Tenant: "acme", ID: "d", Version: 9})
	m.put(&store.Proposal{Tenant: "acme", ID: "d", Version: 5})
	if got := m.get("acme", "d"); got.Version != 9 {
		t.Errorf("d at version %d, want 9 (an older version does not replace a newer)", got.Version)
	}
	if got := m.get("other", "d"); got != nil {
		t.Errorf("another tenant's d: %+v, want none", got)
	}
	// get returns a copy: changing it changes nothing remembered.
	got := m.get("acme", "d")
	got.Version = 1
	if m.get("acme", "d").Version != 9 {
		t.Error("changing a remembered row's copy changed the memory")
	}
}
