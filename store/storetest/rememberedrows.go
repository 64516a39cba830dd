package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// RememberedRowsAcrossStores checks, on two stores that share one database
// (as two processes do), that a store which remembers a row (a driver may,
// to start a transition from it: internal/rowmemory) never writes over a
// change another store made since, and never answers from its stale copy:
// a transition the stale row allows is judged again on the row as stored,
// and so is an answer that writes nothing. Each case has s1 read or write
// the row first, so that a driver that remembers rows remembers it; then
// s2 changes it; then s1 acts on it. A durable driver calls it with two of
// its stores open on the same, otherwise empty, database.
func RememberedRowsAcrossStores(t *testing.T, s1, s2 store.Store) {
	t.Helper()
	ctx := context.Background()
	clock := NewClock(time.Now().Truncate(time.Millisecond))
	fx1 := &fixture{t: t, ctx: ctx, clock: clock, store: s1}
	fx2 := &fixture{t: t, ctx: ctx, clock: clock, store: s2}

	// A write the stale row allows: s1 read a pending proposal; s2 rejects
	// it; s1's cancel must see the rejection.
	a := fx1.createNew()
	fx1.get(a)
	fx2.decide(a, approver, store.VerdictRejected)
	_, err := s1.Cancel(ctx, &store.CancelParams{Tenant: tenant, ID: a.ID, Actor: requester})
	requireConflict(t, err, a.ID, store.StatusRejected, nil, false)

	// An answer that writes nothing: s1 wrote bob's approval (quorum 2);
	// s2 records carol's rejection; bob's approval again on s1 is a
	// conflict with the rejection, not "unchanged".
	b := fx1.createNew(withQuorum(2))
	if res := fx1.decide(b, approver, store.VerdictApproved); res.Outcome != store.DecideApplied {
		t.Fatalf("approve %s: %s", b.ID, res.Outcome)
	}
	if res := fx2.decide(b, approver2, store.VerdictRejected); res.Outcome != store.DecideApplied {
		t.Fatalf("reject %s on the other store: %s", b.ID, res.Outcome)
	}
	if res := fx1.decide(b, approver, store.VerdictApproved); res.Outcome != store.DecideConflict {
		t.Errorf("approve %s again after another store's rejection: %s, want conflict", b.ID, res.Outcome)
	}
	if got := fx1.get(b); got.Status != store.StatusRejected || len(got.Decisions) != 2 {
		t.Errorf("%s is %s with %d decisions, want rejected with 2", b.ID, got.Status, len(got.Decisions))
	}

	// A settlement the stale row allows, after another store settled it:
	// s1 claimed c; s2 settles it under that lease (a worker's settlement
	// that went through another process); s1's own settlement under the
	// same lease writes nothing over it.
	c := fx1.claim(fx1.approved(), longLease)
	first := settleParams(c, store.StatusSucceeded)
	first.Executed, first.Receipt = ptr(true), "rcpt_first"
	if _, errs, err := s2.SettleMany(ctx, []*store.SettleParams{first}); err != nil || errs[0] != nil {
		t.Fatalf("settle %s on the other store: %v %v", c.ID, err, errs)
	}
	second := settleParams(c, store.StatusFailed)
	second.Executed, second.Error = ptr(true), ptr("declined")
	results, errs, err := s1.SettleMany(ctx, []*store.SettleParams{second})
	if err != nil {
		t.Fatalf("SettleMany: %v", err)
	}
	if errs[0] == nil && (results[0] == nil || results[0].Changed) {
		t.Errorf("second settlement of %s: %+v, want it refused or unchanged", c.ID, results[0])
	}
	if got := fx1.get(c); got.Status != store.StatusSucceeded || got.Outcome == nil || got.Outcome.Receipt != "rcpt_first" {
		t.Errorf("%s after two settlements is %s with outcome %+v, want the first settlement's", c.ID, got.Status, got.Outcome)
	}

	// A lost lease the stale row does not show: s1 claimed d (in a batch,
	// under a short lease); it lapses and s2 claims d; s1's settlement under
	// its old lease is refused, and s2's lease stands.
	d := fx1.approved(independent)
	mine := claimedIn(t, fx1.claimBatch(worker, shortLease, 10), d, "s1's batch")
	time.Sleep(shortLease + leaseSlack)
	theirs := claimedIn(t, fx2.claimBatch(worker2, longLease, 10), d, "s2's batch after s1's lease lapsed")
	late := settleParams(mine, store.StatusSucceeded)
	late.Executed = ptr(true)
	if _, errs, err := s1.SettleMany(ctx, []*store.SettleParams{late}); err != nil {
		t.Fatalf("SettleMany: %v", err)
	} else {
		requireLeaseLost(t, errs[0])
	}
	got := fx1.get(d)
	requireStatus(t, got, store.StatusExecuting)
	if got.Lease == nil || got.Lease.Owner != worker2 || got.Lease.Token != theirs.Lease.Token {
		t.Errorf("%s's lease after s1's late settlement: %+v, want s2's", d.ID, got.Lease)
	}

	// A decision judged on a remembered row that another store moved on:
	// s1 remembers e as it created it; s2 records carol's approval (quorum
	// 2); bob's approval judged on s1's remembered version is refused with
	// ErrVersionMoved, writing nothing, and applies once judged on the row
	// as stored.
	r1, ok := store.As[store.Rememberer](s1)
	if !ok {
		return // a driver that remembers nothing judges every decision on the row as stored
	}
	e := fx1.createNew(withQuorum(2))
	mem, ok := r1.RememberedProposal(tenant, e.ID)
	if !ok || mem.Version != e.Version {
		t.Fatalf("RememberedProposal(%s) after its creation = %+v, %v; want version %d", e.ID, mem, ok, e.Version)
	}
	if _, ok := r1.RememberedProposal(otherTenant, e.ID); ok {
		t.Errorf("RememberedProposal(%s) of another tenant found it", e.ID)
	}
	fx2.decide(e, approver2, store.VerdictApproved)
	_, err = s1.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: e.ID, Actor: approver, Verdict: store.VerdictApproved, Via: "api", Version: mem.Version})
	requireErrorIs(t, err, store.ErrVersionMoved)
	stored := fx1.get(e)
	if len(stored.Decisions) != 1 || stored.Status != store.StatusPending {
		t.Fatalf("%s after a decision judged on a past version: %s with %d decisions, want pending with carol's alone", e.ID, stored.Status, len(stored.Decisions))
	}
	res, err := s1.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: e.ID, Actor: approver, Verdict: store.VerdictApproved, Via: "api", Version: stored.Version})
	if err != nil || res.Outcome != store.DecideApplied || res.To != store.StatusApproved {
		t.Fatalf("approve %s judged on the stored version: %+v, %v; want applied, approved", e.ID, res, err)
	}
}

// claimedIn returns p as a batch claimed it, and fails the test if it did
// not.
func claimedIn(t *testing.T, batch []*store.Claimed, p *store.Proposal, what string) *store.Proposal {
	t.Helper()
	for _, cl := range batch {
		if cl.Proposal.ID == p.ID {
			return cl.Proposal
		}
	}
	t.Fatalf("%s did not claim %s", what, p.ID)
	return nil
}
