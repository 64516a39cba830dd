package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// requireLease fails the test unless p holds a well-formed lease of owner
// that runs out about d after the fake clock's now.
func requireLease(t *testing.T, fx *fixture, p *store.Proposal, owner string, d time.Duration) {
	t.Helper()
	l := p.Lease
	if l == nil {
		t.Fatalf("proposal %s has no lease", p.ID)
	}
	if l.Owner != owner || l.Token == "" || l.Generation <= 0 {
		t.Errorf("lease = %+v, want owner %s, a token, a positive generation", l, owner)
	}
	// A driver may judge leases by the database's clock, which the fake
	// clock only approximates.
	requireNear(t, "lease ExpiresAt", l.ExpiresAt, fx.clock.Now().Add(d), clockSkew)
}

func testClaim(t *testing.T, newStore Factory) {
	t.Run("Approved", func(t *testing.T) {
		t.Parallel()
		for _, mode := range []store.Mode{store.ModeWait, store.ModeTwoPhase, store.ModeIndependent} {
			t.Run(string(mode), func(t *testing.T) {
				t.Parallel()
				fx := setup(t, newStore)
				p := fx.approved(withMode(mode))
				res, err := fx.store.Claim(fx.ctx, &store.ClaimParams{
					Tenant: tenant, ID: p.ID, Owner: "caller-7", LeaseDuration: longLease, ConsumedBy: "call_spender",
				})
				if err != nil {
					t.Fatalf("Claim: %v", err)
				}
				requireStatus(t, res, store.StatusExecuting)
				requireLease(t, fx, res, "caller-7", longLease)
				if res.Attempt != 1 || res.ConsumedBy != "call_spender" || res.OperationID != p.OperationID {
					t.Errorf("claimed: attempt %d, consumed by %q, operation %q; want 1, call_spender, %s",
						res.Attempt, res.ConsumedBy, res.OperationID, p.OperationID)
				}
				if res.Version != p.Version+1 {
					t.Errorf("Version = %d, want %d", res.Version, p.Version+1)
				}
				got := fx.get(p)
				requireSameProposal(t, got, res)
				evs := fx.events(p.ID)
				if last := evs[len(evs)-1]; last.Type != store.EventClaimed || last.Actor != "caller-7" {
					t.Errorf("last event = %+v, want claimed by caller-7", last)
				}
			})
		}
	})

	t.Run("NotApprovedConflict", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		pending := fx.createNew()
		executing := fx.claimed()
		rejected := fx.createNew()
		fx.decide(rejected, approver, store.VerdictRejected)
		for _, p := range []*store.Proposal{pending, executing, rejected} {
			before := fx.get(p)
			_, err := fx.store.Claim(fx.ctx, &store.ClaimParams{Tenant: tenant, ID: p.ID, Owner: worker2, LeaseDuration: longLease, ConsumedBy: "call_x"})
			requireConflict(t, err, p.ID, before.Status, []store.Status{store.StatusApproved}, false)
			requireSameProposal(t, fx.get(p), before)
		}
	})

	t.Run("LapsedApprovalExpires", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved(withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(time.Minute)
		res, err := fx.store.Claim(fx.ctx, &store.ClaimParams{Tenant: tenant, ID: p.ID, Owner: worker, LeaseDuration: longLease, ConsumedBy: p.ToolCallID})
		requireConflict(t, err, p.ID, store.StatusExpired, []store.Status{store.StatusApproved}, false)
		got := fx.get(p)
		requireStatus(t, got, store.StatusExpired)
		// The claim returns the expired proposal, so that its caller settles
		// the expiry once (hooks, metrics, waiters).
		if res == nil {
			t.Fatalf("Claim of a lapsed approval returned no proposal, want the expired one")
		}
		requireSameProposal(t, res, got)
		if got.Lease != nil || got.Attempt != 0 {
			t.Errorf("expired proposal: lease %+v, attempt %d; want none, 0", got.Lease, got.Attempt)
		}
		if msgs := fx.messages(thread); len(msgs) != 1 || msgs[0].Outcome == nil || msgs[0].Outcome.Status != store.StatusExpired {
			t.Errorf("thread messages = %+v, want the expired outcome", msgs)
		}
		// A later claim finds it expired by someone else: that expiry is
		// not its to settle, so it gets no proposal.
		again, err := fx.store.Claim(fx.ctx, &store.ClaimParams{Tenant: tenant, ID: p.ID, Owner: worker2, LeaseDuration: longLease, ConsumedBy: p.ToolCallID})
		requireConflict(t, err, p.ID, store.StatusExpired, []store.Status{store.StatusApproved}, false)
		if again != nil {
			t.Fatalf("Claim of a proposal already expired returned it; want no proposal (the expiry was settled by its claimer)")
		}
	})

	t.Run("IndependentPastDeadline", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved(independent, withExpiresAt(fx.clock.Now().Add(time.Minute)))
		fx.clock.Advance(time.Hour)
		requireStatus(t, fx.claim(p, longLease), store.StatusExecuting)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.approved()
		_, err := fx.store.Claim(fx.ctx, &store.ClaimParams{Tenant: otherTenant, ID: p.ID, Owner: worker, LeaseDuration: longLease})
		requireErrorIs(t, err, store.ErrNotFound)
		requireStatus(t, fx.get(p), store.StatusApproved)
	})
}

