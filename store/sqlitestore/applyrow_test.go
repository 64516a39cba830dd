package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// fullProposal is a proposal with every field set, in the given status.
func fullProposal(now time.Time, id string, status store.Status, mode store.Mode) *store.Proposal {
	na, esc, rem := now.Add(-time.Minute), now.Add(-time.Second), now.Add(-2*time.Second)
	return &store.Proposal{
		ID: id, Tenant: "acme", Requester: "alice", RequesterRoles: []string{"r"}, RequesterKind: "human",
		ThreadID: "t1", RunID: "run", ToolCallID: "c-" + id, Action: "a", ActionVersion: "1",
		Input: json.RawMessage(`{"x":1}`), RawInput: json.RawMessage(`{"x": 1}`), InputDigest: "d", Preview: "p",
		StateVersion: "sv", Confirmation: store.Confirmation{Title: "T", Verb: "V"}, ConfirmationID: "cnf-" + id,
		Mode: mode, Status: status, Approvers: []string{"role:x"}, Quorum: 1, ForbidSelfApproval: true,
		Channels: []string{"web"}, Notify: []string{"slack"}, StepUp: "passkey",
		RememberScopes: []store.Scope{store.ScopeRun, store.ScopeThread}, GrantAnyInput: true, GrantTTL: time.Hour,
		RuleFingerprint: "fp", RuleMatch: "m", RuleWhen: "w", ReplacementKey: "k",
		Decisions:  []store.Decision{{Actor: "carol", Decision: store.VerdictApproved, Via: "web", At: now.Add(-time.Hour), Remember: store.ScopeThread}},
		ExpiresAt:  now.Add(time.Hour),
		EscalateAt: &esc, EscalateTo: []string{"role:x", "role:y"},
		RemindAt: &rem, RemindEvery: time.Minute,
		TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		OperationID: "op", Attempt: 2,
		Lease:      &store.Lease{Owner: "w", Token: "tok", Generation: 7, ExpiresAt: now.Add(time.Minute)},
		ConsumedBy: "c1", NextAttemptAt: &na,
		Outcome: &store.Outcome{ProposalID: id, Status: store.StatusReconciling, Reconciles: 1, At: now.Add(-time.Minute)},
		Version: 7, CreatedAt: now.Add(-2 * time.Hour), UpdatedAt: now.Add(-time.Minute),
	}
}

