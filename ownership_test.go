package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store"
)

// ownerHarness is a harness with the refund action (asked of role:finance)
// and a read action, crm.lookup, that the policy allows; reads counts its
// executions.
func ownerHarness(t *testing.T, open storeOpener, reads *atomic.Int32) *harness {
	return newHarness(t, harnessOpts{open: open, actions: func(b *backend) []*countersign.Action {
		lookup := mustAction(t, countersign.RawActionSpec{Name: "crm.lookup", Kind: countersign.KindRead,
			Hooks: countersign.Hooks{Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				reads.Add(1)
				return &countersign.Receipt{ID: "found"}, nil
			}}})
		return []*countersign.Action{mustAction(t, refundSpec(b)), lookup}
	}})
}

// refusedAsNotOwner checks that a call by another actor than the thread's
// owner was refused with a *ForbiddenError that reveals nothing of the
// thread: no result, and none of the given secrets in the error.
func refusedAsNotOwner(t *testing.T, what string, res *countersign.Result, err error, secrets ...string) {
	t.Helper()
	var fe *countersign.ForbiddenError
	if !errors.As(err, &fe) || !errors.Is(err, countersign.ErrForbidden) || res != nil {
		t.Fatalf("%s: want *ForbiddenError and no result, got %+v, %v", what, res, err)
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Fatalf("%s: the refusal %q reveals %q", what, err, s)
		}
	}
}

// Another actor of the tenant who repeats the owner's call body (same
// thread, same tool call id) gets nothing back and runs nothing: not the
// pending proposal, not its execution once approved, not a two-phase
// confirmation, and he cannot spend the owner's evidence.
func TestCallInAnotherActorsThreadIsForbidden(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		var reads atomic.Int32
		h := ownerHarness(t, open, &reads)
		ctx := context.Background()
		in := `{"amount":40,"customer":"c_9"}`

		// Wait mode: the owner's pending proposal, then approved.
		first := h.call(refundCall("call_1", countersign.ModeWait, in))
		if first.Status != countersign.ResultPending {
			t.Fatalf("owner's call = %+v", first)
		}
		p, _ := h.store.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: first.ProposalID})
		secrets := []string{p.ID, p.OperationID, p.ConfirmationID, "c_9"}
		repeat := refundCall("call_1", countersign.ModeWait, in)
		repeat.Identity = tDave
		res, err := h.engine.Call(ctx, repeat)
		refusedAsNotOwner(t, "repeat of a pending call", res, err, secrets...)
		h.decide(tBob, first.ProposalID, countersign.Approve)
		res, err = h.engine.Call(ctx, repeat)
		refusedAsNotOwner(t, "repeat of an approved call", res, err, secrets...)
		if n := h.backend.total(); n != 0 {
			t.Fatalf("the non-owner's repeat executed %d times", n)
		}
		// A new tool call of his in her thread is refused as well.
		fresh := refundCall("dave_1", countersign.ModeWait, in)
		fresh.Identity = tDave
		res, err = h.engine.Call(ctx, fresh)
		refusedAsNotOwner(t, "a new call in another actor's thread", res, err, secrets...)
		if got := h.call(refundCall("call_1", countersign.ModeWait, in)); got.Status != countersign.ResultSucceeded || h.backend.total() != 1 {
			t.Fatalf("the owner's repeat = %+v, %d executions", got, h.backend.total())
		}
		// The settled call: he still gets nothing of its outcome.
		res, err = h.engine.Call(ctx, repeat)
		refusedAsNotOwner(t, "repeat of a settled call", res, err, append(secrets, "rc_"+p.OperationID)...)

		// Two-phase: no confirmation id for him, and her evidence is not
		// his to spend, in her thread or in his own.
		tp := h.call(refundCall("call_2", countersign.ModeTwoPhase, `{"amount":5,"customer":"c_1"}`))
		if tp.Status != countersign.ResultConfirmationRequired {
			t.Fatalf("owner's two-phase call = %+v", tp)
		}
		tpRepeat := refundCall("call_2", countersign.ModeTwoPhase, `{"amount":5,"customer":"c_1"}`)
		tpRepeat.Identity = tDave
		res, err = h.engine.Call(ctx, tpRepeat)
		refusedAsNotOwner(t, "repeat of a two-phase call", res, err, tp.ProposalID, tp.ConfirmationID)
		h.decide(tBob, tp.ProposalID, countersign.Approve)
		spend := refundCall("dave_2", countersign.ModeTwoPhase, `{"amount":5,"customer":"c_1"}`)
		spend.Identity, spend.Evidence = tDave, tp.ConfirmationID
		res, err = h.engine.Call(ctx, spend)
		refusedAsNotOwner(t, "evidence presented in the owner's thread", res, err, tp.ProposalID)
		spend.ThreadID = "t-dave"
		if res := h.call(spend); res.Status != countersign.ResultConfirmationRequired || res.ProposalID == tp.ProposalID || res.ConfirmationID == tp.ConfirmationID {
			t.Fatalf("evidence presented in his own thread must be inert: %+v", res)
		}
		if n := h.backend.total(); n != 1 {
			t.Fatalf("%d executions after the non-owner's attempts, want 1", n)
		}
		own := refundCall("call_3", countersign.ModeTwoPhase, `{"amount":5,"customer":"c_1"}`)
		own.Evidence = tp.ConfirmationID
		if res := h.call(own); res.Status != countersign.ResultSucceeded {
			t.Fatalf("the owner spends her evidence: %+v", res)
		}

		// Reads: one in her thread is refused and not run; his first call
		// in a new thread, a read, makes him its owner.
		look := &countersign.Call{Identity: tDave, ThreadID: "t1", ToolCallID: "look_1", Action: "crm.lookup", Input: json.RawMessage(`{}`)}
		res, err = h.engine.Call(ctx, look)
		refusedAsNotOwner(t, "a read in another actor's thread", res, err)
		look.ThreadID = "t-new"
		if res := h.call(look); res.Status != countersign.ResultSucceeded || reads.Load() != 1 {
			t.Fatalf("read in a new thread = %+v (%d reads)", res, reads.Load())
		}
		th, err := h.store.GetThread(ctx, &store.GetThreadParams{Tenant: "acme", ID: "t-new"})
		if err != nil || th.Owner != tDave.Actor {
			t.Fatalf("thread t-new = %+v, %v; want owned by dave, its first caller", th, err)
		}
		hers := refundCall("call_4", countersign.ModeWait, in)
		hers.ThreadID = "t-new"
		res, err = h.engine.Call(ctx, hers)
		refusedAsNotOwner(t, "the owner-to-be after another actor's read", res, err)
	})
}

