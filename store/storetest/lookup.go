package storetest

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// lookupOf returns the lookup of p's call, with grant as its grant query
// (nil: none).
func lookupOf(p *store.Proposal, grant *store.FindGrantParams) *store.LookupCallParams {
	return &store.LookupCallParams{Tenant: p.Tenant, ThreadID: p.ThreadID, ToolCallID: p.ToolCallID, Grant: grant}
}

// lookupWant is what a lookup must find: the thread's owner, the record's
// id and the grant's id, "" for nothing.
type lookupWant struct {
	owner, proposal, grant string
}

// requireLookup fails the test unless LookupCall finds want, and finds
// exactly what the single-purpose reads (GetThread, GetProposalByToolCall,
// FindGrant) made right after it find: the same thread, the same proposal in
// every field, the same grant.
func requireLookup(t *testing.T, fx *fixture, name string, params *store.LookupCallParams, want lookupWant) {
	t.Helper()
	l, err := fx.store.LookupCall(fx.ctx, params)
	if err != nil {
		t.Fatalf("%s: LookupCall: %v", name, err)
	}
	if l == nil {
		t.Fatalf("%s: LookupCall returned nil", name)
	}

	th, err := fx.store.GetThread(fx.ctx, &store.GetThreadParams{Tenant: params.Tenant, ID: params.ThreadID})
	switch {
	case errorsIsNotFound(err):
		if l.Thread != nil {
			t.Errorf("%s: LookupCall found thread %+v, GetThread none", name, l.Thread)
		}
	case err != nil:
		t.Fatalf("%s: GetThread: %v", name, err)
	case l.Thread == nil:
		t.Errorf("%s: LookupCall found no thread, GetThread %+v", name, th)
	case !equalValue(reflect.ValueOf(*l.Thread), reflect.ValueOf(*th)) || l.Thread.CreatedAt.Location() != time.UTC:
		t.Errorf("%s: LookupCall found thread %+v, GetThread %+v", name, l.Thread, th)
	}
	switch {
	case want.owner == "" && l.Thread != nil:
		t.Errorf("%s: LookupCall found thread %+v, want none", name, l.Thread)
	case want.owner != "" && (l.Thread == nil || l.Thread.Owner != want.owner):
		t.Errorf("%s: LookupCall found thread %+v, want one owned by %s", name, l.Thread, want.owner)
	}

	p, err := fx.store.GetProposalByToolCall(fx.ctx, &store.GetProposalByToolCallParams{
		Tenant: params.Tenant, ThreadID: params.ThreadID, ToolCallID: params.ToolCallID,
	})
	switch {
	case errorsIsNotFound(err):
		if l.Proposal != nil {
			t.Errorf("%s: LookupCall found proposal %s, GetProposalByToolCall none", name, l.Proposal.ID)
		}
	case err != nil:
		t.Fatalf("%s: GetProposalByToolCall: %v", name, err)
	case l.Proposal == nil:
		t.Errorf("%s: LookupCall found no proposal, GetProposalByToolCall %s", name, p.ID)
	default:
		requireSameProposal(t, l.Proposal, p)
	}
	switch {
	case want.proposal == "" && l.Proposal != nil:
		t.Errorf("%s: LookupCall found proposal %s, want none", name, l.Proposal.ID)
	case want.proposal != "" && (l.Proposal == nil || l.Proposal.ID != want.proposal):
		t.Errorf("%s: LookupCall found proposal %v, want %s", name, l.Proposal, want.proposal)
	}

	if params.Grant == nil {
		if l.Grant != nil {
			t.Errorf("%s: LookupCall without a grant query found grant %s", name, l.Grant.ID)
		}
	} else {
		g, err := fx.store.FindGrant(fx.ctx, params.Grant)
		switch {
		case errorsIsNotFound(err):
			if l.Grant != nil {
				t.Errorf("%s: LookupCall found grant %s, FindGrant none", name, l.Grant.ID)
			}
		case err != nil:
			t.Fatalf("%s: FindGrant: %v", name, err)
		case l.Grant == nil:
			t.Errorf("%s: LookupCall found no grant, FindGrant %s", name, g.ID)
		case !equalValue(reflect.ValueOf(*l.Grant), reflect.ValueOf(*g)):
			t.Errorf("%s: LookupCall found grant %+v, FindGrant %+v", name, l.Grant, g)
		}
	}
	switch {
	case want.grant == "" && l.Grant != nil:
		t.Errorf("%s: LookupCall found grant %s, want none", name, l.Grant.ID)
	case want.grant != "" && (l.Grant == nil || l.Grant.ID != want.grant):
		t.Errorf("%s: LookupCall found grant %v, want %s", name, l.Grant, want.grant)
	}
}

