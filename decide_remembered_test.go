package countersign_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/teststores"
	"github.com/countersign/countersign/store"
)

// readCounter is wait_test.go's countingStore with an Unwrap, so that the
// engine still finds the driver's optional interfaces (store.Rememberer
// among them) while the proposal reads are counted.
type readCounter struct{ *countingStore }

func (s readCounter) Unwrap() store.Store { return s.Store }

// enginePair is two engines on two stores that share one database, as two
// processes would, on one clock; the first engine's store counts its
// proposal reads.
type enginePair struct {
	h1, h2 *harness
	reads  *countingStore
}

func newEnginePair(t *testing.T, open teststores.PairOpener, rules []countersign.Rule) *enginePair {
	t.Helper()
	var second store.Store
	ep := &enginePair{}
	ep.h1 = newHarness(t, harnessOpts{rules: rules, open: func(t *testing.T, now func() time.Time) store.Store {
		s1, s2 := open(t, now)
		second = s2
		ep.reads = &countingStore{Store: s1}
		return readCounter{ep.reads}
	}})
	ep.h2 = newHarness(t, harnessOpts{rules: rules,
		open:       func(*testing.T, func() time.Time) store.Store { return second },
		engineOpts: func(o *countersign.Options) { o.Now = ep.h1.clock.Now },
	})
	return ep
}

// pending makes a pending refund through the first engine, whose store
// remembers it as created.
func (ep *enginePair) pending(t *testing.T, tool string) string {
	t.Helper()
	c := refundCall(tool, countersign.ModeIndependent, `{"amount": 12, "customer": "c_1"}`)
	c.ThreadID = "t_" + tool // no call supersedes another
	res := ep.h1.call(c)
	if res.Status != countersign.ResultPending {
		t.Fatalf("call %s: %s, want pending", tool, res.Status)
	}
	return res.ProposalID
}

// TestDecisionOnARememberedRow: a decision on a proposal the store
// remembers is judged on that copy and written without reading the
// proposal; one the copy refuses is judged again on the row as stored, and
// so is one whose row another process moved on meanwhile, where the
// decision is written only to the version it was judged on. Each answer
// is the one a decision on the row as stored gives.
func TestDecisionOnARememberedRow(t *testing.T) {
	t.Parallel()
	teststores.EachPair(t, func(t *testing.T, open teststores.PairOpener) {
		ctx := context.Background()
		quorum2 := []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Quorum: 2}}

		t.Run("ReadsNothing", func(t *testing.T) {
			ep := newEnginePair(t, open, nil)
			pid := ep.pending(t, "c_fast")
			before := ep.reads.reads.Load()
			if dr := ep.h1.decide(tBob, pid, countersign.Approve); dr.Status != countersign.DecideApplied || dr.Proposal.Status != cstype.StatusApproved {
				t.Fatalf("approval: %s, %s; want applied, approved", dr.Status, dr.Proposal.Status)
			}
			if n := ep.reads.reads.Load() - before; n != 0 {
				t.Errorf("a decision on a remembered proposal read it %d times, want 0", n)
			}
			// The same approval again: unchanged, as on the row as stored.
			if dr := ep.h1.decide(tBob, pid, countersign.Approve); dr.Status != countersign.DecideUnchanged {
				t.Errorf("the approval again: %s, want unchanged", dr.Status)
			}
		})

		t.Run("RefusalJudgedOnTheStoredRow", func(t *testing.T) {
			webOnly := []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Channels: []string{"web"}}}
			ep := newEnginePair(t, open, webOnly)
			pid := ep.pending(t, "c_refused")
			for _, d := range []*countersign.Decision{
				{Identity: tDave, ProposalID: pid, Verdict: countersign.Approve},            // may not see it
				{Identity: tBob, ProposalID: pid, Verdict: countersign.Approve, Via: "cli"}, // sees it; not through the CLI
			} {
				before := ep.reads.reads.Load()
				_, err := ep.h1.engine.Decide(ctx, d)
				if !errors.Is(err, countersign.ErrForbidden) {
					t.Fatalf("%s's approval via %q: %v, want forbidden", d.Identity.Actor, d.Via, err)
				}
				if n := ep.reads.reads.Load() - before; n != 1 {
					t.Errorf("%s's refusal read the proposal %d times, want once: judged on the row as stored", d.Identity.Actor, n)
				}
			}
			// Another tenant's approver learns nothing of it.
			if _, err := ep.h1.engine.Decide(ctx, &countersign.Decision{Identity: tEve, ProposalID: pid, Verdict: countersign.Approve}); !errors.Is(err, countersign.ErrForbidden) && !errors.Is(err, countersign.ErrNotFound) {
				t.Fatalf("another tenant's approval: %v, want forbidden or not found", err)
			}
			if p, err := ep.h2.engine.Proposal(ctx, tBob, pid); err != nil || p.Status != cstype.StatusPending || len(p.Decisions) != 0 {
				t.Fatalf("after the refusals: %+v, %v; want pending without decisions", p, err)
			}
		})

		t.Run("MovedOnByAnotherProcess", func(t *testing.T) {
			ep := newEnginePair(t, open, quorum2)
			pid := ep.pending(t, "c_moved")
			// The other process records bob's approval: the first one's
			// copy is a version behind.
			if dr := ep.h2.decide(tBob, pid, countersign.Approve); dr.Status != countersign.DecideApplied {
				t.Fatalf("bob's approval through the other engine: %s", dr.Status)
			}
			if dr := ep.h1.decide(tCarol, pid, countersign.Approve); dr.Status != countersign.DecideApplied || dr.Proposal.Status != cstype.StatusApproved {
				t.Fatalf("carol's approval on a stale copy: %s, %s; want applied, approved", dr.Status, dr.Proposal.Status)
			}
			p, err := ep.h2.engine.Proposal(ctx, tBob, pid)
			if err != nil || p.Status != cstype.StatusApproved || len(p.Decisions) != 2 {
				t.Fatalf("after both approvals: %+v, %v; want approved with 2 decisions", p, err)
			}

			// Rejected by the other process: an approval on the first
			// process's stale copy is a conflict, as on the stored row.
			pid = ep.pending(t, "c_rejected")
			ep.h2.decide(tCarol, pid, countersign.Reject)
			if dr := ep.h1.decide(tBob, pid, countersign.Approve); dr.Status != countersign.DecideConflict || dr.Proposal.Status != cstype.StatusRejected {
				t.Fatalf("an approval after the other process's rejection: %s, %s; want conflict, rejected", dr.Status, dr.Proposal.Status)
			}
		})

		t.Run("AllowedOnlyByTheStoredRow", func(t *testing.T) {
			// The copy predates an escalation another process swept: it
			// does not list the managers, the stored row does.
			ep := newEnginePair(t, open, escalationRules)
			pid := ep.pending(t, "c_escalated")
			ep.h1.clock.Advance(30 * time.Minute)
			if esc, _, err := ep.h2.engine.SweepEscalations(ctx, 10); err != nil || esc != 1 {
				t.Fatalf("the other process's sweep: %d escalated, %v; want 1", esc, err)
			}
			if dr := ep.h1.decide(tMona, pid, countersign.Approve); dr.Status != countersign.DecideApplied {
				t.Fatalf("the manager's approval after the escalation: %s, want applied", dr.Status)
			}
		})
	})
}

