package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/internal/canonjson"
	"github.com/countersign/countersign/store"
)

// testActorKinds: every event records the kind of credential behind it
// (docs/api.md Part 3): the requester's on a creation, the decider's, the
// canceller's, the resolving operator's; none on the events no credential
// is behind (a worker's claim, a settlement, an expiry) nor on events of a
// call made before kinds were recorded. The kinds round-trip through
// ListEvents, ListProposalAudit and the chain, and a chain mixing events
// with and without a kind verifies, each hashed with its kind when it has
// one.
func testActorKinds(t *testing.T, newStore Factory) {
	t.Run("RoundTripAndChain", func(t *testing.T) {
		t.Parallel()
		fx := setupAudit(t, newStore)
		type kinded struct {
			Type store.EventType
			Kind string
		}
		want := map[string][]kinded{}

		// An agent's call, approved by a person, claimed and settled by a
		// worker.
		agentCall := fx.createNew(func(p *store.Proposal) { p.RequesterKind = "agent" })
		res, err := fx.store.Decide(fx.ctx, &store.DecideParams{Tenant: tenant, ID: agentCall.ID, Actor: approver, ActorKind: "human", Verdict: store.VerdictApproved, Via: "api"})
		if err != nil || res.Outcome != store.DecideApplied {
			t.Fatalf("Decide: %v, %v", res, err)
		}
		fx.succeed(fx.claim(res.Proposal, longLease))
		want[agentCall.ID] = []kinded{{store.EventCreated, "agent"}, {store.EventDecided, "human"}, {store.EventClaimed, ""}, {store.EventSettled, ""}}

		// A person's call, cancelled by that person's agent.
		humanCall := fx.createNew(func(p *store.Proposal) { p.RequesterKind = "human" })
		if _, err := fx.store.Cancel(fx.ctx, &store.CancelParams{Tenant: tenant, ID: humanCall.ID, Actor: requester, ActorKind: "agent", Via: "api"}); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		want[humanCall.ID] = []kinded{{store.EventCreated, "human"}, {store.EventCancelled, "agent"}}

		// A call and a decision that record no kind (as every one did
		// before kinds were recorded).
		unkinded := fx.createNew()
		fx.decide(unkinded, approver, store.VerdictRejected)
		want[unkinded.ID] = []kinded{{store.EventCreated, ""}, {store.EventDecided, ""}}

		// An agent's call that lapses: the expiry is nobody's.
		lapsed := fx.createNew(func(p *store.Proposal) { p.RequesterKind = "agent"; p.ExpiresAt = fx.clock.Now().Add(time.Minute) })
		fx.clock.Advance(2 * time.Minute)
		if _, err := fx.store.Expire(fx.ctx, &store.ExpireParams{Tenant: tenant, ID: lapsed.ID}); err != nil {
			t.Fatalf("Expire: %v", err)
		}
		want[lapsed.ID] = []kinded{{store.EventCreated, "agent"}, {store.EventExpired, ""}}

		// An uncertain execution an operator resolves; the claim comes
		// through ClaimBatch, a write of its own on every driver.
		uncertain := fx.createNew(independent, func(p *store.Proposal) { p.RequesterKind = "agent" })
		if _, err := fx.store.Decide(fx.ctx, &store.DecideParams{Tenant: tenant, ID: uncertain.ID, Actor: approver, ActorKind: "human", Verdict: store.VerdictApproved, Via: "slack"}); err != nil {
			t.Fatalf("Decide: %v", err)
		}
		claimed := fx.claimBatch(worker, longLease, 10)
		if len(claimed) != 1 || claimed[0].Proposal.ID != uncertain.ID {
			t.Fatalf("ClaimBatch = %d proposals, want %s", len(claimed), uncertain.ID)
		}
		fx.settle(settleParams(claimed[0].Proposal, store.StatusReconciling))
		if _, err := fx.store.Resolve(fx.ctx, &store.ResolveParams{Tenant: tenant, ID: uncertain.ID, Actor: "ops", ActorKind: "human", Via: "cli", Status: store.StatusSucceeded, Note: "seen"}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		want[uncertain.ID] = []kinded{{store.EventCreated, "agent"}, {store.EventDecided, "human"}, {store.EventClaimed, ""}, {store.EventSettled, ""}, {store.EventResolved, "human"}}

		// ListEvents and ListProposalAudit (before sealing) carry each
		// event's kind.
		byID := map[int64]*store.Event{}
		for id, w := range want {
			evs := fx.events(id)
			got := make([]kinded, len(evs))
			for i, e := range evs {
				got[i] = kinded{e.Type, e.ActorKind}
				byID[e.ID] = e
			}
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("events of %s = %v, want %v", id, got, w)
			}
			unsealed, err := fx.store.ListProposalAudit(fx.ctx, &store.ListProposalAuditParams{Tenant: tenant, ProposalID: id})
			if err != nil {
				t.Fatal(err)
			}
			if len(unsealed) != len(evs) {
				t.Fatalf("ListProposalAudit(%s) = %d events, want %d", id, len(unsealed), len(evs))
			}
			for i, ae := range unsealed {
				if ae.Event != *evs[i] {
					t.Errorf("ListProposalAudit(%s)[%d] = %+v, want %+v", id, i, ae.Event, *evs[i])
				}
			}
		}

		// Sealed, the chain holds every event with its kind, and verifies.
		fx.seal(fx.acquireSeal(sealer, longLease), 0)
		chain := requireChainOf(t, fx.ctx, fx.store, tenant)
		withKind, without := 0, 0
		for _, ae := range chain {
			e := byID[ae.ID]
			if e == nil || ae.Event != *e {
				t.Errorf("chain seq %d = %+v, want event %+v", ae.Seq, ae.Event, e)
				continue
			}
			c := ae.Chained()
			if c.ActorKind != e.ActorKind {
				t.Errorf("seq %d exported with actor_kind %q, want %q", ae.Seq, c.ActorKind, e.ActorKind)
			}
			if e.ActorKind == "" {
				without++
				continue
			}
			withKind++
			// The kind is covered by the hash: the event without it, or
			// with another, is not the event sealed.
			for _, other := range []string{"", "robot"} {
				c.ActorKind = other
				if auditchain.Hash(c) == ae.Hash {
					t.Errorf("seq %d (%s) hashes the same with actor_kind %q", ae.Seq, e.ActorKind, other)
				}
			}
		}
		if withKind == 0 || without == 0 {
			t.Fatalf("chain has %d events with a kind and %d without, want both", withKind, without)
		}
		for id := range want {
			sealed, err := fx.store.ListProposalAudit(fx.ctx, &store.ListProposalAuditParams{Tenant: tenant, ProposalID: id})
			if err != nil {
				t.Fatal(err)
			}
			for _, ae := range sealed {
				if ae.Seq == 0 || ae.Event != *byID[ae.ID] {
					t.Errorf("sealed ListProposalAudit(%s): %+v, want event %+v in the chain", id, ae, byID[ae.ID])
				}
			}
		}
	})
}

