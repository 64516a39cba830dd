package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// requireDecision fails the test unless res has the given outcome and
// transition.
func requireDecision(t *testing.T, res *store.DecideResult, outcome store.DecideOutcome, from, to store.Status) {
	t.Helper()
	if res.Outcome != outcome || res.From != from || res.To != to {
		t.Fatalf("decision = %s %s→%s, want %s %s→%s", res.Outcome, res.From, res.To, outcome, from, to)
	}
	if res.Proposal == nil {
		t.Fatal("decision returned no proposal")
	}
	requireStatus(t, res.Proposal, to)
}

func testDecide(t *testing.T, newStore Factory) {
	t.Run("ApproveQuorumOne", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		fx.clock.Advance(time.Second)
		now := fx.clock.Now()
		res, err := fx.store.Decide(fx.ctx, &store.DecideParams{
			Tenant: tenant, ID: p.ID, Actor: approver, Verdict: store.VerdictApproved,
			Via: "web", Reason: "looks right", Remember: store.ScopeThread,
		})
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		requireDecision(t, res, store.DecideApplied, store.StatusPending, store.StatusApproved)
		got := fx.get(p)
		requireStatus(t, got, store.StatusApproved)
		requireSameProposal(t, res.Proposal, got)
		if got.Version != 2 {
			t.Errorf("Version = %d, want 2", got.Version)
		}
		requireTime(t, "UpdatedAt", got.UpdatedAt, now)
		if len(got.Decisions) != 1 {
			t.Fatalf("%d decisions, want 1", len(got.Decisions))
		}
		d := got.Decisions[0]
		if d.Actor != approver || d.Decision != store.VerdictApproved || d.Via != "web" || d.Reason != "looks right" || d.Remember != store.ScopeThread {
			t.Errorf("decision = %+v, want bob approved via web, reason, remember thread", d)
		}
		requireTime(t, "decision At", d.At, now)
		if got.Outcome != nil {
			t.Errorf("an approved proposal has an outcome: %+v", got.Outcome)
		}
		if msgs := fx.messages(thread); len(msgs) != 0 {
			t.Errorf("approval admitted %d messages, want none", len(msgs))
		}
	})

	t.Run("SameApprovalAgainUnchanged", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved()
		res := fx.decide(p, approver, store.VerdictApproved)
		requireDecision(t, res, store.DecideUnchanged, store.StatusApproved, store.StatusApproved)
		requireSameProposal(t, fx.get(p), p)
	})

	t.Run("OtherApproverAfterApprovedUnchanged", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved()
		res := fx.decide(p, approver2, store.VerdictApproved)
		requireDecision(t, res, store.DecideUnchanged, store.StatusApproved, store.StatusApproved)
		requireSameProposal(t, fx.get(p), p)
	})

	t.Run("RejectAfterApproveConflict", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved()
		for _, actor := range []string{approver, approver2} {
			res := fx.decide(p, actor, store.VerdictRejected)
			requireDecision(t, res, store.DecideConflict, store.StatusApproved, store.StatusApproved)
		}
		requireSameProposal(t, fx.get(p), p)
	})

	t.Run("RejectPending", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		fx.clock.Advance(time.Second)
		now := fx.clock.Now()
		res, err := fx.store.Decide(fx.ctx, &store.DecideParams{
			Tenant: tenant, ID: p.ID, Actor: approver, Verdict: store.VerdictRejected, Via: "cli", Reason: "wrong customer",
		})
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		requireDecision(t, res, store.DecideApplied, store.StatusPending, store.StatusRejected)
		got := fx.get(p)
		requireStatus(t, got, store.StatusRejected)
		if len(got.Decisions) != 1 || got.Decisions[0].Decision != store.VerdictRejected || got.Decisions[0].Via != "cli" ||
			got.Decisions[0].Reason != "wrong customer" {
			t.Errorf("decisions = %+v, want bob's rejection via cli with its reason", got.Decisions)
		}
		o := got.Outcome
		if o == nil {
			t.Fatal("rejected proposal has no outcome")
		}
		if o.Status != store.StatusRejected || o.ProposalID != p.ID || o.Executed == nil || *o.Executed ||
			!strings.Contains(o.Summary, "wrong customer") {
			t.Errorf("outcome = %+v, want rejected, executed false, a summary with the reason", o)
		}
		requireTime(t, "outcome At", o.At, now)

		msgs := fx.messages(thread)
		if len(msgs) != 1 {
			t.Fatalf("thread has %d messages, want 1", len(msgs))
		}
		if m := msgs[0]; m.ProposalID != p.ID || m.Role != "assistant" || m.Text == "" || m.Outcome == nil ||
			m.Outcome.Status != store.StatusRejected {
			t.Errorf("message = %+v, want the rejection outcome", m)
		}

		// The same answer again is unchanged, whoever gives it; the opposite
		// one is a conflict.
		requireDecision(t, fx.decide(p, approver2, store.VerdictRejected), store.DecideUnchanged, store.StatusRejected, store.StatusRejected)
		requireDecision(t, fx.decide(p, approver, store.VerdictApproved), store.DecideConflict, store.StatusRejected, store.StatusRejected)
		if n := len(fx.messages(thread)); n != 1 {
			t.Errorf("thread has %d messages after repeated decisions, want 1", n)
		}
		requireSameProposal(t, fx.get(p), got)
	})

	t.Run("QuorumCountsDistinctActors", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withQuorum(2), withApprovers("role:finance"))
		requireDecision(t, fx.decide(p, approver, store.VerdictApproved), store.DecideApplied, store.StatusPending, store.StatusPending)
		requireDecision(t, fx.decide(p, approver, store.VerdictApproved), store.DecideUnchanged, store.StatusPending, store.StatusPending)
		got := fx.get(p)
		if len(got.Decisions) != 1 || got.Approvals() != 1 {
			t.Fatalf("after bob twice: %d decisions, %d approvals; want 1, 1", len(got.Decisions), got.Approvals())
		}
		res := fx.decide(p, approver2, store.VerdictApproved)
		requireDecision(t, res, store.DecideApplied, store.StatusPending, store.StatusApproved)
		got = fx.get(p)
		if got.Approvals() != 2 || got.Decisions[0].Actor != approver || got.Decisions[1].Actor != approver2 {
			t.Errorf("decisions = %+v, want bob's then carol's approval", got.Decisions)
		}
	})

	t.Run("RejectionDuringPartialQuorum", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withQuorum(2))
		fx.decide(p, approver, store.VerdictApproved)
		res := fx.decide(p, approver2, store.VerdictRejected)
		requireDecision(t, res, store.DecideApplied, store.StatusPending, store.StatusRejected)
		if got := fx.get(p); len(got.Decisions) != 2 || got.Outcome == nil || got.Outcome.Status != store.StatusRejected {
			t.Errorf("after a rejection: decisions %+v, outcome %+v; want both decisions, a rejected outcome", got.Decisions, got.Outcome)
		}
	})

	t.Run("ExpiredAtDeadline", func(t *testing.T) {
		t.Parallel()
		for _, v := range []store.Verdict{store.VerdictApproved, store.VerdictRejected} {
			t.Run(string(v), func(t *testing.T) {
				t.Parallel()
				fx := setup(t, newStore)
				p := fx.createNew(withExpiresAt(fx.clock.Now().Add(time.Minute)))
				fx.clock.Advance(time.Minute) // exactly the deadline: too late
				res := fx.decide(p, approver, v)
				requireDecision(t, res, store.DecideExpired, store.StatusPending, store.StatusExpired)
				got := fx.get(p)
				requireStatus(t, got, store.StatusExpired)
				if len(got.Decisions) != 0 {
					t.Errorf("a late decision was recorded: %+v", got.Decisions)
				}
				if got.Outcome == nil || got.Outcome.Status != store.StatusExpired || got.Outcome.Executed == nil || *got.Outcome.Executed {
					t.Errorf("outcome = %+v, want expired, executed false", got.Outcome)
				}
				if msgs := fx.messages(thread); len(msgs) != 1 || msgs[0].Outcome == nil || msgs[0].Outcome.Status != store.StatusExpired {
					t.Errorf("thread messages = %d, want the one expired outcome", len(msgs))
				}
				// Once expired, every decision answers expired and changes nothing.
				requireDecision(t, fx.decide(p, approver2, store.VerdictApproved), store.DecideExpired, store.StatusExpired, store.StatusExpired)
				requireSameProposal(t, fx.get(p), got)
			})
		}
	})

	t.Run("BeforeDeadlineApplies", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(time.Minute - time.Millisecond)
		requireDecision(t, fx.decide(p, approver, store.VerdictApproved), store.DecideApplied, store.StatusPending, store.StatusApproved)
	})

	t.Run("ApprovedWaitLapsesAtDeadline", func(t *testing.T) {
		t.Parallel()
		for _, mode := range []store.Mode{store.ModeWait, store.ModeTwoPhase} {
			t.Run(string(mode), func(t *testing.T) {
				t.Parallel()
				fx := setup(t, newStore)
				p := fx.approved(withMode(mode), withExpiresAt(fx.clock.Now().Add(time.Minute)))
				fx.clock.Advance(2 * time.Minute)
				res := fx.decide(p, approver2, store.VerdictApproved)
				requireDecision(t, res, store.DecideExpired, store.StatusApproved, store.StatusExpired)
				got := fx.get(p)
				requireStatus(t, got, store.StatusExpired)
				if got.Outcome == nil || got.Outcome.Status != store.StatusExpired {
					t.Errorf("outcome = %+v, want expired", got.Outcome)
				}
			})
		}
	})

	// An approval that waited for its agent to call again and lapsed is
	// not_collected, in the row, the outcome message and the audit trail,
	// whichever way the expiry is noticed; one that some server-side
	// process was to execute lapses without that reason; neither says it
	// was not approved.
	t.Run("ApprovedAwaitingCallerLapsesNotCollected", func(t *testing.T) {
		t.Parallel()
		for _, mode := range []store.Mode{store.ModeWait, store.ModeTwoPhase} {
			for _, awaits := range []bool{true, false} {
				for _, how := range []string{"expire", "sweep", "decide", "claim"} {
					t.Run(fmt.Sprintf("%s/awaits=%v/%s", mode, awaits, how), func(t *testing.T) {
						t.Parallel()
						fx := setup(t, newStore)
						deadline := fx.clock.Now().Add(time.Minute)
						p := fx.createNew(withMode(mode), withExpiresAt(deadline))
						res, err := fx.store.Decide(fx.ctx, &store.DecideParams{Tenant: p.Tenant, ID: p.ID, Actor: approver,
							Verdict: store.VerdictApproved, Via: "api", AwaitsCaller: awaits})
						if err != nil {
							t.Fatalf("Decide: %v", err)
						}
						requireDecision(t, res, store.DecideApplied, store.StatusPending, store.StatusApproved)
						got := fx.get(p)
						if len(got.Decisions) != 1 || got.Decisions[0].AwaitsCaller != awaits || store.AwaitsCaller(got) != awaits {
							t.Fatalf("decisions = %+v, AwaitsCaller = %v; want one approval awaiting the caller: %v", got.Decisions, store.AwaitsCaller(got), awaits)
						}
						fx.clock.Advance(2 * time.Minute)
						switch how {
						case "expire":
							if _, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: p.Tenant, ID: p.ID}); err != nil {
								t.Fatalf("Expire: %v", err)
							}
						case "sweep":
							if _, err := fx.store.ExpireDue(fx.ctx, &store.ExpireDueParams{Limit: 10}); err != nil {
								t.Fatalf("ExpireDue: %v", err)
							}
						case "decide":
							requireDecision(t, fx.decide(p, approver2, store.VerdictApproved), store.DecideExpired, store.StatusApproved, store.StatusExpired)
						case "claim":
							_, err := fx.store.Claim(fx.ctx, &store.ClaimParams{Tenant: p.Tenant, ID: p.ID, Owner: worker, LeaseDuration: longLease})
							if !errors.Is(err, store.ErrConflict) {
								t.Fatalf("Claim after the deadline: %v, want a conflict", err)
							}
						}
						got = fx.get(p)
						requireStatus(t, got, store.StatusExpired)
						o := got.Outcome
						if o == nil || o.Status != store.StatusExpired || o.Executed == nil || *o.Executed {
							t.Fatalf("outcome = %+v, want expired, not executed", o)
						}
						wantReason, wantText := "", "was approved, but it did not run before "+deadline.UTC().Format(time.RFC3339)
						if awaits {
							wantReason, wantText = store.ReasonNotCollected, "was approved, but the agent did not call again before "+deadline.UTC().Format(time.RFC3339)
						}
						if o.Reason != wantReason || !strings.Contains(o.Summary, wantText) || strings.Contains(o.Summary, "before it was approved") {
							t.Errorf("outcome reason %q, summary %q; want reason %q and a summary saying %q", o.Reason, o.Summary, wantReason, wantText)
						}
						msgs := fx.messages(thread)
						if len(msgs) != 1 || msgs[0].Outcome == nil || msgs[0].Outcome.Reason != wantReason || msgs[0].Text != o.Summary {
							t.Fatalf("thread messages = %+v, want the outcome message with reason %q and text %q", msgs, wantReason, o.Summary)
						}
						evs, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: p.Tenant, ProposalID: p.ID})
						if err != nil {
							t.Fatalf("ListEvents: %v", err)
						}
						if last := evs[len(evs)-1]; last.Type != store.EventExpired || last.Detail != wantReason {
							t.Errorf("last event = %s %q, want %s %q", last.Type, last.Detail, store.EventExpired, wantReason)
						}
					})
				}
			}
		}
	})

	t.Run("AwaitsCallerOnlyOnTheCompletingApprovalOfCallerModes", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		decide := func(p *store.Proposal, actor string) *store.Proposal {
			t.Helper()
			res, err := fx.store.Decide(fx.ctx, &store.DecideParams{Tenant: p.Tenant, ID: p.ID, Actor: actor,
				Verdict: store.VerdictApproved, Via: "api", AwaitsCaller: true})
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			return res.Proposal
		}
		quorum := fx.createNew(withQuorum(2))
		if got := decide(quorum, approver); got.Decisions[0].AwaitsCaller || store.AwaitsCaller(got) {
			t.Errorf("an approval short of the quorum records AwaitsCaller: %+v", got.Decisions)
		}
		if got := decide(quorum, approver2); !got.Decisions[1].AwaitsCaller || !store.AwaitsCaller(fx.get(quorum)) {
			t.Errorf("the approval completing the quorum does not record AwaitsCaller: %+v", got.Decisions)
		}
		ind := fx.createNew(independent)
		if got := decide(ind, approver); got.Decisions[0].AwaitsCaller || store.AwaitsCaller(fx.get(ind)) {
			t.Errorf("an independent approval (the worker executes it) records AwaitsCaller: %+v", got.Decisions)
		}
	})

	t.Run("ApprovedIndependentNeverLapses", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved(independent, withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(2 * time.Hour)
		requireDecision(t, fx.decide(p, approver2, store.VerdictApproved), store.DecideUnchanged, store.StatusApproved, store.StatusApproved)
		requireDecision(t, fx.decide(p, approver2, store.VerdictRejected), store.DecideConflict, store.StatusApproved, store.StatusApproved)
		requireSameProposal(t, fx.get(p), p)
	})

	t.Run("PastDecidingConflict", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		cancelled := fx.createNew()
		if _, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: cancelled.ID, Actor: requester, Via: "api"}); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		superseded := fx.createNew(withKey("k"))
		fx.createNew(withKey("k"))
		for _, p := range []*store.Proposal{cancelled, superseded} {
			status := fx.get(p).Status
			for _, v := range []store.Verdict{store.VerdictApproved, store.VerdictRejected} {
				requireDecision(t, fx.decide(p, approver, v), store.DecideConflict, status, status)
			}
		}
	})

	// A decision judged on a version (DecideParams.Version, the engine's
	// remembered row) applies to that version alone; any other fails with
	// ErrVersionMoved and writes nothing.
	t.Run("JudgedVersion", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withQuorum(2))
		judged := func(actor string, version int64) (*store.DecideResult, error) {
			return fx.store.Decide(fx.ctx, &store.DecideParams{
				Tenant: tenant, ID: p.ID, Actor: actor, Verdict: store.VerdictApproved, Via: "api", Version: version,
			})
		}
		for _, v := range []int64{p.Version + 1, p.Version + 2} {
			res, err := judged(approver, v)
			requireErrorIs(t, err, store.ErrVersionMoved)
			if res != nil {
				t.Errorf("a decision judged on version %d of a version-%d row answered %+v", v, p.Version, res)
			}
		}
		if got := fx.get(p); got.Version != p.Version || len(got.Decisions) != 0 {
			t.Fatalf("after refused decisions: version %d with %d decisions, want version %d with none", got.Version, len(got.Decisions), p.Version)
		}
		res, err := judged(approver, p.Version)
		if err != nil {
			t.Fatalf("Decide on the stored version: %v", err)
		}
		requireDecision(t, res, store.DecideApplied, store.StatusPending, store.StatusPending)
		// The version it was judged on is gone: carol's approval judged on
		// it is refused, and nothing of it is written.
		_, err = judged(approver2, p.Version)
		requireErrorIs(t, err, store.ErrVersionMoved)
		got := fx.get(p)
		if got.Version != res.Proposal.Version || len(got.Decisions) != 1 {
			t.Fatalf("after a decision judged on a past version: version %d with %d decisions, want version %d with 1", got.Version, len(got.Decisions), res.Proposal.Version)
		}
		res, err = judged(approver2, got.Version)
		if err != nil {
			t.Fatalf("Decide on the new version: %v", err)
		}
		requireDecision(t, res, store.DecideApplied, store.StatusPending, store.StatusApproved)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		for _, params := range []*store.DecideParams{
			{Tenant: tenant, ID: "prp_missing", Actor: approver, Verdict: store.VerdictApproved, Via: "api"},
			{Tenant: otherTenant, ID: p.ID, Actor: approver, Verdict: store.VerdictApproved, Via: "api"},
		} {
			_, err := fx.store.Decide(fx.ctx, params)
			requireErrorIs(t, err, store.ErrNotFound)
		}
		requireStatus(t, fx.get(p), store.StatusPending)
	})

	t.Run("GrantLiveAfterSuccess", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		g := grantFor(fx, p, store.ScopeThread)
		approveWithGrant(t, fx, p, g)

		find := findParams(p)
		_, err := fx.store.FindGrant(fx.ctx, find)
		requireErrorIs(t, err, store.ErrNotFound)
		listed := fx.listGrants()
		if len(listed) != 1 || listed[0].ID != g.ID || listed[0].ActivatedAt != nil || listed[0].OriginProposalID != p.ID {
			t.Fatalf("ListGrants = %+v, want the one inactive grant %s", listed, g.ID)
		}

		claimed := fx.claim(p, longLease)
		fx.clock.Advance(time.Second)
		activatedAt := fx.clock.Now()
		fx.succeed(claimed)
		got, err := fx.store.FindGrant(fx.ctx, find)
		if err != nil {
			t.Fatalf("FindGrant after success: %v", err)
		}
		if got.ID != g.ID || got.ActivatedAt == nil || got.RevokedAt != nil || got.Scope != store.ScopeThread ||
			got.Requester != p.Requester || got.GrantedBy != approver {
			t.Errorf("FindGrant = %+v, want %s activated", got, g.ID)
		}
		if got.ActivatedAt != nil {
			requireTime(t, "ActivatedAt", *got.ActivatedAt, activatedAt)
		}
	})

	t.Run("GrantInactiveAfterFailure", func(t *testing.T) {
		t.Parallel()
		for _, status := range []store.Status{store.StatusFailed, store.StatusUnknown, store.StatusReconciling} {
			t.Run(string(status), func(t *testing.T) {
				t.Parallel()
				fx := setup(t, newStore)
				p := fx.createNew()
				approveWithGrant(t, fx, p, grantFor(fx, p, store.ScopeThread))
				sp := settleParams(fx.claim(p, longLease), status)
				sp.Error = ptr("backend said no")
				fx.settle(sp)
				_, err := fx.store.FindGrant(fx.ctx, findParams(p))
				requireErrorIs(t, err, store.ErrNotFound)
				if gs := fx.listGrants(); len(gs) != 1 || gs[0].ActivatedAt != nil {
					t.Errorf("ListGrants = %+v, want one inactive grant", gs)
				}
			})
		}
	})

	t.Run("GrantOnlyWithAppliedApproval", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		// A rejection is never remembered.
		rejected := fx.createNew()
		res, err := fx.store.Decide(fx.ctx, &store.DecideParams{
			Tenant: tenant, ID: rejected.ID, Actor: approver, Verdict: store.VerdictRejected, Via: "api",
			Grant: grantFor(fx, rejected, store.ScopeThread),
		})
		if err != nil || res.Outcome != store.DecideApplied {
			t.Fatalf("reject: %v, %v", res, err)
		}
		// A decision that changed nothing stores nothing.
		approved := fx.approved()
		res, err = fx.store.Decide(fx.ctx, &store.DecideParams{
			Tenant: tenant, ID: approved.ID, Actor: approver2, Verdict: store.VerdictApproved, Via: "api",
			Remember: store.ScopeThread, Grant: grantFor(fx, approved, store.ScopeThread),
		})
		if err != nil || res.Outcome != store.DecideUnchanged {
			t.Fatalf("approve again: %v, %v", res, err)
		}
		// Nor does a late one.
		late := fx.createNew(withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(time.Minute)
		res, err = fx.store.Decide(fx.ctx, &store.DecideParams{
			Tenant: tenant, ID: late.ID, Actor: approver, Verdict: store.VerdictApproved, Via: "api",
			Remember: store.ScopeThread, Grant: grantFor(fx, late, store.ScopeThread),
		})
		if err != nil || res.Outcome != store.DecideExpired {
			t.Fatalf("late approval: %v, %v", res, err)
		}
		if gs := fx.listGrants(); len(gs) != 0 {
			t.Errorf("ListGrants = %+v, want none", gs)
		}
	})
}

