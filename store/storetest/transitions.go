package storetest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// TransitionRule applies one rule of store/transition.go to p, changing it
// in place, and returns its change (nil: the rule does not apply).
type TransitionRule func(p *store.Proposal) (*store.Change, error)

// TransitionRules are the rules of store/transition.go that change an
// existing proposal, each with parameters that set every field it may
// change, applied at now: for a driver's tests that hold its row write to
// what the rules change (which columns a transition writes). Apply each to
// FullProposal in every status of AllStatuses.
func TransitionRules(now time.Time) map[string]TransitionRule {
	next := now.Add(time.Minute)
	errText := "boom"
	fence := store.Fence{Token: "tok", Generation: 7}
	rules := map[string]TransitionRule{
		"approve": func(p *store.Proposal) (*store.Change, error) {
			_, c, err := store.ApplyDecision(p, &store.DecideParams{Actor: "bob", Verdict: store.VerdictApproved, Via: "api",
				Remember: store.ScopeThread, AwaitsCaller: true, Grant: &store.Grant{ID: "grt_" + p.ID, Scope: store.ScopeThread}}, now)
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
	return rules
}

// AllStatuses are every proposal status.
var AllStatuses = []store.Status{store.StatusPending, store.StatusApproved, store.StatusExecuting, store.StatusSucceeded,
	store.StatusFailed, store.StatusReconciling, store.StatusUnknown, store.StatusRejected, store.StatusExpired,
	store.StatusSuperseded, store.StatusCancelled}

// FullProposal is a proposal with every field set, in the given status and
// mode, its times around now (its escalation and reminder due, its lease
// live): what TransitionRules change.
func FullProposal(now time.Time, id string, status store.Status, mode store.Mode) *store.Proposal {
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