// A two-phase call whose proposal was rejected answers denied evidence when
// it is repeated with its own evidence, as any other call presenting that
// evidence does; repeated without evidence it answers the rejection.
func TestEvidenceAfterRejectionOnTheSameToolCallIsDenied(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open})
		ctx := context.Background()
		c := refundCall("call_1", countersign.ModeTwoPhase, `{"amount":40,"customer":"c_9"}`)
		first := h.call(c)
		h.decide(tBob, first.ProposalID, countersign.Reject)
		withEvidence := *c
		withEvidence.Evidence = first.ConfirmationID
		res, err := h.engine.Call(ctx, &withEvidence)
		var ev *countersign.EvidenceError
		if !errors.As(err, &ev) || ev.Reason != countersign.EvidenceDenied || ev.ProposalID != first.ProposalID || res != nil {
			t.Fatalf("the rejected call repeated with its evidence = %+v, %v; want denied evidence", res, err)
		}
		if res := h.call(c); res.Status != countersign.ResultRejected {
			t.Fatalf("the rejected call repeated without evidence = %+v", res)
		}
		if n := h.backend.total(); n != 0 {
			t.Fatalf("%d executions", n)
		}
	})
}

// Two actors racing to make the first call in a new thread: one of them owns
// it, every proposal stored there is the owner's, and every call of the other
// is refused as not the owner's.
func TestFirstCallerOwnsANewThreadUnderRaces(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		var reads atomic.Int32
		h := ownerHarness(t, open, &reads)
		ctx := context.Background()
		const perActor = 8
		type answer struct {
			actor string
			res   *countersign.Result
			err   error
		}
		answers := make(chan answer, 2*perActor)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, id := range []countersign.Identity{tAlice, tDave} {
			for i := range perActor {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := refundCall(fmt.Sprintf("%s_%d", id.Actor, i), countersign.ModeIndependent, fmt.Sprintf(`{"amount":%d,"customer":"c_%s"}`, i+1, id.Actor))
					c.Identity, c.ThreadID = id, "t-race"
					<-start
					res, err := h.engine.Call(ctx, c)
					answers <- answer{id.Actor, res, err}
				}()
			}
		}
		close(start)
		wg.Wait()
		close(answers)
		th, err := h.store.GetThread(ctx, &store.GetThreadParams{Tenant: "acme", ID: "t-race"})
		if err != nil {
			t.Fatal(err)
		}
		for a := range answers {
			var fe *countersign.ForbiddenError
			switch {
			case a.actor == th.Owner && (a.err != nil || a.res.Status != countersign.ResultPending):
				t.Errorf("the owner %s's call = %+v, %v; want pending", a.actor, a.res, a.err)
			case a.actor != th.Owner && (!errors.As(a.err, &fe) || a.res != nil):
				t.Errorf("the other actor %s's call = %+v, %v; want *ForbiddenError", a.actor, a.res, a.err)
			}
		}
		page, err := h.store.ListProposals(ctx, &store.ListProposalsParams{Tenant: "acme", ThreadID: "t-race"})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Proposals) != perActor {
			t.Errorf("%d proposals in the thread, want the owner's %d", len(page.Proposals), perActor)
		}
		for _, p := range page.Proposals {
			if p.Requester != th.Owner {
				t.Errorf("proposal %s of %s in %s's thread", p.ID, p.Requester, th.Owner)
			}
		}

		// Reads, which leave no record, race for a new thread the same way.
		var refused, ran atomic.Int32
		start = make(chan struct{})
		for _, id := range []countersign.Identity{tAlice, tDave} {
			for i := range perActor {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &countersign.Call{Identity: id, ThreadID: "t-race-read", ToolCallID: fmt.Sprintf("look_%s_%d", id.Actor, i),
						Action: "crm.lookup", Input: json.RawMessage(`{}`)}
					<-start
					res, err := h.engine.Call(ctx, c)
					var fe *countersign.ForbiddenError
					switch {
					case errors.As(err, &fe) && res == nil:
						refused.Add(1)
					case err == nil && res.Status == countersign.ResultSucceeded:
						ran.Add(1)
					default:
						t.Errorf("read by %s = %+v, %v", id.Actor, res, err)
					}
				}()
			}
		}
		before := reads.Load()
		close(start)
		wg.Wait()
		if ran.Load() != perActor || refused.Load() != perActor || reads.Load()-before != perActor {
			t.Errorf("racing reads: %d ran, %d refused, %d executions; want the owner's %d run and the other's refused",
				ran.Load(), refused.Load(), reads.Load()-before, perActor)
		}
	})
}