func testCancel(t *testing.T, newStore Factory) {
	t.Run("Pending", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		fx.clock.Advance(time.Second)
		res, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: p.ID, Actor: requester, Via: "api", Reason: "typo"})
		if err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		if !res.Changed || res.From != store.StatusPending {
			t.Errorf("Cancel = changed %t from %s, want true from pending", res.Changed, res.From)
		}
		requireStatus(t, res.Proposal, store.StatusCancelled)
		got := fx.get(p)
		requireStatus(t, got, store.StatusCancelled)
		if got.Outcome == nil || got.Outcome.Status != store.StatusCancelled || got.Outcome.Executed == nil || *got.Outcome.Executed ||
			!strings.Contains(got.Outcome.Summary, "typo") {
			t.Errorf("outcome = %+v, want cancelled, executed false, the reason in the summary", got.Outcome)
		}
		if msgs := fx.messages(thread); len(msgs) != 1 || msgs[0].Outcome == nil || msgs[0].Outcome.Status != store.StatusCancelled {
			t.Errorf("thread messages = %+v, want the one cancelled outcome", msgs)
		}
		evs := fx.events(p.ID)
		if last := evs[len(evs)-1]; last.Type != store.EventCancelled || last.Actor != requester || last.Via != "api" {
			t.Errorf("last event = %+v, want cancelled by alice via api", last)
		}

		again, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: p.ID, Actor: requester, Via: "api"})
		if err != nil {
			t.Fatalf("Cancel again: %v", err)
		}
		if again.Changed {
			t.Error("Cancel again: Changed = true, want false")
		}
		requireStatus(t, again.Proposal, store.StatusCancelled)
		requireSameProposal(t, fx.get(p), got)
		if n := len(fx.messages(thread)); n != 1 {
			t.Errorf("thread has %d messages, want 1", n)
		}
	})

	t.Run("ApprovedConflict", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved()
		_, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: p.ID, Actor: requester, Via: "api"})
		requireConflict(t, err, p.ID, store.StatusApproved, []store.Status{store.StatusPending}, false)
		requireSameProposal(t, fx.get(p), p)
	})

	t.Run("DueExpiresInstead", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(time.Minute)
		_, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: p.ID, Actor: requester, Via: "api"})
		requireConflict(t, err, p.ID, store.StatusExpired, []store.Status{store.StatusPending}, false)
		requireStatus(t, fx.get(p), store.StatusExpired)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		_, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: otherTenant, ID: p.ID, Actor: requester})
		requireErrorIs(t, err, store.ErrNotFound)
	})
}