// TestRememberedDecisionsRace: two processes' engines decide the same
// proposals at once, each approval given several times over, on copies
// that the other process keeps moving on. Every proposal ends approved
// with exactly its two approvers' decisions, and every answer is applied
// or unchanged.
func TestRememberedDecisionsRace(t *testing.T) {
	t.Parallel()
	teststores.EachPair(t, func(t *testing.T, open teststores.PairOpener) {
		ctx := context.Background()
		rules := []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Quorum: 2}}
		ep := newEnginePair(t, open, rules)
		const n = 24
		ids := make([]string, n)
		for i := range ids {
			ids[i] = ep.pending(t, fmt.Sprintf("c_race_%d", i))
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8*n)
		for _, id := range ids {
			for _, e := range []*countersign.Engine{ep.h1.engine, ep.h2.engine} {
				for _, who := range []countersign.Identity{tBob, tCarol} {
					wg.Go(func() {
						dr, err := e.Decide(ctx, &countersign.Decision{Identity: who, ProposalID: id, Verdict: countersign.Approve})
						switch {
						case err != nil:
							errs <- fmt.Errorf("%s by %s: %w", id, who.Actor, err)
						case dr.Status != countersign.DecideApplied && dr.Status != countersign.DecideUnchanged:
							errs <- fmt.Errorf("%s by %s: %s, want applied or unchanged", id, who.Actor, dr.Status)
						}
					})
				}
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for _, id := range ids {
			p, err := ep.h2.engine.Proposal(ctx, tBob, id)
			if err != nil {
				t.Fatal(err)
			}
			if p.Status != cstype.StatusApproved || len(p.Decisions) != 2 || p.Decisions[0].Actor == p.Decisions[1].Actor {
				t.Errorf("%s: %s with decisions %+v; want approved by bob and carol once each", id, p.Status, p.Decisions)
			}
		}
	})
}
