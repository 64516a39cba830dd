package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// readEngine is an engine on a store of open whose refunds finance approves
// and may remember for the thread; each of with changes its options.
func readEngine(t *testing.T, open storeOpener, with ...func(*countersign.Options)) *countersign.Engine {
	t.Helper()
	o := countersign.Options{
		Store:   open(t, nil),
		Actions: []*countersign.Action{mustAction(t, refundSpec(newBackend()))},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			Remember: []countersign.Scope{countersign.ScopeThread},
		}}},
		WaitPoll: 5 * time.Millisecond,
	}
	for _, f := range with {
		f(&o)
	}
	e, err := countersign.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// pendingRefund has alice propose a refund in thread t1, to a customer of
// its own (so that it replaces nothing), and returns it.
func pendingRefund(t *testing.T, e *countersign.Engine, tool string) *cstype.Proposal {
	t.Helper()
	res, err := e.Call(context.Background(), &countersign.Call{
		Identity: tAlice, ThreadID: "t1", ToolCallID: tool, Action: "payments.refund",
		Input: json.RawMessage(`{"amount": 40, "customer": "c_` + tool + `"}`), Mode: countersign.ModeIndependent,
	})
	if err != nil || res.Proposal == nil {
		t.Fatalf("call: %v %+v", err, res)
	}
	return res.Proposal
}

// wantForbidden fails t unless err is a *ForbiddenError that names nothing
// of the record but the id asked for.
func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	var fe *countersign.ForbiddenError
	if !errors.As(err, &fe) || !errors.Is(err, countersign.ErrForbidden) {
		t.Fatalf("%s: got %v, want *ForbiddenError", what, err)
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, countersign.ErrNotFound) {
		t.Fatalf("%s: got %v, want ErrNotFound", what, err)
	}
}

// Who may read a proposal and its audit trail: its thread's owner and whoever
// may decide it; another actor of the tenant and another tenant are refused
// alike, and an unknown id is not found.
func TestProposalReadsAreCheckedByTheEngine(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e := readEngine(t, open)
		p := pendingRefund(t, e, "call_1")
		for _, who := range []countersign.Identity{tAlice, tBob, tCarol} {
			got, err := e.Proposal(ctx, who, p.ID)
			if err != nil || got.ID != p.ID {
				t.Fatalf("%s reads: %v", who.Actor, err)
			}
			evs, err := e.ProposalEvents(ctx, who, p.ID)
			if err != nil || len(evs) == 0 || evs[0].Type != cstype.EventCreated {
				t.Fatalf("%s reads events: %v %v", who.Actor, err, evs)
			}
		}
		for _, who := range []countersign.Identity{tDave, tEve} {
			got, err := e.Proposal(ctx, who, p.ID)
			wantForbidden(t, who.Actor+" reads", err)
			if got != nil {
				t.Fatalf("%s got the proposal with the refusal", who.Actor)
			}
			evs, err := e.ProposalEvents(ctx, who, p.ID)
			wantForbidden(t, who.Actor+" reads events", err)
			if evs != nil {
				t.Fatalf("%s got events with the refusal", who.Actor)
			}
		}
		for _, id := range []string{"prp_nope", "", string(make([]byte, cstype.MaxIDLen+1))} {
			_, err := e.Proposal(ctx, tBob, id)
			wantNotFound(t, "unknown id", err)
		}
		// Deciding needs seeing: dave's refusal is the read's, and reveals
		// nothing of who the approvers are.
		_, err := e.Decide(ctx, &countersign.Decision{Identity: tDave, ProposalID: p.ID, Verdict: countersign.Approve})
		wantForbidden(t, "dave decides", err)
	})
}

// A thread and its conversation are its owner's alone; the thread's
// proposals are listed to whoever may see each of them, and an unknown
// thread is not found.
func TestThreadReadsAreTheOwners(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e := readEngine(t, open)
		p := pendingRefund(t, e, "call_1")
		view, err := e.Thread(ctx, tAlice, "t1")
		if err != nil || view.Thread.Owner != "alice" {
			t.Fatalf("owner reads thread: %v %+v", err, view)
		}
		for _, who := range []countersign.Identity{tBob, tDave} {
			_, err := e.Thread(ctx, who, "t1")
			wantForbidden(t, who.Actor+" reads thread", err)
		}
		_, err = e.Thread(ctx, tEve, "t1") // another tenant's t1 is another thread
		wantNotFound(t, "eve reads t1", err)
		_, err = e.Thread(ctx, tAlice, "nope")
		wantNotFound(t, "unknown thread", err)

		_, err = e.ThreadProposals(ctx, tDave, "t1", countersign.ListParams{})
		wantForbidden(t, "dave lists t1", err)
		for who, want := range map[*countersign.Identity]int{&tAlice: 1, &tBob: 1} {
			page, err := e.ThreadProposals(ctx, *who, "t1", countersign.ListParams{})
			if err != nil || len(page.Proposals) != want {
				t.Fatalf("%s lists t1: %v, %d proposals, want %d", who.Actor, err, len(page.Proposals), want)
			}
			if want == 1 && page.Proposals[0].ID != p.ID {
				t.Fatalf("%s lists t1: wrong proposal", who.Actor)
			}
		}
		_, err = e.ThreadProposals(ctx, tBob, "nope", countersign.ListParams{})
		wantNotFound(t, "list unknown thread", err)
	})
}

