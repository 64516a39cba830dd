package storetest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
)

// checkpointOf is a checkpoint of the chain's event ae at t, its signature a
// placeholder: the store keeps what it is given, and does not check it.
func checkpointOf(ae *store.AuditEvent, t time.Time, sig string) *store.Checkpoint {
	return &store.Checkpoint{Tenant: ae.Tenant, Seq: ae.Seq, Hash: ae.Hash, At: t.UTC().Truncate(time.Microsecond), KeyID: "0123456789abcdef", Signature: sig}
}

// heads reads every page of ListChainHeads, limit tenants a page.
func (fx *fixture) heads(limit int) []*store.TenantChain {
	fx.t.Helper()
	var out []*store.TenantChain
	for after := ""; ; {
		page, err := fx.store.ListChainHeads(fx.ctx, &store.ListChainHeadsParams{AfterTenant: after, Limit: limit})
		if err != nil {
			fx.t.Fatalf("ListChainHeads(after %q): %v", after, err)
		}
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
		after = page[len(page)-1].Tenant
	}
}

func (fx *fixture) checkpoints(tn string, after int64, limit int) []*store.Checkpoint {
	fx.t.Helper()
	cps, err := fx.store.ListCheckpoints(fx.ctx, &store.ListCheckpointsParams{Tenant: tn, After: after, Limit: limit})
	if err != nil {
		fx.t.Fatalf("ListCheckpoints(%s, after %d): %v", tn, after, err)
	}
	return cps
}

func sameCheckpoint(a, b *store.Checkpoint) bool {
	return a != nil && b != nil && a.Tenant == b.Tenant && a.Seq == b.Seq && a.Hash == b.Hash && a.At.Equal(b.At) && a.KeyID == b.KeyID && a.Signature == b.Signature
}

