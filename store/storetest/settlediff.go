package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// testSettleManyMatchesSettle pins SettleMany's group writes (set-based on
// PostgreSQL, only the changed columns on SQLite) to Settle's row-at-a-time
// ones: the same group, settled in one SettleMany in one store and one
// Settle at a time in another (same clock), leaves the same
// proposals, results, audit events, outcome messages and grants. The group
// holds what the set-based statements must get right: one proposal settled
// twice (reconciling, then succeeded), a stale fence, a missing proposal, a
// grant to activate, a thread deleted before its outcome is admitted, and a
// presentation.
func testSettleManyMatchesSettle(t *testing.T, newStore Factory) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	open := func() store.Store { return newStore(t, clock) }
	const tenant = "acme"
	// seed makes 6 claimed proposals, the third with a grant to activate,
	// and deletes the fifth's thread.
	seed := func(s store.Store) []*store.Claimed {
		for i := range 6 {
			id := fmt.Sprintf("prp_%d", i)
			p := &store.Proposal{
				ID: id, Tenant: tenant, Requester: "alice", ThreadID: fmt.Sprintf("t%d", i%3+i/4*10), ToolCallID: id,
				Action: "a", ActionVersion: "1", Input: json.RawMessage(`{}`), RawInput: json.RawMessage(`{}`), InputDigest: "d",
				Mode: store.ModeIndependent, Approvers: []string{"bob"}, Quorum: 1, RememberScopes: []store.Scope{store.ScopeThread},
				ExpiresAt: now.Add(time.Hour), OperationID: "op_" + id,
			}
			if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
				t.Fatal(err)
			}
			d := &store.DecideParams{Tenant: tenant, ID: id, Actor: "bob", Verdict: store.VerdictApproved, Via: "web"}
			if i == 2 {
				d.Remember = store.ScopeThread
				d.Grant = &store.Grant{ID: "grt_2", Tenant: tenant, Requester: "alice", Scope: store.ScopeThread, ThreadID: p.ThreadID,
					Action: "a", ActionVersion: "1", InputDigest: "d", OriginProposalID: id, GrantedBy: "bob", CreatedAt: now}
			}
			if _, err := s.Decide(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		claimed, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w", LeaseDuration: time.Minute, Limit: 10})
		if err != nil || len(claimed) != 6 {
			t.Fatalf("claimed %d: %v", len(claimed), err)
		}
		if err := s.DeleteThread(ctx, &store.GetThreadParams{Tenant: tenant, ID: "t11"}); err != nil {
			t.Fatal(err)
		}
		return claimed
	}
	group := func(claimed []*store.Claimed) []*store.SettleParams {
		by := map[string]store.Fence{}
		for _, c := range claimed {
			by[c.Proposal.ID] = store.Fence{Token: c.Proposal.Lease.Token, Generation: c.Proposal.Lease.Generation}
		}
		msg, next := "not yet", now.Add(time.Minute)
		stale := by["prp_3"]
		stale.Generation++
		return []*store.SettleParams{
			{Tenant: tenant, ID: "prp_0", Fence: by["prp_0"], Status: store.StatusReconciling, Error: &msg},
			{Tenant: tenant, ID: "prp_1", Fence: by["prp_1"], Status: store.StatusFailed, Executed: new(true), Error: &msg},
			{Tenant: tenant, ID: "prp_0", Fence: by["prp_0"], Status: store.StatusSucceeded, Executed: new(true), Receipt: "r0", Result: json.RawMessage(`{"b": 1, "a": 2}`)},
			{Tenant: tenant, ID: "prp_2", Fence: by["prp_2"], Status: store.StatusSucceeded, Executed: new(true), Receipt: "r2"},
			{Tenant: tenant, ID: "prp_3", Fence: stale, Status: store.StatusSucceeded, Executed: new(true)},
			{Tenant: tenant, ID: "prp_missing", Status: store.StatusSucceeded},
			{Tenant: tenant, ID: "prp_4", Fence: by["prp_4"], Status: store.StatusUnknown, Error: &msg, Presentation: "shown to the model"},
			{Tenant: tenant, ID: "prp_5", Fence: by["prp_5"], Status: store.StatusReconciling, Error: &msg, ReleaseLease: true, NextAttemptAt: &next, Reconciles: 2},
		}
	}

	many, one := open(), open()
	results, errs, err := many.SettleMany(ctx, group(seed(many)))
	if err != nil {
		t.Fatal(err)
	}
	var results1 []*store.TransitionResult
	var errs1 []error
	for _, sp := range group(seed(one)) {
		r, err := one.Settle(ctx, sp)
		results1, errs1 = append(results1, r), append(errs1, err)
	}
	for i := range results {
		if (errs[i] == nil) != (errs1[i] == nil) {
			t.Errorf("item %d: SettleMany error %v, Settle error %v", i, errs[i], errs1[i])
		}
		if (results[i] == nil) != (results1[i] == nil) {
			t.Errorf("item %d: SettleMany result %v, Settle result %v", i, results[i], results1[i])
			continue
		}
		if results[i] != nil {
			a, b := *results[i], *results1[i]
			a.Proposal, b.Proposal = comparable(a.Proposal), comparable(b.Proposal)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("item %d: SettleMany result\n%+v\nSettle result\n%+v", i, a, b)
			}
		}
	}
	for i := range 6 {
		id := fmt.Sprintf("prp_%d", i)
		a, err := many.GetProposal(ctx, &store.GetProposalParams{Tenant: tenant, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		b, err := one.GetProposal(ctx, &store.GetProposalParams{Tenant: tenant, ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := comparable(a), comparable(b); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: after SettleMany\n%+v\nafter Settle\n%+v", id, a, b)
		}
	}
	events := func(s store.Store) []store.Event {
		evs, err := s.ListEvents(ctx, &store.ListEventsParams{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		var out []store.Event
		for _, e := range evs {
			c := *e
			c.ID = 0
			if c.Type == store.EventClaimed {
				continue // the claim's order is the database's
			}
			out = append(out, c)
		}
		return out
	}
	if a, b := events(many), events(one); !reflect.DeepEqual(a, b) {
		t.Errorf("events after SettleMany\n%+v\nafter Settle\n%+v", a, b)
	}
	// An outcome message's id is random (store.NewMessageID): the two
	// stores agree on everything else.
	messages := func(s store.Store, th string) ([]*store.Message, error) {
		msgs, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: tenant, ThreadID: th})
		for _, m := range msgs {
			if m.Outcome != nil {
				requireServerMessageID(t, m.ID, m.ProposalID)
				m.ID = ""
			}
		}
		return msgs, err
	}
	for _, th := range []string{"t0", "t1", "t2", "t10", "t11"} {
		a, erra := messages(many, th)
		b, errb := messages(one, th)
		if (erra == nil) != (errb == nil) || !reflect.DeepEqual(a, b) {
			t.Errorf("thread %s: messages after SettleMany %+v (%v), after Settle %+v (%v)", th, a, erra, b, errb)
		}
	}
	grants := func(s store.Store) []*store.Grant {
		gs, err := s.ListGrants(ctx, &store.ListGrantsParams{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		return gs
	}
	a, b := grants(many), grants(one)
	if len(a) != 1 || a[0].ActivatedAt == nil || !reflect.DeepEqual(a, b) {
		t.Errorf("grants after SettleMany %+v, after Settle %+v; want one, activated", a, b)
	}
}

// comparable blanks what differs between two stores by design: the lease
// token (random) and its expiry (the database's clock, on PostgreSQL).
func comparable(p *store.Proposal) *store.Proposal {
	if p == nil {
		return nil
	}
	c := p.Clone()
	if c.Lease != nil {
		c.Lease.Token, c.Lease.ExpiresAt = "", time.Time{}
	}
	return c
}
