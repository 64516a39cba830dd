package pgstore

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// casBase is a proposal with every field set, for the rules to change.
func casBase(now time.Time, status store.Status) *store.Proposal {
	na := now.Add(-time.Minute)
	return &store.Proposal{
		ID: "prp_1", Tenant: "acme", Requester: "alice", RequesterRoles: []string{"r"}, ThreadID: "t1", RunID: "run",
		ToolCallID: "c1", Action: "a", ActionVersion: "1", Input: json.RawMessage(`{"x":1}`), RawInput: json.RawMessage(`{"x": 1}`),
		InputDigest: "d", Preview: "p", StateVersion: "sv", Confirmation: store.Confirmation{Title: "T", Verb: "V"},
		ConfirmationID: "cnf", Mode: store.ModeIndependent, Status: status, Approvers: []string{"role:x"},
		Quorum: 1, ForbidSelfApproval: true, Channels: []string{"web"}, RememberScopes: []store.Scope{store.ScopeRun},
		GrantAnyInput: true, GrantTTL: time.Hour, ReplacementKey: "k",
		Decisions: []store.Decision{{Actor: "carol", Decision: store.VerdictApproved, Via: "web", At: now.Add(-time.Hour)}},
		ExpiresAt: now.Add(time.Hour), OperationID: "op", Attempt: 2,
		Lease:      &store.Lease{Owner: "w", Token: "tok", Generation: 7, ExpiresAt: now.Add(time.Minute)},
		ConsumedBy: "c1", NextAttemptAt: &na,
		Outcome: &store.Outcome{ProposalID: "prp_1", Status: store.StatusReconciling, Reconciles: 1, At: now.Add(-time.Minute)},
		Version: 7, CreatedAt: now.Add(-2 * time.Hour), UpdatedAt: now.Add(-time.Minute), RuleFingerprint: "fp",
	}
}

// TestRulesChangeOnlyMutableColumns pins what the compare-and-set write
// (cas.go) relies on: every rule of store/transition.go, applied from every
// status it accepts, changes only the columns in mutableColumns (and the
// version and update time, always written). If a rule starts changing
// another field, this fails, and mutableColumns must list it.
func TestRulesChangeOnlyMutableColumns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	next := now.Add(time.Minute)
	errText := "boom"
	fence := store.Fence{Token: "tok", Generation: 7}
	type rule func(p *store.Proposal) (*store.Change, error)
	rules := map[string]rule{
		"approve": func(p *store.Proposal) (*store.Change, error) {
			_, c, err := store.ApplyDecision(p, &store.DecideParams{Actor: "bob", Verdict: store.VerdictApproved, Via: "api", Remember: store.ScopeThread,
				Grant: &store.Grant{ID: "grt_1", Scope: store.ScopeThread}}, now)
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
		"expire": func(p *store.Proposal) (*store.Change, error) { return store.ApplyExpire(p, now.Add(2*time.Hour)) },
		"supersede": func(p *store.Proposal) (*store.Change, error) {
			return store.ApplySupersede(p, "prp_2", now), nil
		},
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
	applied := map[string]int{}
	for name, apply := range rules {
		for _, from := range []store.Status{store.StatusPending, store.StatusApproved, store.StatusExecuting, store.StatusSucceeded,
			store.StatusFailed, store.StatusReconciling, store.StatusUnknown, store.StatusRejected, store.StatusExpired,
			store.StatusSuperseded, store.StatusCancelled} {
			for _, mode := range []store.Mode{store.ModeIndependent, store.ModeWait} {
				p := casBase(now, from)
				p.Mode = mode
				w := p.Clone()
				c, err := apply(w)
				if c == nil {
					continue
				}
				_ = err // a change with an error (a claim that expired) is written too
				applied[name]++
				store.Finish(w, now)
				before, after := p.Clone(), w.Clone()
				for _, x := range []*store.Proposal{before, after} {
					x.Status, x.Decisions, x.Attempt, x.Lease, x.ConsumedBy = "", nil, 0, nil, ""
					x.NextAttemptAt, x.Outcome, x.Version, x.UpdatedAt = nil, nil, 0, time.Time{}
				}
				if !reflect.DeepEqual(before, after) {
					t.Errorf("%s from %s (%s): the rule changed a column the compare-and-set write does not:\n got %+v\nwant %+v",
						name, from, mode, after, before)
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

// TestMutableColumnsAreColumns: each mutable column is a proposal column,
// and its bit is its position in mutableColumns.
func TestMutableColumnsAreColumns(t *testing.T) {
	t.Parallel()
	cols := strings.Join(columnList(), ",")
	var all mutable
	for i, mc := range mutableColumns {
		if mc.bit != 1<<i {
			t.Errorf("%s: bit %b, want %b", mc.name, mc.bit, 1<<i)
		}
		if !strings.Contains(","+cols+",", ","+mc.name+",") {
			t.Errorf("%s is not a proposal column", mc.name)
		}
		all |= mc.bit
	}
	if all != allMutable {
		t.Errorf("mutableColumns cover %b, want %b", all, allMutable)
	}
}