func testExpire(t *testing.T, newStore Factory) {
	t.Run("NotDueConflict", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withExpiresAt(fx.clock.Now().Add(time.Minute)))
		_, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: tenant, ID: p.ID})
		requireConflict(t, err, p.ID, store.StatusPending, nil, false)
		requireSameProposal(t, fx.get(p), p)
	})

	t.Run("Due", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew(withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(time.Minute)
		res, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: tenant, ID: p.ID})
		if err != nil {
			t.Fatalf("Expire: %v", err)
		}
		if !res.Changed || res.From != store.StatusPending {
			t.Errorf("Expire = changed %t from %s, want true from pending", res.Changed, res.From)
		}
		requireStatus(t, res.Proposal, store.StatusExpired)
		got := fx.get(p)
		requireStatus(t, got, store.StatusExpired)
		if got.Outcome == nil || got.Outcome.Status != store.StatusExpired {
			t.Errorf("outcome = %+v, want expired", got.Outcome)
		}
		evs := fx.events(p.ID)
		if evs[len(evs)-1].Type != store.EventExpired {
			t.Errorf("events = %v, want them to end with %s", eventTypes(evs), store.EventExpired)
		}

		again, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: tenant, ID: p.ID})
		if err != nil {
			t.Fatalf("Expire again: %v", err)
		}
		if again.Changed {
			t.Error("Expire again: Changed = true, want false")
		}
		requireSameProposal(t, fx.get(p), got)
		if n := len(fx.messages(thread)); n != 1 {
			t.Errorf("thread has %d messages, want 1", n)
		}
	})

	t.Run("ApprovedWaitDue", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved(withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(time.Minute)
		res, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: tenant, ID: p.ID})
		if err != nil {
			t.Fatalf("Expire: %v", err)
		}
		if !res.Changed || res.From != store.StatusApproved {
			t.Errorf("Expire = changed %t from %s, want true from approved", res.Changed, res.From)
		}
		requireStatus(t, fx.get(p), store.StatusExpired)
	})

	t.Run("ApprovedIndependentConflict", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved(independent, withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(time.Hour)
		_, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: tenant, ID: p.ID})
		requireConflict(t, err, p.ID, store.StatusApproved, nil, false)
		requireStatus(t, fx.get(p), store.StatusApproved)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		_, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: tenant, ID: "prp_missing"})
		requireErrorIs(t, err, store.ErrNotFound)
	})
}