// TestApplyRowWritesTheRule pins what updateProposalSQL relies on: every
// rule of store/transition.go, applied from every status it accepts, changes
// only the columns that statement writes. Each rule's result is written
// with applyRow over a row holding every field and read back: the row must
// be the rule's result, field for field. A rule that starts changing
// another field fails here until updateProposalSQL writes it.
func TestApplyRowWritesTheRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openInternal(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	next := now.Add(time.Minute)
	errText := "boom"
	fence := store.Fence{Token: "tok", Generation: 7}
	type rule func(p *store.Proposal) (*store.Change, error)
	rules := map[string]rule{
		"approve": func(p *store.Proposal) (*store.Change, error) {
			_, c, err := store.ApplyDecision(p, &store.DecideParams{Actor: "bob", Verdict: store.VerdictApproved, Via: "api",
				Remember: store.ScopeThread, AwaitsCaller: true}, now)
			return c, err
		},
		"reject": func(p *store.Proposal) (*store.Change, error) {
			_, c, err := store.ApplyDecision(p, &store.DecideParams{Actor: "bob", Verdict: store.VerdictRejected, Via: "api", Reason: "no"}, now)
			return c, err
		},
		"decide late": func(p *store.Proposal) (*store.Change, error) {
			_, c, err := store.ApplyDecision(p, &store.DecideParams{Actor: "bob", Verdict: store.VerdictApproved, Via: "api"}, now.Add(2*time.Hour))
			return c, err
		},
		"cancel": func(p *store.Proposal) (*store.Change, error) {
			return store.ApplyCancel(p, &store.CancelParams{Actor: "alice", Reason: "r"}, now)
		},
		"expire":    func(p *store.Proposal) (*store.Change, error) { return store.ApplyExpire(p, now.Add(2*time.Hour)) },
		"supersede": func(p *store.Proposal) (*store.Change, error) { return store.ApplySupersede(p, "prp_new", now), nil },
		"claim": func(p *store.Proposal) (*store.Change, error) {
			return store.ApplyClaim(p, &store.ClaimParams{Owner: "w2", LeaseDuration: time.Minute, ConsumedBy: "c9"}, now)
		},
		"claim late": func(p *store.Proposal) (*store.Change, error) {
			return store.ApplyClaim(p, &store.ClaimParams{Owner: "w2", LeaseDuration: time.Minute, ConsumedBy: "c9"}, now.Add(2*time.Hour))
		},
		"claim batch": func(p *store.Proposal) (*store.Change, error) {
			_, c := store.ApplyClaimBatch(p, &store.ClaimBatchParams{Owner: "w2", LeaseDuration: time.Minute, Limit: 1}, now)
			return c, nil
		},
		"renew": func(p *store.Proposal) (*store.Change, error) {
			return store.ApplyRenew(p, &store.RenewLeaseParams{Fence: fence, LeaseDuration: time.Hour}, now)
		},
		"retry": func(p *store.Proposal) (*store.Change, error) {
			return store.ApplyBeginRetry(p, &store.BeginRetryParams{Fence: fence, LeaseDuration: time.Hour}, now)
		},
		"resolve succeeded": func(p *store.Proposal) (*store.Change, error) {
			return store.ApplyResolve(p, &store.ResolveParams{Actor: "op", Status: store.StatusSucceeded, Receipt: "r", Note: "n"}, now)
		},
		"resolve failed": func(p *store.Proposal) (*store.Change, error) {
			return store.ApplyResolve(p, &store.ResolveParams{Actor: "op", Status: store.StatusFailed, Note: "n"}, now)
		},
		"escalate": func(p *store.Proposal) (*store.Change, error) { return store.ApplyEscalate(p, now) },
		"remind":   func(p *store.Proposal) (*store.Change, error) { return store.ApplyRemind(p, now) },
	}
	for i, sp := range []store.SettleParams{
		{Status: store.StatusSucceeded, Executed: new(true), Receipt: "r", Result: json.RawMessage(`{"ok":true}`)},
		{Status: store.StatusFailed, Executed: new(false), Error: &errText},
		{Status: store.StatusUnknown, Error: &errText, Presentation: "shown"},
		{Status: store.StatusReconciling, Error: &errText},
		{Status: store.StatusReconciling, Error: &errText, ReleaseLease: true, NextAttemptAt: &next, Reconciles: 3},
	} {
		sp.Fence = fence
		rules[fmt.Sprintf("settle %d %s", i, sp.Status)] = func(p *store.Proposal) (*store.Change, error) {
			return store.ApplySettle(p, &sp, now)
		}
	}
	statuses := []store.Status{store.StatusPending, store.StatusApproved, store.StatusExecuting, store.StatusSucceeded,
		store.StatusFailed, store.StatusReconciling, store.StatusUnknown, store.StatusRejected, store.StatusExpired,
		store.StatusSuperseded, store.StatusCancelled}
	applied := map[string]int{}
	n := 0
	for name, apply := range rules {
		for _, from := range statuses {
			for _, mode := range []store.Mode{store.ModeIndependent, store.ModeWait} {
				n++
				base := fullProposal(now, fmt.Sprintf("prp_%d", n), from, mode)
				w := base.Clone()
				c, _ := apply(w) // a change with an error (a claim that expired) is written too
				if c == nil {
					continue
				}
				applied[name]++
				var got *store.Proposal
				err := s.write(ctx, func(tx *wtx, _ time.Time) error {
					if err := insertProposal(ctx, tx, base); err != nil {
						return err
					}
					stored, err := getProposal(ctx, tx, base.Tenant, base.ID)
					if err != nil {
						return err
					}
					if !reflect.DeepEqual(stored, base) {
						return fmt.Errorf("the row as inserted reads back as\n%+v\nwant\n%+v", stored, base)
					}
					if err := applyRow(ctx, tx, w, base.Version, c, now); err != nil {
						return err
					}
					got, err = getProposal(ctx, tx, base.Tenant, base.ID)
					return err
				})
				if err != nil {
					t.Fatalf("%s from %s (%s): %v", name, from, mode, err)
				}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%s from %s (%s): the row as written differs from the rule's result:\n got %+v\nwant %+v",
						name, from, mode, got, w)
				}
			}
		}
	}
	for name := range rules {
		if applied[name] == 0 {
			t.Errorf("%s: applied from no status: the test checks nothing of it", name)
		}
	}
}