// fencedOps are the calls a lease fences, each run with the given fence.
func fencedOps(fx *fixture, p *store.Proposal) map[string]func(store.Fence) error {
	return map[string]func(store.Fence) error{
		"RenewLease": func(f store.Fence) error {
			_, err := fx.store.RenewLease(fx.ctx, &store.RenewLeaseParams{Tenant: tenant, ID: p.ID, Fence: f, LeaseDuration: longLease})
			return err
		},
		"BeginRetry": func(f store.Fence) error {
			_, err := fx.store.BeginRetry(fx.ctx, &store.BeginRetryParams{Tenant: tenant, ID: p.ID, Fence: f, LeaseDuration: longLease})
			return err
		},
		"Settle": func(f store.Fence) error {
			_, err := fx.store.Settle(fx.ctx, &store.SettleParams{Tenant: tenant, ID: p.ID, Fence: f, Status: store.StatusSucceeded, Executed: ptr(true)})
			return err
		},
	}
}

func testFence(t *testing.T, newStore Factory) {
	t.Run("StaleFenceLeaseLost", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		good := fenceOf(p)
		fences := map[string]store.Fence{
			"WrongToken":      {Token: "not-the-token", Generation: good.Generation},
			"WrongGeneration": {Token: good.Token, Generation: good.Generation + 1},
			"OlderGeneration": {Token: good.Token, Generation: good.Generation - 1},
			"Empty":           {},
		}
		for opName, op := range fencedOps(fx, p) {
			for fenceName, f := range fences {
				err := op(f)
				if err == nil {
					t.Fatalf("%s with %s: no error, want lease lost", opName, fenceName)
				}
				requireLeaseLost(t, err)
			}
		}
		requireSameProposal(t, fx.get(p), p)
	})

	t.Run("RenewLease", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claim(fx.approved(), time.Minute)
		fx.clock.Advance(30 * time.Second)
		l, err := fx.store.RenewLease(fx.ctx, &store.RenewLeaseParams{Tenant: tenant, ID: p.ID, Fence: fenceOf(p), LeaseDuration: longLease})
		if err != nil {
			t.Fatalf("RenewLease: %v", err)
		}
		if l.Token != p.Lease.Token || l.Generation != p.Lease.Generation || l.Owner != worker {
			t.Errorf("renewed lease = %+v, want the same token, generation and owner as %+v", l, p.Lease)
		}
		if !l.ExpiresAt.After(p.Lease.ExpiresAt) {
			t.Errorf("renewed lease runs out at %v, not after %v", l.ExpiresAt, p.Lease.ExpiresAt)
		}
		got := fx.get(p)
		requireStatus(t, got, store.StatusExecuting)
		requireLease(t, fx, got, worker, longLease)
		// The renewed lease still fences: the old fence is the current one.
		fx.succeed(got)
	})

	t.Run("RenewExpiredLeaseNobodyTook", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claim(fx.approved(), shortLease)
		fx.elapse(shortLease + leaseSlack)
		// The fence, not the clock, decides who holds the lease.
		if _, err := fx.store.RenewLease(fx.ctx, &store.RenewLeaseParams{Tenant: tenant, ID: p.ID, Fence: fenceOf(p), LeaseDuration: longLease}); err != nil {
			t.Fatalf("RenewLease of an expired lease nobody took: %v", err)
		}
		if got := fx.claimBatch(worker2, longLease, 10); len(got) != 0 {
			t.Errorf("ClaimBatch took a renewed lease: %d claimed", len(got))
		}
	})

	t.Run("ExpiredLeaseNobodyTookSettles", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claim(fx.approved(independent), shortLease)
		fx.elapse(shortLease + leaseSlack)
		// The holder's lease time has passed, but no claim took over: its
		// fence still decides, and its known outcome is applied.
		res := fx.succeed(p)
		if !res.Changed || res.From != store.StatusExecuting {
			t.Errorf("Settle = changed %t from %s, want changed from executing", res.Changed, res.From)
		}
		requireStatus(t, res.Proposal, store.StatusSucceeded)
		if got := fx.claimBatch(worker2, longLease, 10); len(got) != 0 {
			t.Errorf("ClaimBatch after the settlement claimed %v", claimedIDs(got))
		}
	})

	t.Run("RenewReturnsLeaseByStoreClock", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claim(fx.approved(), shortLease)
		fx.clock.Advance(30 * time.Second)
		l, err := fx.store.RenewLease(fx.ctx, &store.RenewLeaseParams{Tenant: tenant, ID: p.ID, Fence: fenceOf(p), LeaseDuration: time.Hour})
		if err != nil {
			t.Fatalf("RenewLease: %v", err)
		}
		// The expiry is the store's now plus the duration, what a claimer
		// judges it by.
		got := fx.get(p)
		if !l.ExpiresAt.Equal(got.Lease.ExpiresAt) {
			t.Errorf("renewed lease runs out at %v, the stored lease at %v", l.ExpiresAt, got.Lease.ExpiresAt)
		}
		requireLease(t, fx, got, worker, time.Hour)
	})

	t.Run("TakenOverLeaseLost", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		a := fx.claim(fx.approved(independent), shortLease)
		b := fx.claim(fx.approved(independent), shortLease)
		fx.elapse(shortLease + leaseSlack)
		claimed := fx.claimBatch(worker2, longLease, 10)
		if len(claimed) != 2 {
			t.Fatalf("ClaimBatch recovered %v, want both", claimedIDs(claimed))
		}
		old := map[string]*store.Proposal{a.ID: a, b.ID: b}
		holders := map[string]*store.Proposal{}
		for _, c := range claimed {
			if o := old[c.Proposal.ID]; o == nil || c.From != store.StatusExecuting || c.Proposal.Lease.Generation <= o.Lease.Generation {
				t.Fatalf("recovered %s from %s, generation %d; want one of %s, %s from executing, a newer generation",
					c.Proposal.ID, c.From, c.Proposal.Lease.Generation, a.ID, b.ID)
			}
			holders[c.Proposal.ID] = c.Proposal
		}
		// The old holder's fenced calls fail, and write nothing.
		for name, op := range fencedOps(fx, a) {
			err := op(fenceOf(a))
			if err == nil {
				t.Fatalf("%s by the old holder: no error, want lease lost", name)
			}
			requireLeaseLost(t, err)
			requireSameProposal(t, fx.get(a), holders[a.ID])
		}
		sp := settleParams(b, store.StatusSucceeded)
		_, errs, err := fx.store.SettleMany(fx.ctx, []*store.SettleParams{sp})
		if err != nil || len(errs) != 1 {
			t.Fatalf("SettleMany = %v, %v", errs, err)
		}
		requireLeaseLost(t, errs[0])
		requireSameProposal(t, fx.get(b), holders[b.ID])
		// The new holders settle.
		fx.succeed(holders[a.ID])
		fx.succeed(holders[b.ID])
	})

	t.Run("BeginRetry", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claim(fx.approved(), time.Minute)
		fx.clock.Advance(30 * time.Second)
		got, err := fx.store.BeginRetry(fx.ctx, &store.BeginRetryParams{Tenant: tenant, ID: p.ID, Fence: fenceOf(p), LeaseDuration: longLease})
		if err != nil {
			t.Fatalf("BeginRetry: %v", err)
		}
		requireStatus(t, got, store.StatusExecuting)
		if got.Attempt != 2 || got.OperationID != p.OperationID {
			t.Errorf("retry: attempt %d, operation %q; want 2, %s", got.Attempt, got.OperationID, p.OperationID)
		}
		if got.Lease == nil || got.Lease.Token != p.Lease.Token || got.Lease.Generation != p.Lease.Generation {
			t.Fatalf("retry lease = %+v, want the held lease %+v", got.Lease, p.Lease)
		}
		requireLease(t, fx, got, worker, longLease)
		requireSameProposal(t, fx.get(p), got)
		evs := fx.events(p.ID)
		if last := evs[len(evs)-1]; last.Type != store.EventRetried {
			t.Errorf("last event = %+v, want %s", last, store.EventRetried)
		}
		again, err := fx.store.BeginRetry(fx.ctx, &store.BeginRetryParams{Tenant: tenant, ID: p.ID, Fence: fenceOf(got), LeaseDuration: longLease})
		if err != nil {
			t.Fatalf("BeginRetry again: %v", err)
		}
		if again.Attempt != 3 || again.OperationID != p.OperationID {
			t.Errorf("second retry: attempt %d, operation %q; want 3, %s", again.Attempt, again.OperationID, p.OperationID)
		}
	})

	t.Run("BeginRetryOnlyWhileExecuting", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		sp := settleParams(p, store.StatusReconciling)
		fx.settle(sp)
		_, err := fx.store.BeginRetry(fx.ctx, &store.BeginRetryParams{Tenant: tenant, ID: p.ID, Fence: fenceOf(p), LeaseDuration: longLease})
		requireLeaseLost(t, err)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		for name, op := range fencedOps(fx, &store.Proposal{ID: "prp_missing"}) {
			if err := op(fenceOf(p)); !errorsIsNotFound(err) {
				t.Errorf("%s of a missing proposal: %v, want ErrNotFound", name, err)
			}
		}
	})
}