// Grants are listed to, and revocable by, their requester, their approver
// and the tenant's operators only.
func TestGrantsAreManagedByTheirParties(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e := readEngine(t, open)
		call := &countersign.Call{
			Identity: tAlice, ThreadID: "t1", ToolCallID: "call_1", Action: "payments.refund",
			Input: json.RawMessage(`{"amount": 40, "customer": "c_9"}`), WaitTimeout: time.Millisecond,
		}
		res, err := e.Call(ctx, call)
		if err != nil || res.Status != countersign.ResultPending {
			t.Fatalf("call: %v %+v", err, res)
		}
		// carol (finance, not operator) grants; bob is an operator.
		if _, err := e.Decide(ctx, &countersign.Decision{Identity: tCarol, ProposalID: res.ProposalID, Verdict: countersign.Approve, Remember: countersign.ScopeThread}); err != nil {
			t.Fatal(err)
		}
		call.WaitTimeout = 5 * time.Second
		if res, err = e.Call(ctx, call); err != nil || res.Status != countersign.ResultSucceeded {
			t.Fatalf("execute: %v %+v", err, res)
		}
		gs, err := e.Grants(ctx, tAlice, "")
		if err != nil || len(gs) != 1 {
			t.Fatalf("alice's grants: %v %v", err, gs)
		}
		gid := gs[0].ID
		for _, who := range []countersign.Identity{tBob, tCarol} {
			if gs, err := e.Grants(ctx, who, "t1"); err != nil || len(gs) != 1 {
				t.Fatalf("%s lists grants: %v %v", who.Actor, err, gs)
			}
		}
		for _, who := range []countersign.Identity{tDave, tEve} {
			if gs, err := e.Grants(ctx, who, ""); err != nil || len(gs) != 0 {
				t.Fatalf("%s lists grants: %v %v", who.Actor, err, gs)
			}
		}
		_, err = e.RevokeGrant(ctx, tDave, gid)
		wantForbidden(t, "dave revokes", err)
		_, err = e.RevokeGrant(ctx, tEve, gid)
		wantNotFound(t, "eve revokes", err)
		_, err = e.RevokeGrant(ctx, tAlice, "grt_nope")
		wantNotFound(t, "unknown grant", err)
		if gs, _ := e.Grants(ctx, tAlice, ""); len(gs) != 1 || gs[0].RevokedAt != nil {
			t.Fatalf("refused revocations revoked: %+v", gs)
		}
		g, err := e.RevokeGrant(ctx, tCarol, gid)
		if err != nil || g.RevokedAt == nil {
			t.Fatalf("approver revokes: %v %+v", err, g)
		}
		if _, err := e.RevokeGrant(ctx, tAlice, gid); err != nil {
			t.Fatalf("revoking twice: %v", err)
		}
	})
}

// Permissions offers what the engine would take: a decision to the
// approvers through an allowed channel, a cancel to the requester, a
// resolution to operators of an uncertain outcome; nothing to those who may
// not see the proposal.
func TestPermissionsMatchWhatTheEngineTakes(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e, err := countersign.New(countersign.Options{
			Store:   open(t, nil),
			Actions: []*countersign.Action{mustAction(t, refundSpec(newBackend()))},
			Policy: &countersign.Policy{Rules: []countersign.Rule{{
				Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance", "requester"},
				ForbidSelfApproval: true, Channels: []string{"web"},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		p := pendingRefund(t, e, "call_1")
		for _, c := range []struct {
			who  countersign.Identity
			via  string
			want countersign.Permissions
		}{
			{tBob, "web", countersign.Permissions{Approve: true, Reject: true}},
			{tBob, "api", countersign.Permissions{}}, // the rule takes decisions from the inbox only
			{tAlice, "web", countersign.Permissions{Reject: true, Cancel: true}},
			{tDave, "web", countersign.Permissions{}},
			{tEve, "web", countersign.Permissions{}},
		} {
			if got := e.Permissions(ctx, c.who, p, c.via); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s via %s: %+v, want %+v", c.who.Actor, c.via, got, c.want)
			}
			if c.want.Approve {
				continue // approved below, once every case has looked
			}
			if _, err := e.Decide(ctx, &countersign.Decision{Identity: c.who, ProposalID: p.ID, Verdict: countersign.Approve, Via: c.via}); err == nil {
				t.Fatalf("%s via %s: Permissions refuses an approval that Decide took", c.who.Actor, c.via)
			}
		}
		res, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: p.ID, Verdict: countersign.Approve, Via: "web"})
		if err != nil || res.Status != countersign.DecideApplied {
			t.Fatalf("bob approves: %v %+v", err, res)
		}
		for _, who := range []countersign.Identity{tBob, tAlice} {
			if got := e.Permissions(ctx, who, res.Proposal, "web"); !reflect.DeepEqual(got, countersign.Permissions{}) {
				t.Errorf("%s once approved: %+v, want nothing", who.Actor, got)
			}
		}
	})
}