func testCheckpoints(t *testing.T, newStore Factory) {
	t.Run("Heads", func(t *testing.T) {
		t.Parallel()
		fx := setupAudit(t, newStore)
		// Names whose byte order differs from other orders: "B" < "a".
		tenants := []string{"a-" + uniqueID("t"), "B-" + uniqueID("t"), "a-" + uniqueID("u")}
		for _, tn := range tenants {
			fx.create(NewProposal(tn, thread, uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour))))
		}
		fx.create(NewProposal(tenants[0], thread, uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour))))
		before := fx.heads(1000)
		l := fx.acquireSeal(sealer, longLease)
		fx.seal(l, 0)
		// A tenant whose events are not sealed yet has no chain.
		unsealed := "c-" + uniqueID("t")
		fx.create(NewProposal(unsealed, thread, uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour))))
		for _, limit := range []int{1, 2, 1000} {
			got := fx.heads(limit)
			var names []string
			for _, h := range got {
				names = append(names, h.Tenant)
				if slices.Contains(tenants, h.Tenant) {
					chain := fx.chain(h.Tenant)
					last := chain[len(chain)-1]
					if h.Head.Seq != last.Seq || h.Head.Hash != last.Hash || h.Checkpoint != nil {
						t.Errorf("limit %d: head of %s = %+v, checkpoint %+v; want seq %d, %s, none", limit, h.Tenant, h.Head, h.Checkpoint, last.Seq, last.Hash)
					}
				}
			}
			if slices.Contains(names, unsealed) {
				t.Errorf("limit %d: ListChainHeads lists %s, whose events are not sealed", limit, unsealed)
			}
			if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
				t.Errorf("limit %d: tenants %v, want each once, in byte order", limit, names)
			}
			if len(got) != len(before)+len(tenants) {
				t.Errorf("limit %d: %d tenants, want %d", limit, len(got), len(before)+len(tenants))
			}
		}
		if got := fx.heads(1000); len(got) > 0 {
			page, err := fx.store.ListChainHeads(fx.ctx, &store.ListChainHeadsParams{AfterTenant: got[len(got)-1].Tenant})
			if err != nil || len(page) != 0 {
				t.Errorf("ListChainHeads after the last tenant = %d, %v; want none", len(page), err)
			}
		}
	})

	t.Run("WriteAndList", func(t *testing.T) {
		t.Parallel()
		fx := setupAudit(t, newStore)
		for range 2 {
			fx.approved()
		}
		fx.create(NewProposal(otherTenant, thread, uniqueID("call"), withExpiresAt(fx.clock.Now().Add(time.Hour))))
		l := fx.acquireSeal(sealer, longLease)
		fx.seal(l, 0)
		chain := fx.chain(tenant)
		if len(chain) < 4 {
			t.Fatalf("chain of %d events, want 4", len(chain))
		}
		now := fx.clock.Now().Add(123456 * time.Microsecond)
		cp2, cp4 := checkpointOf(chain[1], now, "sig-2"), checkpointOf(chain[3], now.Add(time.Minute), "sig-4")
		other := checkpointOf(fx.chain(otherTenant)[0], now, "sig-other")
		res, err := fx.store.WriteCheckpoints(fx.ctx, &store.WriteCheckpointsParams{Token: l.Token, LeaseDuration: longLease, Checkpoints: []*store.Checkpoint{cp4, other, cp2}})
		if err != nil {
			t.Fatalf("WriteCheckpoints: %v", err)
		}
		if res.Token != l.Token || res.Owner != sealer || res.ExpiresAt.Before(fx.clock.Now().Add(longLease-clockSkew)) {
			t.Errorf("WriteCheckpoints renewed the lease as %+v, want %s's, for about %v", res, sealer, longLease)
		}
		got := fx.checkpoints(tenant, 0, 0)
		if len(got) != 2 || !sameCheckpoint(got[0], cp2) || !sameCheckpoint(got[1], cp4) {
			t.Fatalf("ListCheckpoints = %+v, want the checkpoints of seq 2 and 4 as written, in seq order", got)
		}
		if page := fx.checkpoints(tenant, 2, 0); len(page) != 1 || page[0].Seq != 4 {
			t.Errorf("ListCheckpoints(after 2) = %+v, want seq 4", page)
		}
		if page := fx.checkpoints(tenant, 0, 1); len(page) != 1 || page[0].Seq != 2 {
			t.Errorf("ListCheckpoints(limit 1) = %+v, want seq 2", page)
		}
		if page := fx.checkpoints(tenant, 4, 0); len(page) != 0 {
			t.Errorf("ListCheckpoints(after the last) = %+v, want none", page)
		}
		if page := fx.checkpoints(otherTenant, 0, 0); len(page) != 1 || !sameCheckpoint(page[0], other) {
			t.Errorf("the other tenant's checkpoints = %+v, want its own", page)
		}
		if page := fx.checkpoints("nobody", 0, 0); len(page) != 0 {
			t.Errorf("ListCheckpoints(a tenant without any) = %+v", page)
		}
		for _, h := range fx.heads(1000) {
			if h.Tenant == tenant && !sameCheckpoint(h.Checkpoint, cp4) {
				t.Errorf("ListChainHeads: %s's newest checkpoint = %+v, want seq 4's", tenant, h.Checkpoint)
			}
		}

		// An idle chain signed again: same seq and hash, a later time.
		write := func(cps ...*store.Checkpoint) {
			t.Helper()
			if _, err := fx.store.WriteCheckpoints(fx.ctx, &store.WriteCheckpointsParams{Token: l.Token, LeaseDuration: longLease, Checkpoints: cps}); err != nil {
				t.Fatalf("WriteCheckpoints: %v", err)
			}
		}
		again := checkpointOf(chain[3], now.Add(2*time.Minute), "sig-4-again")
		again.KeyID = "fedcba9876543210"
		write(again)
		if got := fx.checkpoints(tenant, 2, 0); len(got) != 1 || !sameCheckpoint(got[0], again) {
			t.Errorf("after signing seq 4 again later: %+v, want %+v", got, again)
		}
		// An older one for the same seq, or one for another hash, leaves the
		// stored one as it was.
		write(checkpointOf(chain[3], now, "sig-4-older"))
		forged := checkpointOf(chain[3], now.Add(3*time.Minute), "sig-4-forged")
		forged.Hash = strings.Repeat("0", 64)
		write(forged)
		if got := fx.checkpoints(tenant, 2, 0); len(got) != 1 || !sameCheckpoint(got[0], again) {
			t.Errorf("after an older checkpoint and one of another hash for seq 4: %+v, want %+v kept", got, again)
		}

		// Only the lease's holder writes: a token taken over writes nothing.
		if err := fx.store.ReleaseSealLease(fx.ctx, &store.ReleaseSealLeaseParams{Token: l.Token}); err != nil {
			t.Fatal(err)
		}
		m := fx.acquireSeal(sealer2, longLease)
		stale := checkpointOf(chain[2], now, "sig-3")
		if _, err := fx.store.WriteCheckpoints(fx.ctx, &store.WriteCheckpointsParams{Token: l.Token, LeaseDuration: longLease, Checkpoints: []*store.Checkpoint{stale}}); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("WriteCheckpoints with a token taken over: %v, want ErrLeaseLost", err)
		}
		if got := fx.checkpoints(tenant, 0, 0); len(got) != 2 {
			t.Errorf("after a fenced-out write: %d checkpoints, want 2", len(got))
		}
		for name, bad := range map[string]*store.WriteCheckpointsParams{
			"no lease":   {Token: m.Token, Checkpoints: []*store.Checkpoint{stale}},
			"no tenant":  {Token: m.Token, LeaseDuration: time.Second, Checkpoints: []*store.Checkpoint{{Seq: 1, Hash: stale.Hash, At: now, KeyID: "k", Signature: "s"}}},
			"seq 0":      {Token: m.Token, LeaseDuration: time.Second, Checkpoints: []*store.Checkpoint{{Tenant: tenant, Hash: stale.Hash, At: now, KeyID: "k", Signature: "s"}}},
			"no hash":    {Token: m.Token, LeaseDuration: time.Second, Checkpoints: []*store.Checkpoint{{Tenant: tenant, Seq: 1, At: now, KeyID: "k", Signature: "s"}}},
			"unsigned":   {Token: m.Token, LeaseDuration: time.Second, Checkpoints: []*store.Checkpoint{{Tenant: tenant, Seq: 1, Hash: stale.Hash, At: now, KeyID: "k"}}},
			"nil":        {Token: m.Token, LeaseDuration: time.Second, Checkpoints: []*store.Checkpoint{nil}},
			"twice":      {Token: m.Token, LeaseDuration: time.Second, Checkpoints: []*store.Checkpoint{stale, stale}},
			"no time":    {Token: m.Token, LeaseDuration: time.Second, Checkpoints: []*store.Checkpoint{{Tenant: tenant, Seq: 1, Hash: stale.Hash, KeyID: "k", Signature: "s"}}},
			"no token":   {LeaseDuration: time.Second},
			"neg. lease": {Token: m.Token, LeaseDuration: -time.Second},
		} {
			if _, err := fx.store.WriteCheckpoints(fx.ctx, bad); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("WriteCheckpoints(%s): %v, want ErrInvalidParams", name, err)
			}
		}
		// The new holder writes.
		if _, err := fx.store.WriteCheckpoints(fx.ctx, &store.WriteCheckpointsParams{Token: m.Token, LeaseDuration: longLease, Checkpoints: []*store.Checkpoint{stale}}); err != nil {
			t.Fatalf("WriteCheckpoints by the new holder: %v", err)
		}
		if got := fx.checkpoints(tenant, 0, 0); len(got) != 3 || !sameCheckpoint(got[1], stale) {
			t.Errorf("after the new holder's write: %+v, want seq 2, 3, 4", got)
		}
	})
}