func testSettle(t *testing.T, newStore Factory) {
	t.Run("Succeeded", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		fx.clock.Advance(time.Second)
		now := fx.clock.Now()
		sp := settleParams(p, store.StatusSucceeded)
		sp.Executed = ptr(true)
		sp.Receipt = "rf_123"
		sp.Result = json.RawMessage(`{"refund_id": "rf_123", "amount": 40}`)
		sp.Summary = "Refunded 40 EUR to c_9."
		sp.Presentation = "Done: refunded 40 EUR to c_9 (rf_123)."
		res := fx.settle(sp)
		if !res.Changed || res.From != store.StatusExecuting {
			t.Errorf("Settle = changed %t from %s, want true from executing", res.Changed, res.From)
		}
		got := fx.get(p)
		requireStatus(t, got, store.StatusSucceeded)
		requireSameProposal(t, res.Proposal, got)
		if got.Lease != nil || got.NextAttemptAt != nil {
			t.Errorf("settled proposal keeps lease %+v, next attempt %v", got.Lease, got.NextAttemptAt)
		}
		o := got.Outcome
		if o == nil {
			t.Fatal("no outcome")
		}
		if o.Status != store.StatusSucceeded || o.ProposalID != p.ID || o.Executed == nil || !*o.Executed ||
			o.Receipt != "rf_123" || !jsonEqual(o.Result, sp.Result) || o.Error != nil || o.Summary != sp.Summary {
			t.Errorf("outcome = %+v, want succeeded, executed, receipt, result and summary as settled", o)
		}
		requireTime(t, "outcome At", o.At, now)

		msgs := fx.messages(thread)
		if len(msgs) != 1 {
			t.Fatalf("thread has %d messages, want 1", len(msgs))
		}
		m := msgs[0]
		if m.ProposalID != p.ID || m.Role != "assistant" || m.Text != sp.Presentation || m.Outcome == nil ||
			m.Outcome.Receipt != "rf_123" || m.Outcome.Status != store.StatusSucceeded || m.Outcome.Summary != sp.Summary {
			t.Errorf("message = %+v (outcome %+v), want the presentation and the outcome", m, m.Outcome)
		}
		requireTime(t, "message CreatedAt", m.CreatedAt, now)

		_, err := fx.store.Settle(fx.ctx, sp)
		requireLeaseLost(t, err)
		if n := len(fx.messages(thread)); n != 1 {
			t.Errorf("thread has %d messages after a second settle, want 1", n)
		}
		requireSameProposal(t, fx.get(p), got)
		evs := fx.events(p.ID)
		if last := evs[len(evs)-1]; last.Type != store.EventSettled || last.Actor != worker {
			t.Errorf("last event = %+v, want settled by %s", last, worker)
		}
	})

	t.Run("Failed", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		sp := settleParams(p, store.StatusFailed)
		sp.Executed = ptr(false)
		sp.Error = ptr("card declined")
		fx.settle(sp)
		got := fx.get(p)
		requireStatus(t, got, store.StatusFailed)
		o := got.Outcome
		if o == nil || o.Executed == nil || *o.Executed || o.Error == nil || *o.Error != "card declined" ||
			!strings.Contains(o.Summary, "card declined") {
			t.Fatalf("outcome = %+v, want failed, not executed, the error in the summary", o)
		}
		// Without a presentation the message carries the summary.
		if msgs := fx.messages(thread); len(msgs) != 1 || msgs[0].Text != o.Summary {
			t.Errorf("thread messages = %+v, want one with the summary", msgs)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		sp := settleParams(p, store.StatusUnknown)
		sp.Error = ptr("timeout after the request was sent")
		fx.settle(sp)
		got := fx.get(p)
		requireStatus(t, got, store.StatusUnknown)
		if got.Lease != nil || got.Outcome == nil || got.Outcome.Executed != nil {
			t.Errorf("unknown: lease %+v, outcome %+v; want no lease, executed null", got.Lease, got.Outcome)
		}
		if n := len(fx.messages(thread)); n != 1 {
			t.Errorf("thread has %d messages, want 1", n)
		}
	})

	t.Run("ReconcilingKeepsLease", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		next := fx.clock.Now().Add(time.Minute)
		sp := settleParams(p, store.StatusReconciling)
		sp.NextAttemptAt = &next
		sp.Error = ptr("502 from the backend")
		res := fx.settle(sp)
		if !res.Changed || res.From != store.StatusExecuting {
			t.Errorf("Settle = changed %t from %s, want true from executing", res.Changed, res.From)
		}
		got := fx.get(p)
		requireStatus(t, got, store.StatusReconciling)
		if got.Lease == nil || got.Lease.Token != p.Lease.Token || got.Lease.Generation != p.Lease.Generation {
			t.Fatalf("reconciling lease = %+v, want the held one %+v", got.Lease, p.Lease)
		}
		if got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(next) {
			t.Errorf("NextAttemptAt = %v, want %v", got.NextAttemptAt, next)
		}
		if got.Outcome == nil || got.Outcome.Status != store.StatusReconciling {
			t.Errorf("outcome = %+v, want reconciling", got.Outcome)
		}
		if n := len(fx.messages(thread)); n != 0 {
			t.Errorf("reconciling admitted %d messages, want none", n)
		}
		// The holder reconciles at once under the same lease.
		if _, err := fx.store.RenewLease(fx.ctx, &store.RenewLeaseParams{Tenant: tenant, ID: p.ID, Fence: fenceOf(p), LeaseDuration: longLease}); err != nil {
			t.Fatalf("RenewLease while reconciling: %v", err)
		}
		done := settleParams(p, store.StatusSucceeded)
		done.Executed = ptr(true)
		done.Receipt = "rf_9"
		res = fx.settle(done)
		if res.From != store.StatusReconciling {
			t.Errorf("Settle from %s, want reconciling", res.From)
		}
		got = fx.get(p)
		requireStatus(t, got, store.StatusSucceeded)
		if got.Lease != nil || got.NextAttemptAt != nil || got.Outcome.Receipt != "rf_9" {
			t.Errorf("succeeded: lease %+v, next attempt %v, outcome %+v", got.Lease, got.NextAttemptAt, got.Outcome)
		}
		if msgs := fx.messages(thread); len(msgs) != 1 || msgs[0].Outcome == nil || msgs[0].Outcome.Status != store.StatusSucceeded {
			t.Errorf("thread messages = %+v, want the one succeeded outcome", msgs)
		}
	})

	t.Run("ReconcilingReleasesLease", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		next := fx.clock.Now().Add(time.Minute)
		sp := settleParams(p, store.StatusReconciling)
		sp.ReleaseLease = true
		sp.NextAttemptAt = &next
		fx.settle(sp)
		got := fx.get(p)
		requireStatus(t, got, store.StatusReconciling)
		if got.Lease != nil {
			t.Errorf("released lease still held: %+v", got.Lease)
		}
		if got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(next) {
			t.Errorf("NextAttemptAt = %v, want %v", got.NextAttemptAt, next)
		}
		for name, op := range fencedOps(fx, p) {
			if err := op(fenceOf(p)); err == nil {
				t.Errorf("%s with a released lease: no error", name)
			} else {
				requireLeaseLost(t, err)
			}
		}
	})

	t.Run("InvalidStatus", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		for _, s := range []store.Status{store.StatusPending, store.StatusApproved, store.StatusExecuting, store.StatusRejected,
			store.StatusExpired, store.StatusCancelled, store.StatusSuperseded, "", "bogus"} {
			_, err := fx.store.Settle(fx.ctx, settleParams(p, s))
			if !isInvalidParams(err) {
				t.Errorf("Settle to %q: %v, want ErrInvalidParams", s, err)
			}
		}
		requireSameProposal(t, fx.get(p), p)
	})

	t.Run("DeletedThreadDropsMessage", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		if err := fx.store.DeleteThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: thread}); err != nil {
			t.Fatalf("DeleteThread: %v", err)
		}
		fx.succeed(p)
		requireStatus(t, fx.get(p), store.StatusSucceeded)
		if msgs := messagesOrNone(t, fx, thread); len(msgs) != 0 {
			t.Errorf("an outcome settled after the thread was deleted was admitted: %+v", msgs)
		}
		_, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: thread})
		requireErrorIs(t, err, store.ErrNotFound)
		// Nor does the message surface when a thread of that id is made again.
		if _, err := fx.store.EnsureThread(fx.ctx, &store.EnsureThreadParams{Tenant: tenant, ID: thread, Owner: requester}); err != nil {
			t.Fatalf("EnsureThread: %v", err)
		}
		if msgs := fx.messages(thread); len(msgs) != 0 {
			t.Errorf("the recreated thread has %d messages, want none", len(msgs))
		}
	})
}

