package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
)

// sealer is the owner the suite's sealing leases are taken for.
const (
	sealer  = "sealer-1"
	sealer2 = "sealer-2"
)

// acquireSeal takes the sealing lease for owner and fails the test if it
// cannot.
func (fx *fixture) acquireSeal(owner string, lease time.Duration) *store.SealLease {
	fx.t.Helper()
	l, err := fx.store.AcquireSealLease(fx.ctx, &store.AcquireSealLeaseParams{Owner: owner, LeaseDuration: lease})
	if err != nil {
		fx.t.Fatalf("AcquireSealLease(%s): %v", owner, err)
	}
	if l.Owner != owner || l.Token == "" {
		fx.t.Fatalf("AcquireSealLease(%s) = %+v, want a token of %s", owner, l, owner)
	}
	return l
}

// seal seals one batch under l.
func (fx *fixture) seal(l *store.SealLease, limit int) int {
	fx.t.Helper()
	res, err := fx.store.SealEvents(fx.ctx, &store.SealEventsParams{Token: l.Token, LeaseDuration: longLease, Limit: limit})
	if err != nil {
		fx.t.Fatalf("SealEvents: %v", err)
	}
	return res.Sealed
}

// chain reads a tenant's whole chain.
func (fx *fixture) chain(tn string) []*store.AuditEvent {
	fx.t.Helper()
	out, err := ReadChain(fx.ctx, fx.store, tn)
	if err != nil {
		fx.t.Fatal(err)
	}
	return out
}

// ReadChain reads a tenant's whole chain, page by page.
func ReadChain(ctx context.Context, s store.Store, tenant string) ([]*store.AuditEvent, error) {
	var out []*store.AuditEvent
	for after := int64(0); ; {
		page, err := s.ListAudit(ctx, &store.ListAuditParams{Tenant: tenant, After: after, Limit: 100})
		if err != nil {
			return nil, fmt.Errorf("ListAudit(%s, after %d): %w", tenant, after, err)
		}
		out = append(out, page...)
		if len(page) < 100 {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// VerifyChain checks a tenant's chain as stored, as `countersign audit
// verify` does, and returns its head or the *auditchain.BreakError naming
// the first event that does not hold.
func VerifyChain(ctx context.Context, s store.Store, tenant string) (auditchain.Head, error) {
	evs, err := ReadChain(ctx, s, tenant)
	if err != nil {
		return auditchain.Head{}, err
	}
	var v auditchain.Verifier
	for _, e := range evs {
		if err := v.Event(e.Chained()); err != nil {
			return auditchain.Head{}, err
		}
	}
	return v.Finish()
}

// SealAll seals every unsealed event of the store under a lease of its own,
// waiting for a lease another sealer holds to be given up or to expire, and
// for a hole in the events (SealResult.Blocked) to close.
func SealAll(ctx context.Context, s store.Store, owner string) error {
	for {
		l, err := s.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: owner, LeaseDuration: time.Minute})
		if errors.Is(err, store.ErrSealLeaseHeld) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			return err
		}
		defer func() {
			_ = s.ReleaseSealLease(context.WithoutCancel(ctx), &store.ReleaseSealLeaseParams{Token: l.Token})
		}()
		for {
			res, err := s.SealEvents(ctx, &store.SealEventsParams{Token: l.Token, LeaseDuration: time.Minute, Limit: 500})
			switch {
			case err != nil:
				return err
			case res.Blocked:
				// A hole: a writer still open, or one rolled back that the
				// next seals pass once the transactions beside it end.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			case res.Sealed < 500:
				return nil
			}
		}
	}
}