// CheckpointKey signs the checkpoints of AuditRewriting.
var CheckpointKey = ed25519.NewKeyFromSeed([]byte("countersign-storetest-checkpoint"))

// VerifyWithCheckpoints checks a tenant's chain and checkpoints as stored,
// as `countersign audit verify --public-key` does against a server: each
// checkpoint after the event it covers, those beyond the chain at its end.
// v holds the keys, checkpoint_every and the time to judge freshness by.
func VerifyWithCheckpoints(ctx context.Context, s store.Store, tenant string, v *auditchain.ExportVerifier) (auditchain.ExportResult, error) {
	evs, err := ReadChain(ctx, s, tenant)
	if err != nil {
		return auditchain.ExportResult{}, err
	}
	var cps []*store.Checkpoint
	for after := int64(0); ; {
		page, err := s.ListCheckpoints(ctx, &store.ListCheckpointsParams{Tenant: tenant, After: after, Limit: 100})
		if err != nil {
			return auditchain.ExportResult{}, fmt.Errorf("ListCheckpoints(%s, after %d): %w", tenant, after, err)
		}
		cps = append(cps, page...)
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].Seq
	}
	checkpoint := func(c *store.Checkpoint) error {
		raw, err := json.Marshal(c.Signed())
		if err != nil {
			return err
		}
		return v.Checkpoint(raw)
	}
	for _, e := range evs {
		if err := v.Event(e.Chained()); err != nil {
			return auditchain.ExportResult{}, err
		}
		for ; len(cps) > 0 && cps[0].Seq <= e.Seq; cps = cps[1:] {
			if err := checkpoint(cps[0]); err != nil {
				return auditchain.ExportResult{}, err
			}
		}
	}
	for _, c := range cps {
		if err := checkpoint(c); err != nil {
			return auditchain.ExportResult{}, err
		}
	}
	return v.Finish()
}