func testClaimBatch(t *testing.T, newStore Factory) {
	t.Run("ApprovedIndependentOnly", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		want := fx.approved(independent)
		fx.approved(withMode(store.ModeWait))
		fx.approved(withMode(store.ModeTwoPhase))
		fx.createNew(independent)
		rejected := fx.createNew(independent)
		fx.decide(rejected, approver, store.VerdictRejected)

		got := fx.claimBatch(worker, longLease, 10)
		if len(got) != 1 || got[0].Proposal.ID != want.ID {
			t.Fatalf("ClaimBatch = %v, want [%s]", claimedIDs(got), want.ID)
		}
		c := got[0]
		if c.From != store.StatusApproved {
			t.Errorf("From = %s, want approved", c.From)
		}
		requireStatus(t, c.Proposal, store.StatusExecuting)
		requireLease(t, fx, c.Proposal, worker, longLease)
		if c.Proposal.Attempt != 1 {
			t.Errorf("Attempt = %d, want 1", c.Proposal.Attempt)
		}
		requireSameProposal(t, fx.get(want), c.Proposal)
		if again := fx.claimBatch(worker2, longLease, 10); len(again) != 0 {
			t.Errorf("second ClaimBatch = %v, want none while the lease is held", claimedIDs(again))
		}
	})

	t.Run("RespectsLimit", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		all := map[string]bool{}
		for range 5 {
			all[fx.approved(independent).ID] = true
		}
		seen := map[string]bool{}
		for _, want := range []int{2, 2, 1, 0} {
			got := fx.claimBatch(worker, longLease, 2)
			if len(got) != want {
				t.Fatalf("ClaimBatch(limit 2) = %d, want %d", len(got), want)
			}
			for _, c := range got {
				if !all[c.Proposal.ID] || seen[c.Proposal.ID] {
					t.Errorf("ClaimBatch returned %s twice or out of nowhere", c.Proposal.ID)
				}
				seen[c.Proposal.ID] = true
			}
		}
	})

	t.Run("RecoversExpiredLease", func(t *testing.T) {
		t.Parallel()
		for _, mode := range []store.Mode{store.ModeIndependent, store.ModeWait} {
			t.Run(string(mode), func(t *testing.T) {
				t.Parallel()
				fx := setup(t, newStore)
				old := fx.claim(fx.approved(withMode(mode)), shortLease)
				if got := fx.claimBatch(worker2, longLease, 10); len(got) != 0 {
					t.Fatalf("ClaimBatch took a held lease: %v", claimedIDs(got))
				}
				fx.elapse(shortLease + leaseSlack)

				got := fx.claimBatch(worker2, longLease, 10)
				if len(got) != 1 || got[0].Proposal.ID != old.ID {
					t.Fatalf("ClaimBatch = %v, want [%s]", claimedIDs(got), old.ID)
				}
				c := got[0]
				if c.From != store.StatusExecuting {
					t.Errorf("From = %s, want executing", c.From)
				}
				requireStatus(t, c.Proposal, store.StatusExecuting)
				requireLease(t, fx, c.Proposal, worker2, longLease)
				if c.Proposal.Lease.Generation <= old.Lease.Generation || c.Proposal.Lease.Token == old.Lease.Token {
					t.Errorf("recovered lease %+v, want a new token and a generation above %d", c.Proposal.Lease, old.Lease.Generation)
				}
				// Whether the first attempt ran is unknown: it still counts.
				if c.Proposal.Attempt != old.Attempt || c.Proposal.OperationID != old.OperationID {
					t.Errorf("recovered: attempt %d, operation %q; want %d, %s", c.Proposal.Attempt, c.Proposal.OperationID, old.Attempt, old.OperationID)
				}
				for name, op := range fencedOps(fx, old) {
					if err := op(fenceOf(old)); err == nil {
						t.Errorf("%s with the old fence: no error", name)
					} else {
						requireLeaseLost(t, err)
					}
				}
				fx.succeed(c.Proposal)
				requireStatus(t, fx.get(old), store.StatusSucceeded)
			})
		}
	})

	t.Run("Reconciling", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claim(fx.approved(independent), longLease)
		next := fx.clock.Now().Add(shortLease)
		sp := settleParams(p, store.StatusReconciling)
		sp.ReleaseLease = true
		sp.NextAttemptAt = &next
		fx.settle(sp)
		if got := fx.claimBatch(worker2, longLease, 10); len(got) != 0 {
			t.Fatalf("ClaimBatch before the next attempt is due = %v, want none", claimedIDs(got))
		}
		fx.elapse(shortLease + leaseSlack)
		got := fx.claimBatch(worker2, longLease, 10)
		if len(got) != 1 || got[0].Proposal.ID != p.ID {
			t.Fatalf("ClaimBatch = %v, want [%s]", claimedIDs(got), p.ID)
		}
		c := got[0]
		if c.From != store.StatusReconciling {
			t.Errorf("From = %s, want reconciling", c.From)
		}
		requireStatus(t, c.Proposal, store.StatusReconciling)
		requireLease(t, fx, c.Proposal, worker2, longLease)
		if c.Proposal.Lease.Generation <= p.Lease.Generation {
			t.Errorf("generation %d, want above %d", c.Proposal.Lease.Generation, p.Lease.Generation)
		}
		if again := fx.claimBatch(worker, longLease, 10); len(again) != 0 {
			t.Errorf("ClaimBatch took a reconciler's held lease: %v", claimedIDs(again))
		}
		res := fx.succeed(c.Proposal)
		if res.From != store.StatusReconciling {
			t.Errorf("Settle from %s, want reconciling", res.From)
		}
	})

	t.Run("ReconcilingWaitsForHeldLease", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		// The holder keeps its lease to reconcile at once: nobody else may
		// take the proposal until that lease runs out.
		p := fx.claim(fx.approved(independent), shortLease)
		fx.settle(settleParams(p, store.StatusReconciling))
		if got := fx.claimBatch(worker2, longLease, 10); len(got) != 0 {
			t.Fatalf("ClaimBatch took a held reconciling lease: %v", claimedIDs(got))
		}
		fx.elapse(shortLease + leaseSlack)
		got := fx.claimBatch(worker2, longLease, 10)
		if len(got) != 1 || got[0].From != store.StatusReconciling {
			t.Fatalf("ClaimBatch after the lease ran out = %v, want the reconciling proposal", claimedIDs(got))
		}
		_, err := fx.store.Settle(fx.ctx, settleParams(p, store.StatusSucceeded))
		requireLeaseLost(t, err)
	})

	t.Run("ReconcilingNotDueWithFreeLease", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claim(fx.approved(independent), shortLease)
		next := fx.clock.Now().Add(time.Hour)
		sp := settleParams(p, store.StatusReconciling)
		sp.NextAttemptAt = &next
		fx.settle(sp)
		fx.elapse(shortLease + leaseSlack)
		if got := fx.claimBatch(worker2, longLease, 10); len(got) != 0 {
			t.Errorf("ClaimBatch before the next attempt is due = %v, want none", claimedIDs(got))
		}
	})

	t.Run("TerminalNeverClaimed", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.succeed(fx.claim(fx.approved(independent), shortLease))
		unknown := fx.claim(fx.approved(independent), shortLease)
		fx.settle(settleParams(unknown, store.StatusUnknown))
		fx.elapse(shortLease + leaseSlack)
		if got := fx.claimBatch(worker2, longLease, 10); len(got) != 0 {
			t.Errorf("ClaimBatch = %v, want none", claimedIDs(got))
		}
	})
}