// requireChainOf checks that a tenant's chain holds, and that it holds
// exactly the tenant's events, each once.
func requireChainOf(t *testing.T, ctx context.Context, s store.Store, tn string) []*store.AuditEvent {
	t.Helper()
	if _, err := VerifyChain(ctx, s, tn); err != nil {
		t.Fatalf("verify %s: %v", tn, err)
	}
	chain, err := ReadChain(ctx, s, tn)
	if err != nil {
		t.Fatal(err)
	}
	var all []*store.Event
	for after := int64(0); ; {
		evs, err := s.ListEvents(ctx, &store.ListEventsParams{Tenant: tn, AfterID: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs...)
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].ID
	}
	ids := make([]int64, len(chain))
	for i, e := range chain {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	if !slices.Equal(ids, eventIDs(all)) {
		t.Fatalf("%s: chain holds event ids %v, want each of %v once", tn, ids, eventIDs(all))
	}
	return chain
}

// setupAudit is setup for the tests that count what a seal seals: whatever
// the factory's store held (an upgraded store's old events) is sealed first.
func setupAudit(t *testing.T, newStore Factory) *fixture {
	t.Helper()
	fx := setup(t, newStore)
	if err := SealAll(fx.ctx, fx.store, "sealer-0"); err != nil {
		t.Fatalf("seal what the store held: %v", err)
	}
	return fx
}

func testAudit(t *testing.T, newStore Factory) {
	t.Run("SealsInIDOrderPerTenant", func(t *testing.T) {
		t.Parallel()
		fx := setupAudit(t, newStore)
		fx.clock.Advance(time.Second)
		p := fx.approved()
		fx.decide(fx.createNew(), approver, store.VerdictRejected)
		fx.create(NewProposal(otherTenant, thread, uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour))))

		if got := fx.chain(tenant); len(got) != 0 {
			t.Fatalf("chain before sealing = %d events, want none: events are sealed by the sealer, not by their writers", len(got))
		}
		l := fx.acquireSeal(sealer, longLease)
		if n := fx.seal(l, 0); n != 5 {
			t.Errorf("SealEvents sealed %d, want 5 (four of %s, one of %s)", n, tenant, otherTenant)
		}
		if n := fx.seal(l, 0); n != 0 {
			t.Errorf("SealEvents again sealed %d, want 0", n)
		}
		chain := requireChainOf(t, fx.ctx, fx.store, tenant)
		evs, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		if len(chain) != 4 {
			t.Fatalf("chain of %s = %d events, want 4", tenant, len(chain))
		}
		for i, ae := range chain {
			// Committed one after another, so the chain is in id order,
			// and an event keeps every field it was written with.
			if ae.Seq != int64(i+1) || ae.Event != *evs[i] {
				t.Errorf("chain[%d] = seq %d %+v, want seq %d %+v", i, ae.Seq, ae.Event, i+1, *evs[i])
			}
			if len(ae.Hash) != 64 || strings.ToLower(ae.Hash) != ae.Hash {
				t.Errorf("chain[%d].Hash = %q, want 64 lowercase hex digits", i, ae.Hash)
			}
		}
		if chain[0].PrevHash != "" || chain[1].PrevHash != chain[0].Hash {
			t.Errorf("prev_hash of seq 1, 2 = %q, %q; want \"\", %q", chain[0].PrevHash, chain[1].PrevHash, chain[0].Hash)
		}
		if chain[0].ProposalID != p.ID {
			t.Errorf("seq 1 is of %s, want %s", chain[0].ProposalID, p.ID)
		}
		other := requireChainOf(t, fx.ctx, fx.store, otherTenant)
		if len(other) != 1 || other[0].Seq != 1 || other[0].PrevHash != "" {
			t.Errorf("the other tenant's chain = %+v, want its own, from seq 1", other)
		}
	})

	t.Run("BatchesContinueTheChain", func(t *testing.T) {
		t.Parallel()
		fx := setupAudit(t, newStore)
		for range 3 {
			fx.approved()
		}
		l := fx.acquireSeal(sealer, longLease)
		if n := fx.seal(l, 4); n != 4 {
			t.Errorf("SealEvents(limit 4) sealed %d, want 4", n)
		}
		if got := len(fx.chain(tenant)); got != 4 {
			t.Errorf("chain after one batch of 4 = %d events", got)
		}
		fx.decide(fx.createNew(), approver, store.VerdictRejected)
		if n := fx.seal(l, 0); n != 4 {
			t.Errorf("SealEvents sealed %d, want the 2 left and 2 new", n)
		}
		chain := requireChainOf(t, fx.ctx, fx.store, tenant)
		if len(chain) != 8 {
			t.Errorf("chain = %d events, want 8", len(chain))
		}
		// Pages: after and limit.
		page, err := fx.store.ListAudit(fx.ctx, &store.ListAuditParams{Tenant: tenant, After: 5, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 2 || page[0].Seq != 6 || page[1].Seq != 7 {
			t.Errorf("ListAudit(after 5, limit 2) = %d events, want seq 6, 7", len(page))
		}
		if page, err := fx.store.ListAudit(fx.ctx, &store.ListAuditParams{Tenant: tenant, After: 8}); err != nil || len(page) != 0 {
			t.Errorf("ListAudit(after the head) = %d events, %v; want none", len(page), err)
		}
		if page, err := fx.store.ListAudit(fx.ctx, &store.ListAuditParams{Tenant: "nobody"}); err != nil || len(page) != 0 {
			t.Errorf("ListAudit(a tenant without events) = %d events, %v; want none", len(page), err)
		}
	})

	t.Run("ProposalAudit", func(t *testing.T) {
		t.Parallel()
		fx := setupAudit(t, newStore)
		p := fx.approved()
		fx.decide(fx.createNew(), approver, store.VerdictRejected)
		list := func(params store.ListProposalAuditParams) []*store.AuditEvent {
			t.Helper()
			params.Tenant = tenant
			got, err := fx.store.ListProposalAudit(fx.ctx, &params)
			if err != nil {
				t.Fatalf("ListProposalAudit(%+v): %v", params, err)
			}
			return got
		}
		evs, err := fx.store.ListEvents(fx.ctx, &store.ListEventsParams{Tenant: tenant, ProposalID: p.ID})
		if err != nil {
			t.Fatal(err)
		}
		unsealed := list(store.ListProposalAuditParams{ProposalID: p.ID})
		if len(unsealed) != len(evs) || len(evs) < 2 {
			t.Fatalf("ListProposalAudit before sealing = %d events, want the proposal's %d", len(unsealed), len(evs))
		}
		for i, ae := range unsealed {
			if ae.Event != *evs[i] || ae.Seq != 0 || ae.Hash != "" || ae.PrevHash != "" {
				t.Errorf("unsealed[%d] = %+v, want event %+v with no place in the chain", i, ae, *evs[i])
			}
		}
		fx.seal(fx.acquireSeal(sealer, longLease), 0)
		bySeq := map[int64]*store.AuditEvent{}
		for _, ae := range requireChainOf(t, fx.ctx, fx.store, tenant) {
			bySeq[ae.Seq] = ae
		}
		sealed := list(store.ListProposalAuditParams{ProposalID: p.ID})
		if len(sealed) != len(evs) {
			t.Fatalf("ListProposalAudit after sealing = %d events, want %d", len(sealed), len(evs))
		}
		for i, ae := range sealed {
			if c := bySeq[ae.Seq]; c == nil || *c != *ae || ae.Event != *evs[i] {
				t.Errorf("sealed[%d] = %+v, want event %d as its chain holds it (%+v)", i, ae, evs[i].ID, c)
			}
		}
		page := list(store.ListProposalAuditParams{ProposalID: p.ID, AfterID: evs[0].ID, Limit: 1})
		if len(page) != 1 || page[0].ID != evs[1].ID {
			t.Errorf("ListProposalAudit(after %d, limit 1) = %+v, want event %d", evs[0].ID, page, evs[1].ID)
		}
		if got := list(store.ListProposalAuditParams{ProposalID: "prp_nobody"}); len(got) != 0 {
			t.Errorf("ListProposalAudit(an unknown proposal) = %d events", len(got))
		}
		other, err := fx.store.ListProposalAudit(fx.ctx, &store.ListProposalAuditParams{Tenant: otherTenant, ProposalID: p.ID})
		if err != nil || len(other) != 0 {
			t.Errorf("ListProposalAudit(another tenant) = %d events, %v; want none", len(other), err)
		}
	})

	t.Run("Lease", func(t *testing.T) {
		t.Parallel()
		fx := setupAudit(t, newStore)
		fx.approved()
		a := fx.acquireSeal(sealer, shortLease)
		_, err := fx.store.AcquireSealLease(fx.ctx, &store.AcquireSealLeaseParams{Owner: sealer2, LeaseDuration: longLease})
		var held *store.SealLeaseHeldError
		if !errors.As(err, &held) || !errors.Is(err, store.ErrSealLeaseHeld) || held.Owner != sealer {
			t.Fatalf("AcquireSealLease while %s holds it: %v, want *SealLeaseHeldError naming %s", sealer, err, sealer)
		}
		// The holder seals; its seal renews the lease.
		res, err := fx.store.SealEvents(fx.ctx, &store.SealEventsParams{Token: a.Token, LeaseDuration: shortLease})
		if err != nil || res.Sealed != 2 || res.Lease == nil || res.Lease.Token != a.Token {
			t.Fatalf("SealEvents by the holder = %+v, %v; want 2 sealed under the same token", res, err)
		}

		// Expired: another owner takes it over, and the old token is fenced
		// out, writing nothing.
		fx.elapse(shortLease + leaseSlack)
		b := fx.acquireSeal(sealer2, longLease)
		if b.Token == a.Token {
			t.Fatal("a lease taken over kept the old token")
		}
		fx.decide(fx.createNew(), approver, store.VerdictRejected)
		_, err = fx.store.SealEvents(fx.ctx, &store.SealEventsParams{Token: a.Token, LeaseDuration: longLease})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("SealEvents with a token taken over: %v, want ErrLeaseLost", err)
		}
		if got := len(fx.chain(tenant)); got != 2 {
			t.Errorf("chain after a fenced-out seal = %d events, want 2", got)
		}
		// Releasing a lease one no longer holds changes nothing.
		if err := fx.store.ReleaseSealLease(fx.ctx, &store.ReleaseSealLeaseParams{Token: a.Token}); err != nil {
			t.Fatalf("ReleaseSealLease(a stale token): %v", err)
		}
		if n := fx.seal(b, 0); n != 2 {
			t.Errorf("SealEvents by the new holder sealed %d, want 2", n)
		}
		// Released: another owner takes it at once, long before it expires.
		if err := fx.store.ReleaseSealLease(fx.ctx, &store.ReleaseSealLeaseParams{Token: b.Token}); err != nil {
			t.Fatalf("ReleaseSealLease: %v", err)
		}
		c := fx.acquireSeal(sealer, longLease)
		if _, err := fx.store.SealEvents(fx.ctx, &store.SealEventsParams{Token: b.Token, LeaseDuration: longLease}); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("SealEvents with a released token: %v, want ErrLeaseLost", err)
		}
		fx.seal(c, 0)
		requireChainOf(t, fx.ctx, fx.store, tenant)

		for _, bad := range []*store.SealEventsParams{{Token: c.Token}, {Token: c.Token, LeaseDuration: time.Second, Limit: -1}} {
			if _, err := fx.store.SealEvents(fx.ctx, bad); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("SealEvents(%+v): %v, want ErrInvalidParams", bad, err)
			}
		}
		if _, err := fx.store.AcquireSealLease(fx.ctx, &store.AcquireSealLeaseParams{LeaseDuration: time.Second}); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("AcquireSealLease without an owner: %v, want ErrInvalidParams", err)
		}
	})

	t.Run("Races", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		AuditAcrossStores(t, fx.store, fx.store)
	})
}

