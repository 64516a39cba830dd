package storetest

import (
	"errors"
	"testing"

	"github.com/countersign/countersign/store"
)

func testSettleMany(t *testing.T, newStore Factory) {
	t.Run("EachItemStandsAlone", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		a, b, c := fx.claimed(), fx.claimed(), fx.claimed()
		ok1 := settleParams(a, store.StatusSucceeded)
		ok1.Executed, ok1.Receipt = ptr(true), "rcpt_a"
		stale := settleParams(b, store.StatusSucceeded)
		stale.Fence.Generation++ // a lease that is not the current one
		ok2 := settleParams(c, store.StatusFailed)
		ok2.Executed, ok2.Error = ptr(true), ptr("declined")
		missing := &store.SettleParams{Tenant: tenant, ID: "prp_missing", Status: store.StatusSucceeded}

		results, errs, err := fx.store.SettleMany(fx.ctx, []*store.SettleParams{ok1, stale, ok2, missing})
		if err != nil {
			t.Fatalf("SettleMany: %v", err)
		}
		if len(results) != 4 || len(errs) != 4 {
			t.Fatalf("SettleMany returned %d results and %d errors, want 4 and 4", len(results), len(errs))
		}
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("settling a and c: %v, %v", errs[0], errs[2])
		}
		requireStatus(t, results[0].Proposal, store.StatusSucceeded)
		requireStatus(t, results[2].Proposal, store.StatusFailed)
		if !results[0].Changed || results[0].From != store.StatusExecuting {
			t.Errorf("result a = %+v, want changed from executing", results[0])
		}
		requireLeaseLost(t, errs[1])
		requireStatus(t, fx.get(b), store.StatusExecuting)
		if !errors.Is(errs[3], store.ErrNotFound) {
			t.Errorf("missing item: %v, want ErrNotFound", errs[3])
		}
		requireSameProposal(t, fx.get(a), results[0].Proposal)
		if got := fx.get(a).Outcome; got == nil || got.Receipt != "rcpt_a" {
			t.Errorf("outcome of a = %+v", got)
		}
		// Each settled proposal admitted its outcome message once.
		seen := map[string]int{}
		threads := map[string]bool{a.ThreadID: true, b.ThreadID: true, c.ThreadID: true}
		for th := range threads {
			for _, m := range fx.messages(th) {
				seen[m.ProposalID]++
			}
		}
		if seen[a.ID] != 1 || seen[c.ID] != 1 || seen[b.ID] != 0 {
			t.Errorf("outcome messages per proposal = %v, want a and c once, b never", seen)
		}
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		results, errs, err := fx.store.SettleMany(fx.ctx, nil)
		if err != nil || len(results) != 0 || len(errs) != 0 {
			t.Fatalf("SettleMany(nil) = %v, %v, %v", results, errs, err)
		}
	})
}