func testResolve(t *testing.T, newStore Factory) {
	t.Run("OnlyUncertain", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		pending := fx.createNew()
		approved := fx.approved()
		executing := fx.claimed()
		succeeded := fx.claimed()
		fx.succeed(succeeded)
		for _, p := range []*store.Proposal{pending, approved, executing, succeeded} {
			before := fx.get(p)
			_, err := fx.store.Resolve(fx.ctx, &store.ResolveParams{Tenant: tenant, ID: p.ID, Actor: "ops", Via: "cli", Status: store.StatusSucceeded, Note: "checked"})
			requireConflict(t, err, p.ID, before.Status, []store.Status{store.StatusReconciling, store.StatusUnknown}, false)
			requireSameProposal(t, fx.get(p), before)
		}
	})

	t.Run("ReconcilingSucceeded", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		approveWithGrant(t, fx, p, grantFor(fx, p, store.ScopeThread))
		p = fx.claim(p, longLease)
		sp := settleParams(p, store.StatusReconciling)
		sp.Executed = ptr(true)
		fx.settle(sp)
		fx.clock.Advance(time.Second)
		now := fx.clock.Now()
		res, err := fx.store.Resolve(fx.ctx, &store.ResolveParams{
			Tenant: tenant, ID: p.ID, Actor: "ops", Via: "cli", Status: store.StatusSucceeded, Receipt: "rf_77", Note: "seen in the ledger",
		})
		if err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		if !res.Changed || res.From != store.StatusReconciling {
			t.Errorf("Resolve = changed %t from %s, want true from reconciling", res.Changed, res.From)
		}
		got := fx.get(p)
		requireStatus(t, got, store.StatusSucceeded)
		o := got.Outcome
		if o == nil || o.ResolvedBy != "ops" || o.Note != "seen in the ledger" || o.Receipt != "rf_77" || o.Status != store.StatusSucceeded ||
			o.Executed == nil || !*o.Executed {
			t.Fatalf("outcome = %+v, want succeeded, resolved by ops with the note and receipt", o)
		}
		requireTime(t, "outcome At", o.At, now)
		if got.Lease != nil {
			t.Errorf("resolved proposal keeps lease %+v", got.Lease)
		}
		// Resolution takes the lease away from the reconciler.
		_, err = fx.store.Settle(fx.ctx, settleParams(p, store.StatusFailed))
		requireLeaseLost(t, err)
		if _, err := fx.store.FindGrant(fx.ctx, findParams(p)); err != nil {
			t.Errorf("FindGrant after a resolution to succeeded: %v", err)
		}
		msgs := fx.messages(thread)
		if len(msgs) != 1 || msgs[0].Outcome == nil || msgs[0].Outcome.ResolvedBy != "ops" {
			t.Errorf("thread messages = %+v, want the resolved outcome", msgs)
		}
		evs := fx.events(p.ID)
		if last := evs[len(evs)-1]; last.Type != store.EventResolved || last.Actor != "ops" || last.Via != "cli" {
			t.Errorf("last event = %+v, want resolved by ops via cli", last)
		}
	})

	t.Run("UnknownFailed", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		approveWithGrant(t, fx, p, grantFor(fx, p, store.ScopeThread))
		fx.settle(settleParams(fx.claim(p, longLease), store.StatusUnknown))
		res, err := fx.store.Resolve(fx.ctx, &store.ResolveParams{
			Tenant: tenant, ID: p.ID, Actor: "ops", Via: "api", Status: store.StatusFailed, Note: "not in the ledger",
		})
		if err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		if res.From != store.StatusUnknown {
			t.Errorf("Resolve from %s, want unknown", res.From)
		}
		got := fx.get(p)
		requireStatus(t, got, store.StatusFailed)
		o := got.Outcome
		if o == nil || o.ResolvedBy != "ops" || o.Note != "not in the ledger" || o.Error == nil || !strings.Contains(*o.Error, "not in the ledger") {
			t.Fatalf("outcome = %+v, want failed, resolved by ops, the note in the error", o)
		}
		_, err = fx.store.FindGrant(fx.ctx, findParams(p))
		requireErrorIs(t, err, store.ErrNotFound)
		// unknown admitted its outcome; the resolution admits the verdict.
		msgs := fx.messages(thread)
		if len(msgs) != 2 || msgs[1].Outcome == nil || msgs[1].Outcome.Status != store.StatusFailed || msgs[1].Outcome.ResolvedBy != "ops" {
			t.Errorf("thread messages = %+v, want the unknown outcome then the resolution", msgs)
		}
		// A resolved proposal is not resolved again.
		_, err = fx.store.Resolve(fx.ctx, &store.ResolveParams{Tenant: tenant, ID: p.ID, Actor: "ops", Status: store.StatusSucceeded})
		requireConflict(t, err, p.ID, store.StatusFailed, nil, false)
	})

	t.Run("InvalidStatus", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		fx.settle(settleParams(p, store.StatusUnknown))
		for _, s := range []store.Status{store.StatusUnknown, store.StatusReconciling, store.StatusPending, ""} {
			_, err := fx.store.Resolve(fx.ctx, &store.ResolveParams{Tenant: tenant, ID: p.ID, Actor: "ops", Status: s})
			if !isInvalidParams(err) {
				t.Errorf("Resolve to %q: %v, want ErrInvalidParams", s, err)
			}
		}
		requireStatus(t, fx.get(p), store.StatusUnknown)
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		_, err := fx.store.Resolve(fx.ctx, &store.ResolveParams{Tenant: tenant, ID: "prp_missing", Actor: "ops", Status: store.StatusFailed})
		requireErrorIs(t, err, store.ErrNotFound)
	})
}

func claimedIDs(cs []*store.Claimed) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Proposal.ID + "(" + string(c.From) + ")"
	}
	return out
}