// AuditAcrossStores checks, on stores that share one database (as processes
// do), that events written at once through all of them, while a sealer on
// each of them competes for the sealing lease and seals, end up in one
// chain per tenant with no gap and no fork, each event once. The sealers
// lose their leases now and then, so the lease changes hands during the
// run, and a sealer's seal with its stale token is refused.
func AuditAcrossStores(t *testing.T, stores ...store.Store) {
	t.Helper()
	ctx := t.Context()
	tenants := []string{uniqueID("audit-a"), uniqueID("audit-b")}
	const writersPerStore, proposalsPerWriter = 4, 12

	stop := make(chan struct{})
	var sealers sync.WaitGroup
	var sealed, refused atomic.Int64
	for i, s := range stores {
		owner := fmt.Sprintf("sealer-%d", i)
		// Every sealer loses its lease now and then (the first one after
		// every seal), as a process does that stalls past its lease, and
		// seals on with the stale token: another sealer may take the lease
		// over meanwhile, and the stale seal must be refused. (A lease
		// lost by expiry is the Lease test's; here the loss is a release,
		// which does not wait for a clock.)
		lease, stallEvery := time.Minute, 5
		if i == 0 {
			stallEvery = 1
		}
		sealers.Go(func() {
			var token string
			seals := 0
			for {
				select {
				case <-stop:
					if token != "" {
						_ = s.ReleaseSealLease(context.WithoutCancel(ctx), &store.ReleaseSealLeaseParams{Token: token})
					}
					return
				default:
				}
				if token == "" {
					l, err := s.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: owner, LeaseDuration: lease})
					switch {
					case errors.Is(err, store.ErrSealLeaseHeld):
						time.Sleep(time.Millisecond)
						continue
					case err != nil:
						t.Errorf("%s: AcquireSealLease: %v", owner, err)
						return
					}
					token = l.Token
				}
				res, err := s.SealEvents(ctx, &store.SealEventsParams{Token: token, LeaseDuration: lease, Limit: 7})
				switch {
				case errors.Is(err, store.ErrLeaseLost):
					refused.Add(1)
					token = ""
					continue
				case err != nil:
					t.Errorf("%s: SealEvents: %v", owner, err)
					return
				}
				sealed.Add(int64(res.Sealed))
				if seals++; seals%stallEvery == 0 {
					if err := s.ReleaseSealLease(ctx, &store.ReleaseSealLeaseParams{Token: token}); err != nil {
						t.Errorf("%s: ReleaseSealLease: %v", owner, err)
						return
					}
				}
			}
		})
	}

	var writers sync.WaitGroup
	for i, s := range stores {
		for w := range writersPerStore {
			writers.Go(func() {
				for k := range proposalsPerWriter {
					tn := tenants[(w+k)%len(tenants)]
					p := NewProposal(tn, fmt.Sprintf("t-%d-%d", i, w), uniqueID("call"))
					res, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p})
					if err != nil {
						t.Errorf("CreateProposal: %v", err)
						return
					}
					v := store.VerdictApproved
					if k%2 == 1 {
						v = store.VerdictRejected
					}
					if _, err := s.Decide(ctx, &store.DecideParams{Tenant: tn, ID: res.Proposal.ID, Actor: requester, Verdict: v, Via: "api"}); err != nil {
						t.Errorf("Decide: %v", err)
						return
					}
				}
			})
		}
	}
	writers.Wait()
	// Let the lease change hands at least once before the sealers stop.
	for refused.Load() == 0 && ctx.Err() == nil && !t.Failed() {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	sealers.Wait()
	if t.Failed() {
		return
	}
	if err := SealAll(ctx, stores[len(stores)-1], "sealer-last"); err != nil {
		t.Fatalf("seal the rest: %v", err)
	}
	total := 0
	for _, tn := range tenants {
		chain := requireChainOf(t, ctx, stores[0], tn)
		total += len(chain)
		// Every store reads the same chain.
		for _, s := range stores[1:] {
			other, err := ReadChain(ctx, s, tn)
			if err != nil {
				t.Fatal(err)
			}
			if len(other) != len(chain) || other[len(other)-1].Hash != chain[len(chain)-1].Hash {
				t.Errorf("%s: another store reads a chain of %d events, head %s; want %d, head %s", tn, len(other), other[len(other)-1].Hash, len(chain), chain[len(chain)-1].Hash)
			}
		}
	}
	if want := 2 * len(stores) * writersPerStore * proposalsPerWriter; total != want {
		t.Errorf("chains hold %d events, want %d (a creation and a decision each)", total, want)
	}
	t.Logf("%d events sealed by the competing sealers, %d seals fenced out", sealed.Load(), refused.Load())
}