// ChainBeforeKinds chains evs (events of one tenant or more, in id order,
// none with a kind) onto empty chains as the sealer did before events
// recorded actor_kind, for upgrade tests to store as sealed by an old
// version. It hashes the ten members an event had then, through a
// canonicaliser rather than auditchain.Hash, so that it stands for the old
// definition, not for the code under test.
func ChainBeforeKinds(evs []*store.Event) ([]*store.AuditEvent, error) {
	heads := map[string]store.ChainHead{}
	out := make([]*store.AuditEvent, len(evs))
	for i, e := range evs {
		if e.ActorKind != "" {
			return nil, fmt.Errorf("event %d has actor_kind %q: events sealed before kinds had none", e.ID, e.ActorKind)
		}
		h := heads[e.Tenant]
		ae := &store.AuditEvent{Event: *e, Seq: h.Seq + 1, PrevHash: h.Hash}
		raw, err := json.Marshal(map[string]any{
			"seq": ae.Seq, "id": ae.ID, "type": string(ae.Type), "proposal_id": ae.ProposalID, "actor": ae.Actor, "via": ae.Via,
			"status": string(ae.Status), "detail": ae.Detail, "at": auditchain.FormatTime(ae.At), "prev_hash": ae.PrevHash,
		})
		if err != nil {
			return nil, err
		}
		canon, err := canonjson.Canonicalize(raw)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(append([]byte(ae.PrevHash), canon...))
		ae.Hash = hex.EncodeToString(sum[:])
		heads[e.Tenant] = store.ChainHead{Seq: ae.Seq, Hash: ae.Hash}
		out[i] = ae
	}
	return out, nil
}

// RequireUpgradedChain checks a chain sealed before actor_kind existed
// (before, as ChainBeforeKinds made it) after the upgrade: every link reads
// back unchanged with no kind, the chain verifies, and new events (an
// agent's call, a person's approval) go on with it carrying their kinds.
// newThread is a thread of tenant the new call may be made in.
func RequireUpgradedChain(t *testing.T, ctx context.Context, s store.Store, tenant, newThread string, before []*store.AuditEvent) {
	t.Helper()
	var old []*store.AuditEvent
	for _, ae := range before {
		if ae.Tenant == tenant {
			old = append(old, ae)
		}
	}
	got, err := ReadChain(ctx, s, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(old) {
		t.Fatalf("%s's chain after the upgrade has %d links, want the %d sealed before", tenant, len(got), len(old))
	}
	for i, w := range old {
		if g := got[i]; g.ID != w.ID || g.Seq != w.Seq || g.Hash != w.Hash || g.PrevHash != w.PrevHash || g.ActorKind != "" || g.Actor != w.Actor {
			t.Fatalf("%s's link %d after the upgrade = %+v, want %+v with no kind", tenant, i, g, w)
		}
	}
	if h, err := VerifyChain(ctx, s, tenant); err != nil || h.Seq != int64(len(old)) {
		t.Fatalf("%s's chain sealed before the upgrade: head %+v, %v; want it whole to seq %d", tenant, h, err, len(old))
	}
	p := NewProposal(tenant, newThread, uniqueID("call_after_kinds"), func(p *store.Proposal) {
		p.RequesterKind = "agent"
		p.ExpiresAt = time.Now().Add(time.Hour)
	})
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, &store.DecideParams{Tenant: tenant, ID: p.ID, Actor: "bob", ActorKind: "human", Verdict: store.VerdictApproved, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	if err := SealAll(ctx, s, "sealer-after-kinds"); err != nil {
		t.Fatal(err)
	}
	h, err := VerifyChain(ctx, s, tenant)
	if err != nil || h.Seq != int64(len(old)+2) {
		t.Fatalf("%s's chain with new events: head %+v, %v; want it whole to seq %d", tenant, h, err, len(old)+2)
	}
	chain, err := ReadChain(ctx, s, tenant)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range old {
		if chain[i].Hash != w.Hash {
			t.Errorf("link %d changed hash after new events: %s, want %s", i, chain[i].Hash, w.Hash)
		}
	}
	if a, b := chain[len(old)], chain[len(old)+1]; a.Type != store.EventCreated || a.ActorKind != "agent" || b.Type != store.EventDecided || b.ActorKind != "human" {
		t.Errorf("new links = %s by %s (%q), %s by %s (%q); want created by an agent, decided by a human", a.Type, a.Actor, a.ActorKind, b.Type, b.Actor, b.ActorKind)
	}
}