// testLookupCall pins LookupCall to the single-purpose reads it stands for,
// and its reads to one snapshot.
func testLookupCall(t *testing.T, newStore Factory) {
	t.Run("NoThread", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		call := fx.proposal("t-none")
		requireLookup(t, fx, "NoThread", lookupOf(call, nil), lookupWant{})
		requireLookup(t, fx, "NoThreadWithGrantQuery", lookupOf(call, findParams(call)), lookupWant{})
	})

	t.Run("ThreadWithoutRecord", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		if _, err := fx.store.EnsureThread(fx.ctx, &store.EnsureThreadParams{Tenant: tenant, ID: "t-bob", Owner: "bob"}); err != nil {
			t.Fatalf("EnsureThread: %v", err)
		}
		requireLookup(t, fx, "EnsuredThread", lookupOf(fx.proposal("t-bob"), nil), lookupWant{owner: "bob"})
	})

	t.Run("Record", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		requireLookup(t, fx, "Pending", lookupOf(p, nil), lookupWant{owner: requester, proposal: p.ID})
		fx.decide(p, approver, store.VerdictApproved)
		requireLookup(t, fx, "Approved", lookupOf(p, nil), lookupWant{owner: requester, proposal: p.ID})
		// What it returns is the caller's: changing it changes no record.
		l, err := fx.store.LookupCall(fx.ctx, lookupOf(p, nil))
		if err != nil {
			t.Fatalf("LookupCall: %v", err)
		}
		want := fx.get(p)
		l.Thread.Owner = "mallory"
		l.Proposal.Status, l.Proposal.Decisions[0].Actor, l.Proposal.Input[2] = store.StatusRejected, "mallory", 'X'
		requireSameProposal(t, fx.get(p), want)
		requireLookup(t, fx, "AfterTheCallerChangedWhatItGot", lookupOf(p, nil), lookupWant{owner: requester, proposal: p.ID})
		// A deleted thread's proposals stay: the record without its thread.
		if err := fx.store.DeleteThread(fx.ctx, &store.GetThreadParams{Tenant: tenant, ID: thread}); err != nil {
			t.Fatalf("DeleteThread: %v", err)
		}
		requireLookup(t, fx, "ThreadDeleted", lookupOf(p, nil), lookupWant{proposal: p.ID})
	})

	t.Run("OtherThreadsRecord", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		fx.create(fx.proposal("t2"))
		// The same tool call id in another thread of the caller's, in
		// another tenant's thread of the same id, and another tool call id
		// in the record's thread.
		inT2 := lookupOf(p, nil)
		inT2.ThreadID = "t2"
		requireLookup(t, fx, "OtherThread", inT2, lookupWant{owner: requester})
		otherTenantsThread := lookupOf(p, nil)
		otherTenantsThread.Tenant = otherTenant
		requireLookup(t, fx, "OtherTenant", otherTenantsThread, lookupWant{})
		requireLookup(t, fx, "OtherToolCall", lookupOf(fx.proposal(thread), nil), lookupWant{owner: requester})
	})

	t.Run("Grant", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		rule := func(p *store.Proposal) { p.RuleFingerprint = "rule_a" }
		expiresAt := fx.clock.Now().Add(time.Hour)
		g := liveGrant(t, fx, store.ScopeRun, opts(rule), func(g *store.Grant) { g.ExpiresAt = &expiresAt })
		call := fx.proposal(thread, rule)
		live := lookupWant{owner: requester, grant: g.ID}
		none := lookupWant{owner: requester}
		requireLookup(t, fx, "Live", lookupOf(call, findParams(call)), live)
		requireLookup(t, fx, "GrantQueryAbsent", lookupOf(call, nil), none)
		otherRule := fx.proposal(thread, func(p *store.Proposal) { p.RuleFingerprint = "rule_b" })
		requireLookup(t, fx, "OtherFingerprint", lookupOf(otherRule, findParams(otherRule)), none)
		otherRun := fx.proposal(thread, rule, func(p *store.Proposal) { p.RunID = "run_2" })
		requireLookup(t, fx, "OtherRun", lookupOf(otherRun, findParams(otherRun)), none)
		// A repeated tool call finds its record and the grant together.
		recorded := fx.createNew(rule)
		requireLookup(t, fx, "RecordAndGrant", lookupOf(recorded, findParams(recorded)),
			lookupWant{owner: requester, proposal: recorded.ID, grant: g.ID})
		// Expired by the store's clock.
		fx.clock.Advance(time.Hour)
		requireLookup(t, fx, "Expired", lookupOf(call, findParams(call)), none)
	})

	t.Run("GrantRevoked", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		g := liveGrant(t, fx, store.ScopeThread, nil, nil)
		call := fx.proposal(thread)
		requireLookup(t, fx, "BeforeRevocation", lookupOf(call, findParams(call)), lookupWant{owner: requester, grant: g.ID})
		if _, err := fx.store.RevokeGrant(fx.ctx, &store.RevokeGrantParams{Tenant: tenant, ID: g.ID, Actor: requester}); err != nil {
			t.Fatalf("RevokeGrant: %v", err)
		}
		requireLookup(t, fx, "Revoked", lookupOf(call, findParams(call)), lookupWant{owner: requester})
	})

	t.Run("InvalidParams", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		call := fx.proposal(thread)
		cases := []struct {
			name string
			edit func(*store.LookupCallParams)
		}{
			{"NoTenant", func(l *store.LookupCallParams) { l.Tenant = "" }},
			{"NoThread", func(l *store.LookupCallParams) { l.ThreadID = "" }},
			{"NoToolCall", func(l *store.LookupCallParams) { l.ToolCallID = "" }},
			{"GrantOfOtherTenant", func(l *store.LookupCallParams) { l.Grant.Tenant = otherTenant }},
			{"GrantOfOtherThread", func(l *store.LookupCallParams) { l.Grant.ThreadID = "t2" }},
		}
		for _, c := range cases {
			params := lookupOf(call, findParams(call))
			c.edit(params)
			if l, err := fx.store.LookupCall(fx.ctx, params); !isInvalidParams(err) || l != nil {
				t.Errorf("%s: LookupCall = %+v, %v; want nil, ErrInvalidParams", c.name, l, err)
			}
		}
		if l, err := fx.store.LookupCall(fx.ctx, nil); !isInvalidParams(err) || l != nil {
			t.Errorf("nil params: LookupCall = %+v, %v; want nil, ErrInvalidParams", l, err)
		}
	})

	// Lookups race the creations of their calls, each in a new thread: a
	// creation stores the thread and the proposal in one transaction, so a
	// lookup finds both or neither, and once the creation has returned, both.
	t.Run("RaceWithCreation", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		const n = 16
		calls := make([]*store.Proposal, n)
		for i := range calls {
			calls[i] = fx.proposal(fmt.Sprintf("t-race-%d", i))
		}
		var created [n]atomic.Bool
		lookups := make([]int, n)
		errs := make([]error, 2*n)
		concurrently(2*n, func(i int) {
			if i < n {
				_, errs[i] = fx.store.CreateProposal(fx.ctx, &store.CreateProposalParams{Proposal: calls[i].Clone()})
				created[i].Store(true)
				return
			}
			p := calls[i-n]
			for {
				done := created[i-n].Load()
				lookups[i-n]++
				l, err := fx.store.LookupCall(fx.ctx, lookupOf(p, findParams(p)))
				switch {
				case err != nil:
					errs[i] = err
					return
				case (l.Thread == nil) != (l.Proposal == nil):
					errs[i] = fmt.Errorf("lookup %d of %s found a thread: %t, its proposal: %t; half a creation",
						lookups[i-n], p.ToolCallID, l.Thread != nil, l.Proposal != nil)
					return
				case l.Proposal != nil && (l.Proposal.ID != p.ID || l.Thread.Owner != p.Requester):
					errs[i] = fmt.Errorf("lookup of %s found proposal %s in a thread owned by %s, want %s owned by %s",
						p.ToolCallID, l.Proposal.ID, l.Thread.Owner, p.ID, p.Requester)
					return
				case l.Proposal != nil:
					return
				case done:
					errs[i] = fmt.Errorf("lookup of %s after its creation returned found nothing", p.ToolCallID)
					return
				}
			}
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("goroutine %d: %v", i, err)
			}
		}
	})
}