// AuditRewrite rewrites a tenant's chain behind the store's back, as one
// with write access to the database and without the signing key could,
// keeping it consistent: each function changes rows in raw SQL.
type AuditRewrite struct {
	// Edit sets the detail of the event at seq.
	Edit func(t *testing.T, tenant string, seq int64, detail string)
	// Relink stores prevHash and hash as the links of the event at seq.
	Relink func(t *testing.T, tenant string, seq int64, prevHash, hash string)
	// Truncate removes the events from seq on, and their links: the chain
	// ends at seq-1.
	Truncate func(t *testing.T, tenant string, from int64)
	// DeleteCheckpoints removes the tenant's checkpoints from seq on.
	DeleteCheckpoints func(t *testing.T, tenant string, from int64)
}

// AuditRewriting seals a chain of six events per case on s, signs
// checkpoints of each at seq 3 and 6 a minute apart with CheckpointKey, and
// rewrites it through rw: an event edited and every hash after it
// recomputed, or the chain cut short, with or without the checkpoints that
// would show it. The chain's own check (verify without a key, no head kept)
// still holds after each; verification against the signed checkpoints
// names where it breaks. An untouched tenant verifies both ways.
func AuditRewriting(t *testing.T, s store.Store, rw AuditRewrite) {
	t.Helper()
	ctx := t.Context()
	signedAt := time.Now().UTC().Truncate(time.Microsecond)
	verifier := func() *auditchain.ExportVerifier {
		// Judged 90 s after the newest checkpoint: within two minutes of it.
		return &auditchain.ExportVerifier{Keys: auditchain.NewKeys(CheckpointKey.Public().(ed25519.PublicKey)), Every: time.Minute, Now: signedAt.Add(90 * time.Second)}
	}
	rewrite := func(tn string, seq int64) {
		chain, err := ReadChain(ctx, s, tn)
		if err != nil {
			t.Fatal(err)
		}
		rw.Edit(t, tn, seq, "rewritten")
		prev := chain[seq-2].Hash
		for _, ae := range chain[seq-1:] {
			ce := ae.Chained()
			if ae.Seq == seq {
				ce.Detail = "rewritten"
			}
			ce.PrevHash = prev
			ce.Hash = auditchain.Hash(ce)
			rw.Relink(t, tn, ae.Seq, ce.PrevHash, ce.Hash)
			prev = ce.Hash
		}
	}
	cases := []struct {
		name   string
		tamper func(tn string)
		seq    int64
		reason string
	}{
		{"rewritten, rehashed", func(tn string) { rewrite(tn, 4) }, 6, "hash differs from the signed checkpoint's: the chain was rewritten"},
		{"rewritten, rehashed, later checkpoints deleted", func(tn string) { rewrite(tn, 4); rw.DeleteCheckpoints(t, tn, 4) }, 4, "the newest signed checkpoint (seq 3"},
		{"cut short", func(tn string) { rw.Truncate(t, tn, 5) }, 6, "covers seq 6, but the events before it end at seq 4: the chain was cut short"},
		{"cut short, later checkpoints deleted", func(tn string) { rw.Truncate(t, tn, 5); rw.DeleteCheckpoints(t, tn, 5) }, 4, "the newest signed checkpoint (seq 3"},
	}
	tenants := make([]string, len(cases)+1)
	for i := range tenants {
		tenants[i] = uniqueID("rewrite")
		for range 3 {
			p := NewProposal(tenants[i], thread, uniqueID("call"))
			res, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Decide(ctx, &store.DecideParams{Tenant: tenants[i], ID: res.Proposal.ID, Actor: requester, Verdict: store.VerdictApproved, Via: "api"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := SealAll(ctx, s, sealer); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: sealer, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var cps []*store.Checkpoint
	for _, tn := range tenants {
		chain, err := ReadChain(ctx, s, tn)
		if err != nil || len(chain) != 6 {
			t.Fatalf("chain of %s: %d events, %v; want 6", tn, len(chain), err)
		}
		for i, ae := range []*store.AuditEvent{chain[2], chain[5]} {
			c := &auditchain.Checkpoint{Tenant: tn, Seq: ae.Seq, Hash: ae.Hash, At: auditchain.FormatTime(signedAt.Add(time.Duration(i-1) * time.Minute))}
			auditchain.Sign(c, CheckpointKey)
			at, _ := time.Parse(time.RFC3339Nano, c.At)
			cps = append(cps, &store.Checkpoint{Tenant: tn, Seq: c.Seq, Hash: c.Hash, At: at, KeyID: c.KeyID, Signature: c.Signature})
		}
	}
	if _, err := s.WriteCheckpoints(ctx, &store.WriteCheckpointsParams{Token: l.Token, LeaseDuration: time.Minute, Checkpoints: cps}); err != nil {
		t.Fatalf("WriteCheckpoints: %v", err)
	}
	if err := s.ReleaseSealLease(ctx, &store.ReleaseSealLeaseParams{Token: l.Token}); err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		tn := tenants[i]
		if _, err := VerifyWithCheckpoints(ctx, s, tn, verifier()); err != nil {
			t.Fatalf("%s, before: %v", tc.name, err)
		}
		tc.tamper(tn)
		if _, err := VerifyChain(ctx, s, tn); err != nil {
			t.Errorf("%s: the chain's own check = %v, want it to hold: the rewrite is consistent", tc.name, err)
		}
		_, err := VerifyWithCheckpoints(ctx, s, tn, verifier())
		var be *auditchain.BreakError
		if !errors.As(err, &be) || be.Seq != tc.seq || !strings.Contains(be.Reason, tc.reason) {
			t.Errorf("%s: verify with the checkpoints = %v, want broken at seq %d: …%s…", tc.name, err, tc.seq, tc.reason)
		}
	}
	untouched := tenants[len(cases)]
	res, err := VerifyWithCheckpoints(ctx, s, untouched, verifier())
	if err != nil || res.Head.Seq != 6 || res.Checkpoints != 2 {
		t.Errorf("an untouched tenant: %+v, %v; want 6 events and 2 checkpoints that hold", res, err)
	}
}