// AuditTamper rewrites a tenant's sealed events behind the store's back, as
// an operator with database access could: each function changes the rows
// of the events with the given seqs in raw SQL.
type AuditTamper struct {
	// Edit changes the detail of the event at seq.
	Edit func(t *testing.T, tenant string, seq int64)
	// Delete removes the event at seq.
	Delete func(t *testing.T, tenant string, seq int64)
	// Swap exchanges the seqs of two events.
	Swap func(t *testing.T, tenant string, a, b int64)
	// SwapBreaks is why verification refuses the first of two swapped
	// events, which depends on what moves with an event in the driver's
	// rows: where its links move with it (a row per event), its prev_hash
	// no longer follows the seq before (the default); where the links stay
	// in place (SQLite's blocks), its hash no longer matches it.
	SwapBreaks string
}

// AuditTampering seals a chain per tampering on s, tampers with it through
// tamper, and checks that verification names the first event that no
// longer holds, and that an untouched tenant's chain still holds.
func AuditTampering(t *testing.T, s store.Store, tamper AuditTamper) {
	t.Helper()
	ctx := t.Context()
	make6 := func(tn string) {
		for range 3 {
			p := NewProposal(tn, thread, uniqueID("call"))
			res, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Decide(ctx, &store.DecideParams{Tenant: tn, ID: res.Proposal.ID, Actor: requester, Verdict: store.VerdictApproved, Via: "api"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		tamper func(tn string)
		seq    int64
		reason string
	}{
		{"edited", func(tn string) { tamper.Edit(t, tn, 3) }, 3, "hash does not match the event"},
		{"deleted", func(tn string) { tamper.Delete(t, tn, 4) }, 4, "missing: seq 5 follows seq 3"},
		{"reordered", func(tn string) { tamper.Swap(t, tn, 2, 5) }, 2, cmp.Or(tamper.SwapBreaks, "prev_hash does not link to the hash of seq 1")},
	}
	tenants := make([]string, len(cases))
	for i := range cases {
		tenants[i] = uniqueID("tamper")
		make6(tenants[i])
	}
	untouched := uniqueID("untouched")
	make6(untouched)
	if err := SealAll(ctx, s, sealer); err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		if _, err := VerifyChain(ctx, s, tenants[i]); err != nil {
			t.Fatalf("%s before tampering: %v", tc.name, err)
		}
		tc.tamper(tenants[i])
		_, err := VerifyChain(ctx, s, tenants[i])
		var be *auditchain.BreakError
		if !errors.As(err, &be) || be.Seq != tc.seq || !strings.Contains(be.Reason, tc.reason) {
			t.Errorf("%s: verify = %v, want broken at seq %d: %s", tc.name, err, tc.seq, tc.reason)
		}
	}
	if _, err := VerifyChain(ctx, s, untouched); err != nil {
		t.Errorf("an untouched tenant's chain: %v", err)
	}
}