func testExpireDue(t *testing.T, newStore Factory) {
	t.Run("BoundedByLimit", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		deadline := fx.clock.Now().Add(time.Minute)
		due := map[string]bool{}
		for range 4 {
			due[fx.createNew(withExpiresAt(deadline)).ID] = true
		}
		// An approved wait-mode proposal lapses too.
		due[fx.approved(withExpiresAt(deadline)).ID] = true
		notDue := fx.createNew(withExpiresAt(deadline.Add(time.Hour)))
		indep := fx.approved(independent, withExpiresAt(deadline))
		rejected := fx.createNew(withExpiresAt(deadline))
		fx.decide(rejected, approver, store.VerdictRejected)
		fx.clock.Advance(time.Minute)

		seen := map[string]bool{}
		sweep := func(limit, want int) {
			t.Helper()
			got, err := fx.store.ExpireDue(fx.ctx, &store.ExpireDueParams{Limit: limit})
			if err != nil {
				t.Fatalf("ExpireDue(%d): %v", limit, err)
			}
			if len(got) != want {
				t.Fatalf("ExpireDue(%d) expired %d, want %d", limit, len(got), want)
			}
			for _, p := range got {
				requireStatus(t, p, store.StatusExpired)
				if !due[p.ID] || seen[p.ID] {
					t.Errorf("ExpireDue returned %s: not due, or already returned", p.ID)
				}
				seen[p.ID] = true
				if p.Outcome == nil || p.Outcome.Status != store.StatusExpired {
					t.Errorf("expired %s has outcome %+v", p.ID, p.Outcome)
				}
			}
		}
		sweep(2, 2)
		sweep(2, 2)
		sweep(10, 1)
		sweep(10, 0)
		for id := range due {
			requireStatus(t, fx.get(&store.Proposal{Tenant: tenant, ID: id}), store.StatusExpired)
		}
		requireStatus(t, fx.get(notDue), store.StatusPending)
		requireStatus(t, fx.get(indep), store.StatusApproved)
		requireStatus(t, fx.get(rejected), store.StatusRejected)
		if n := len(fx.messages(thread)); n != len(due)+1 {
			t.Errorf("thread has %d messages, want %d (one per expiry, one rejection)", n, len(due)+1)
		}
	})

	t.Run("AcrossTenants", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		deadline := fx.clock.Now().Add(time.Minute)
		a := fx.createNew(withExpiresAt(deadline))
		b := fx.proposal(thread, withExpiresAt(deadline))
		b.Tenant = otherTenant
		fx.create(b)
		fx.clock.Advance(time.Minute)
		got, err := fx.store.ExpireDue(fx.ctx, &store.ExpireDueParams{Limit: 10})
		if err != nil {
			t.Fatalf("ExpireDue: %v", err)
		}
		if len(got) != 2 {
			t.Fatalf("ExpireDue expired %v, want %s and %s", ids(got), a.ID, b.ID)
		}
	})
}
