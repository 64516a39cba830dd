package countersign_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

// auditAll reads the tenant's whole chain through the engine, a page of
// two at a time, and verifies it.
func auditAll(t *testing.T, e *countersign.Engine, id countersign.Identity) []*cstype.AuditEvent {
	t.Helper()
	var all []*cstype.AuditEvent
	var v auditchain.Verifier
	for after := int64(0); ; {
		page, err := e.Audit(t.Context(), id, after, 2)
		if err != nil {
			t.Fatalf("Audit(after %d): %v", after, err)
		}
		if len(page.Events) > 2 {
			t.Fatalf("Audit(limit 2) = %d events", len(page.Events))
		}
		for _, ae := range page.Events {
			if err := v.Event(ae.Chained()); err != nil {
				t.Fatalf("verify: %v", err)
			}
		}
		all = append(all, page.Events...)
		if page.Next == 0 {
			return all
		}
		after = page.Next
	}
}

// waitSealed waits until the tenant's chain holds n events, for at most a
// minute: a sealer that never seals fails the test rather than hanging it.
func waitSealed(t *testing.T, e *countersign.Engine, id countersign.Identity, n int) []*cstype.AuditEvent {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		all := auditAll(t, e, id)
		if len(all) >= n {
			return all
		}
		select {
		case <-deadline:
			t.Fatalf("the chain holds %d events after a minute, want %d", len(all), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func eventCount(t *testing.T, s store.Store, tenant string) int {
	t.Helper()
	evs, err := s.ListEvents(t.Context(), &store.ListEventsParams{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

func TestAuditNeedsTheOperatorRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for _, id := range []countersign.Identity{tAlice, tCarol, tDave} {
		_, err := h.engine.Audit(t.Context(), id, 0, 0)
		var fe *countersign.ForbiddenError
		if !errors.As(err, &fe) || !errors.Is(err, countersign.ErrForbidden) {
			t.Errorf("Audit as %s: %v, want *ForbiddenError", id.Actor, err)
		}
	}
	if _, err := h.engine.Audit(t.Context(), tBob, 0, 0); err != nil {
		t.Errorf("Audit as an operator: %v", err)
	}
	for _, bad := range [][2]int64{{-1, 0}, {0, -1}, {0, countersign.MaxAuditPage + 1}} {
		if _, err := h.engine.Audit(t.Context(), tBob, bad[0], int(bad[1])); !errors.Is(err, countersign.ErrInvalidCall) {
			t.Errorf("Audit(after %d, limit %d): %v, want ErrInvalidCall", bad[0], bad[1], err)
		}
	}
}

// TestSealerChainsEveryEvent: two engines on one store, as two processes,
// each with a sealer. One holds the lease and seals; when it stops, it
// gives the lease up and the other goes on with the same chain.
func TestSealerChainsEveryEvent(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open})
		other, err := countersign.New(countersign.Options{Store: h.store, Actions: h.engine.Actions(), Now: h.clock.Now,
			Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		opts := countersign.SealerOptions{Interval: 5 * time.Millisecond, LeaseDuration: time.Minute}
		ctx1, stop1 := context.WithCancel(t.Context())
		done1 := make(chan error, 1)
		go func() { done1 <- h.engine.RunSealer(ctx1, opts) }()
		done2 := make(chan error, 1)
		ctx2, stop2 := context.WithCancel(t.Context())
		defer func() { stop2(); <-done2 }()
		go func() { done2 <- other.RunSealer(ctx2, opts) }()

		calls := func(from, n int) {
			for i := from; i < from+n; i++ {
				res := h.call(refundCall(fmt.Sprint("call_", i), countersign.ModeIndependent, fmt.Sprintf(`{"amount":%d,"customer":"c_%d"}`, i+1, i)))
				h.decide(tBob, res.ProposalID, countersign.Reject)
			}
		}
		calls(0, 3)
		first := waitSealed(t, h.engine, tBob, eventCount(t, h.store, "acme"))
		stop1()
		if err := <-done1; !errors.Is(err, context.Canceled) {
			t.Fatalf("RunSealer returned %v, want context.Canceled", err)
		}
		calls(3, 3)
		all := waitSealed(t, h.engine, tBob, eventCount(t, h.store, "acme"))
		if len(all) != eventCount(t, h.store, "acme") || all[len(first)-1].Hash != first[len(first)-1].Hash {
			t.Errorf("the chain after the handover = %d events, want %d continuing the first %d", len(all), eventCount(t, h.store, "acme"), len(first))
		}
		for i, ae := range all {
			if ae.Seq != int64(i+1) {
				t.Fatalf("seq %d at %d", ae.Seq, i)
			}
		}
		// Another tenant's operator reads its own chain, which is empty.
		if page, err := h.engine.Audit(t.Context(), countersign.Identity{Tenant: "other", Actor: "op", Roles: []string{"operator"}}, 0, 0); err != nil || len(page.Events) != 0 {
			t.Errorf("another tenant's chain = %v, %v; want none", page, err)
		}
	})
}

func TestSealerOptionsValidated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for name, o := range map[string]countersign.SealerOptions{
		"Interval":      {Interval: -1},
		"LeaseDuration": {LeaseDuration: -time.Second},
		"Batch":         {Batch: -1},
		"a third":       {Interval: 10 * time.Second, LeaseDuration: 30 * time.Second},
	} {
		_, err := h.engine.NewWorker(countersign.WorkerOptions{Sealer: o})
		if err == nil || !strings.Contains(err.Error(), "WorkerOptions.Sealer") ||
			!strings.Contains(err.Error(), strings.Fields(name)[0]) && name != "a third" || name == "a third" && !strings.Contains(err.Error(), "a third") {
			t.Errorf("%s: NewWorker = %v", name, err)
		}
	}
}

// tamperedChain reads the chain of a store whose event at seq edit (of
// tenant acme) was rewritten behind the sealer's back.
type tamperedChain struct {
	store.Store
	edit int64
}

func (s tamperedChain) ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*cstype.AuditEvent, error) {
	evs, err := s.Store.ListAudit(ctx, params)
	for i, ae := range evs {
		if ae.Seq == s.edit {
			cp := *ae
			cp.Detail = "rewritten"
			evs[i] = &cp
		}
	}
	return evs, err
}

// TestProposalTrail: a proposal's events carry their places in the chain,
// and the chain is checked up to them; whoever may see the proposal reads
// it, nobody else does, and a rewritten event is named.
func TestProposalTrail(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open})
		var ids []string
		for i := range 3 {
			res := h.call(refundCall(fmt.Sprint("call_trail_", i), countersign.ModeIndependent, fmt.Sprintf(`{"amount":%d,"customer":"c_%d"}`, i+1, i)))
			h.decide(tBob, res.ProposalID, countersign.Reject)
			ids = append(ids, res.ProposalID)
		}
		// Not sealed yet: the events are there, with no place in the chain.
		trail, err := h.engine.ProposalTrail(t.Context(), tAlice, ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if len(trail.Events) < 2 || trail.Check != (countersign.ChainCheck{}) {
			t.Fatalf("trail before sealing = %d events, check %+v; want the events and no check", len(trail.Events), trail.Check)
		}
		for _, te := range trail.Events {
			if te.Seq != 0 || te.Verified {
				t.Errorf("event %d before sealing: seq %d, verified %v", te.ID, te.Seq, te.Verified)
			}
		}
		if err := storetest.SealAll(t.Context(), h.store, "sealer-trail"); err != nil {
			t.Fatal(err)
		}
		chain := auditAll(t, h.engine, tBob)
		trail, err = h.engine.ProposalTrail(t.Context(), tAlice, ids[1])
		if err != nil {
			t.Fatal(err)
		}
		last := trail.Events[len(trail.Events)-1].Seq
		if c := trail.Check; c.From != 1 || c.To != last || c.Through != last || c.Break != nil {
			t.Errorf("check = %+v, want seq 1 through %d, holding", c, last)
		}
		for _, te := range trail.Events {
			if te.Seq == 0 || !te.Verified || te.ProposalID != ids[1] || *chain[te.Seq-1] != *te.AuditEvent {
				t.Errorf("event %d: %+v verified %v, want its place in the chain, verified", te.ID, te.AuditEvent, te.Verified)
			}
		}

		// The proposal's readers only.
		for _, who := range []countersign.Identity{tEve, tDave} {
			_, err := h.engine.ProposalTrail(t.Context(), who, ids[1])
			if !errors.Is(err, countersign.ErrForbidden) && !errors.Is(err, countersign.ErrNotFound) {
				t.Errorf("ProposalTrail by %s/%s, who may not see the proposal: %v", who.Tenant, who.Actor, err)
			}
		}

		// An event of another proposal before it is rewritten: the chain
		// holds up to it, and from there on nothing is verified.
		edit := trail.Events[0].Seq - 1
		tampered, err := countersign.New(countersign.Options{Store: tamperedChain{h.store, edit}, Actions: h.engine.Actions(), Now: h.clock.Now,
			Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		trail, err = tampered.ProposalTrail(t.Context(), tAlice, ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if c := trail.Check; c.Break == nil || c.Break.Seq != edit || c.Through != edit-1 || !strings.Contains(c.Break.Reason, "hash does not match") {
			t.Errorf("check with seq %d rewritten = %+v, want broken there", edit, c)
		}
		for _, te := range trail.Events {
			if te.Verified {
				t.Errorf("event at seq %d verified past a break at %d", te.Seq, edit)
			}
		}

		// Bounded: with room for 2 events, the check starts just before the
		// proposal's first event and says so.
		tampered.SetTrailCheck(2)
		trail, err = tampered.ProposalTrail(t.Context(), tAlice, ids[2])
		if err != nil {
			t.Fatal(err)
		}
		first := trail.Events[0].Seq
		if c := trail.Check; c.From != first-1 || c.To != first || c.Through != first || c.Break != nil {
			t.Errorf("bounded check = %+v, want seq %d through %d, holding (the rewritten seq %d lies before)", c, first-1, first, edit)
		}
		if !trail.Events[0].Verified || trail.Events[len(trail.Events)-1].Verified {
			t.Errorf("bounded: the first event verified %v, the last %v; want true, false (beyond the bound)", trail.Events[0].Verified, trail.Events[len(trail.Events)-1].Verified)
		}
	})
}
