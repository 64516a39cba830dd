package countersign_test

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

var checkpointKey = ed25519.NewKeyFromSeed([]byte("countersign-engine-checkpoint-ky"))

func checkpointKeys() auditchain.Keys {
	return auditchain.NewKeys(checkpointKey.Public().(ed25519.PublicKey))
}

// runSealer runs e's sealer with opts until the test ends.
func runSealer(t *testing.T, e *countersign.Engine, opts countersign.SealerOptions) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.RunSealer(ctx, opts); !errors.Is(err, context.Canceled) {
			t.Errorf("RunSealer: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// checkpointsOf reads id's tenant's checkpoints through the engine, a page
// of two at a time.
func checkpointsOf(t *testing.T, e *countersign.Engine, id countersign.Identity) []*cstype.Checkpoint {
	t.Helper()
	var all []*cstype.Checkpoint
	for after := int64(0); ; {
		page, err := e.AuditCheckpoints(t.Context(), id, after, 2)
		if err != nil {
			t.Fatalf("AuditCheckpoints(after %d): %v", after, err)
		}
		all = append(all, page.Checkpoints...)
		if page.Next == 0 {
			return all
		}
		after = page.Next
	}
}

// waitCheckpoint waits until id's tenant's newest checkpoint satisfies ok,
// calling nudge (when not nil) between looks: a clock moved on brings the
// next round.
func waitCheckpoint(t *testing.T, e *countersign.Engine, id countersign.Identity, ok func(newest *cstype.Checkpoint) bool, nudge func()) []*cstype.Checkpoint {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		all := checkpointsOf(t, e, id)
		if len(all) > 0 && ok(all[len(all)-1]) {
			return all
		}
		if nudge != nil {
			nudge()
		}
		select {
		case <-deadline:
			t.Fatalf("checkpoints %+v: the one awaited did not come within a minute", all)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func otherCall(tool string) *countersign.Call {
	c := refundCall(tool, countersign.ModeIndependent, `{"amount":1,"customer":"c"}`)
	c.Identity = countersign.Identity{Tenant: "other", Actor: "ann", Roles: []string{"agent"}}
	return c
}

// TestSealerSignsCheckpoints: with a key, the sealer signs a checkpoint of
// every tenant's chain head at once and then every CheckpointEvery, an idle
// chain again at the same seq with a new time; each verifies under the key
// and matches the chain; the operator reads them, page by page.
func TestSealerSignsCheckpoints(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open})
		for i := range 2 {
			res := h.call(refundCall(fmt.Sprint("call_", i), countersign.ModeIndependent, fmt.Sprintf(`{"amount":%d,"customer":"c_%d"}`, i+1, i)))
			h.decide(tBob, res.ProposalID, countersign.Reject)
		}
		h.call(otherCall("call_other"))
		every := time.Hour // rounds come when the test moves the fake clock
		runSealer(t, h.engine, countersign.SealerOptions{Interval: 5 * time.Millisecond, LeaseDuration: time.Minute, SigningKey: checkpointKey, CheckpointEvery: every})
		n := int64(eventCount(t, h.store, "acme"))
		// The first round follows the first seal, which seals every event
		// but where PostgreSQL meets a hole: then a later round signs the
		// rest.
		first := waitCheckpoint(t, h.engine, tBob, func(c *cstype.Checkpoint) bool { return c.Seq == n }, func() { h.clock.Advance(every) })
		chain := auditAll(t, h.engine, tBob)
		keys := checkpointKeys()
		for _, c := range first {
			if err := keys.VerifySignature(c.Signed()); err != nil || c.Tenant != "acme" || c.Hash != chain[c.Seq-1].Hash {
				t.Errorf("checkpoint %+v: %v; want acme's, signed, of the chain's hash at its seq", c, err)
			}
			if c.KeyID != auditchain.KeyID(checkpointKey.Public().(ed25519.PublicKey)) || c.At.After(h.clock.Now()) || c.At.Before(newClock().Now()) {
				t.Errorf("checkpoint key %s, at %v; want the key's id and the engine's clock", c.KeyID, c.At)
			}
		}
		other := countersign.Identity{Tenant: "other", Actor: "op", Roles: []string{"operator"}}
		waitCheckpoint(t, h.engine, other, func(c *cstype.Checkpoint) bool { return c.Seq == 1 && c.Tenant == "other" }, func() { h.clock.Advance(every) })

		// Idle: the next round signs the same seq again, at the new time,
		// in place of the last.
		signedAt := first[len(first)-1].At
		h.clock.Advance(every)
		again := waitCheckpoint(t, h.engine, tBob, func(c *cstype.Checkpoint) bool { return c.At.After(signedAt) }, nil)
		if len(again) != len(first) || again[len(again)-1].Seq != n || keys.VerifySignature(again[len(again)-1].Signed()) != nil {
			t.Errorf("an idle chain signed again: %+v, want %d checkpoints, the last at seq %d with a new time", again, len(first), n)
		}
		// New events: the next round signs the new head.
		res := h.call(refundCall("call_late", countersign.ModeIndependent, `{"amount":9,"customer":"c_9"}`))
		h.decide(tBob, res.ProposalID, countersign.Reject)
		waitSealed(t, h.engine, tBob, int(n)+2)
		h.clock.Advance(every)
		latest := waitCheckpoint(t, h.engine, tBob, func(c *cstype.Checkpoint) bool { return c.Seq == n+2 }, func() { h.clock.Advance(every) })
		// Verified as of the newest checkpoint's signing: the wait above
		// moves the fake clock an hour a try, and on a loaded machine it
		// may try several times before the sealer's round lands, which
		// would make "now" hours past a checkpoint that is not stale.
		if _, err := storetest.VerifyWithCheckpoints(t.Context(), h.store, "acme", &auditchain.ExportVerifier{Keys: keys, Every: every, Now: latest[len(latest)-1].At}); err != nil {
			t.Errorf("the chain with its checkpoints: %v", err)
		}
		// Only operators read them.
		for _, id := range []countersign.Identity{tAlice, tCarol} {
			if _, err := h.engine.AuditCheckpoints(t.Context(), id, 0, 0); !errors.Is(err, countersign.ErrForbidden) {
				t.Errorf("AuditCheckpoints as %s: %v, want ErrForbidden", id.Actor, err)
			}
		}
		for _, bad := range [][2]int64{{-1, 0}, {0, -1}, {0, countersign.MaxAuditPage + 1}} {
			if _, err := h.engine.AuditCheckpoints(t.Context(), tBob, bad[0], int(bad[1])); !errors.Is(err, countersign.ErrInvalidCall) {
				t.Errorf("AuditCheckpoints(after %d, limit %d): %v, want ErrInvalidCall", bad[0], bad[1], err)
			}
		}
	})
}

// TestSealerWithoutKeySignsNothing: no key, no checkpoint, whatever the
// sealer seals.
func TestSealerWithoutKeySignsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	runSealer(t, h.engine, countersign.SealerOptions{Interval: 5 * time.Millisecond, LeaseDuration: time.Minute})
	h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":1,"customer":"c_1"}`))
	waitSealed(t, h.engine, tBob, 1)
	// A seal after the one that sealed that event: a round would have
	// followed the first within its turn of the loop.
	h.call(refundCall("call_2", countersign.ModeIndependent, `{"amount":2,"customer":"c_2"}`))
	waitSealed(t, h.engine, tBob, 2)
	if cps := checkpointsOf(t, h.engine, tBob); len(cps) != 0 {
		t.Errorf("checkpoints without a key: %+v", cps)
	}
}

// TestSealerChecksTheChainInSteps: a chain checked for the first time is
// checked a budget of events a seal, each step signed, until the head.
func TestSealerChecksTheChainInSteps(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.engine.SetCheckpointBudget(2)
	for i := range 3 {
		res := h.call(refundCall(fmt.Sprint("call_", i), countersign.ModeIndependent, fmt.Sprintf(`{"amount":%d,"customer":"c_%d"}`, i+1, i)))
		h.decide(tBob, res.ProposalID, countersign.Reject)
	}
	runSealer(t, h.engine, countersign.SealerOptions{Interval: 5 * time.Millisecond, LeaseDuration: time.Minute, SigningKey: checkpointKey, CheckpointEvery: time.Hour})
	all := waitCheckpoint(t, h.engine, tBob, func(c *cstype.Checkpoint) bool { return c.Seq == 6 }, nil)
	var seqs []int64
	for _, c := range all {
		seqs = append(seqs, c.Seq)
	}
	if !slices.Equal(seqs, []int64{2, 4, 6}) {
		t.Errorf("checkpoints at seqs %v, want 2, 4, 6: two events checked a step", seqs)
	}
}

// rewritingStore serves a tenant's chain rewritten from seq edit on (the
// event's detail changed, every hash from there recomputed: a consistent
// rewrite), or cut short after seq cut, once switched on: what the sealer
// reads after someone rewrote the database under it.
type rewritingStore struct {
	store.Store
	on        atomic.Bool
	edit, cut int64
}

func (s *rewritingStore) chain(ctx context.Context, tenant string) ([]*cstype.AuditEvent, error) {
	chain, err := storetest.ReadChain(ctx, s.Store, tenant)
	if err != nil || !s.on.Load() {
		return chain, err
	}
	if s.cut > 0 {
		return chain[:min(len(chain), int(s.cut))], nil
	}
	out := make([]*cstype.AuditEvent, len(chain))
	for i, ae := range chain {
		cp := *ae
		if cp.Seq >= s.edit {
			if cp.Seq == s.edit {
				cp.Detail = "rewritten"
			}
			if i > 0 {
				cp.PrevHash = out[i-1].Hash
			}
			cp.Hash = auditchain.Hash(cp.Chained())
		}
		out[i] = &cp
	}
	return out, nil
}

func (s *rewritingStore) ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*cstype.AuditEvent, error) {
	if !s.on.Load() {
		return s.Store.ListAudit(ctx, params)
	}
	chain, err := s.chain(ctx, params.Tenant)
	if err != nil {
		return nil, err
	}
	from := min(int(params.After), len(chain))
	return chain[from:min(len(chain), from+cmp.Or(params.Limit, cstype.MaxPageSize))], nil
}

func (s *rewritingStore) ListChainHeads(ctx context.Context, params *store.ListChainHeadsParams) ([]*store.TenantChain, error) {
	heads, err := s.Store.ListChainHeads(ctx, params)
	if err != nil || !s.on.Load() {
		return heads, err
	}
	for _, h := range heads {
		chain, err := s.chain(ctx, h.Tenant)
		if err != nil {
			return nil, err
		}
		h.Head = store.ChainHead{Seq: chain[len(chain)-1].Seq, Hash: chain[len(chain)-1].Hash}
	}
	return heads, nil
}

// TestSealerRefusesAChangedChain: a chain rewritten consistently, or cut
// short, under a running sealer is never signed: the sealer logs that it no
// longer holds where it was signed, and signs nothing more for it, so that
// its newest checkpoint goes stale and verification fails. The chain's own
// check (no key) holds all along.
func TestSealerRefusesAChangedChain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		edit, cut int64
		logged    string
	}{
		{"rewritten", 2, 0, "broken at seq 4: hash differs from the kept head's: the chain was rewritten"},
		{"cut short", 0, 2, "broken at seq 3: missing: the chain ends at seq 2, before seq 4, which was signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := &rewritingStore{edit: tc.edit, cut: tc.cut}
			var logs syncBuffer
			h := newHarness(t, harnessOpts{open: func(t *testing.T, now func() time.Time) store.Store {
				rs.Store = openMemory(t, now)
				return rs
			}, engineOpts: func(o *countersign.Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }})
			for i := range 2 {
				res := h.call(refundCall(fmt.Sprint("call_", i), countersign.ModeIndependent, fmt.Sprintf(`{"amount":%d,"customer":"c_%d"}`, i+1, i)))
				h.decide(tBob, res.ProposalID, countersign.Reject)
			}
			every := time.Hour
			runSealer(t, h.engine, countersign.SealerOptions{Interval: 5 * time.Millisecond, LeaseDuration: time.Minute, SigningKey: checkpointKey, CheckpointEvery: every})
			signed := waitCheckpoint(t, h.engine, tBob, func(c *cstype.Checkpoint) bool { return c.Seq == 4 }, nil)
			rs.on.Store(true)
			for range 2 {
				// Two rounds after the change, each refusing it.
				before := strings.Count(logs.String(), "no checkpoint is signed for it")
				h.clock.Advance(every)
				for strings.Count(logs.String(), "no checkpoint is signed for it") == before {
					select {
					case <-t.Context().Done():
						t.Fatalf("the sealer did not refuse the changed chain; logs:\n%s", logs.String())
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			if !strings.Contains(logs.String(), tc.logged) {
				t.Errorf("logs %s, want %q", logs.String(), tc.logged)
			}
			now := checkpointsOf(t, h.engine, tBob)
			if len(now) != len(signed) || !now[len(now)-1].At.Equal(signed[len(signed)-1].At) || now[len(now)-1].Hash != signed[len(signed)-1].Hash {
				t.Errorf("checkpoints after the change = %+v, want them as they were: %+v", now, signed)
			}
			if _, err := storetest.VerifyChain(t.Context(), rs, "acme"); err != nil {
				t.Errorf("the changed chain's own check: %v, want it to hold", err)
			}
			_, err := storetest.VerifyWithCheckpoints(t.Context(), rs, "acme", &auditchain.ExportVerifier{Keys: checkpointKeys(), Every: every, Now: h.clock.Now()})
			if !errors.Is(err, auditchain.ErrBroken) {
				t.Errorf("the changed chain with its checkpoints: %v, want it broken", err)
			}
		})
	}
}

func TestSealerCheckpointOptionsValidated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for name, o := range map[string]countersign.SealerOptions{
		"CheckpointEvery":          {Interval: time.Second, CheckpointEvery: 500 * time.Millisecond, SigningKey: checkpointKey},
		"CheckpointEvery negative": {CheckpointEvery: -time.Second},
		"SigningKey":               {SigningKey: ed25519.PrivateKey("short")},
	} {
		if _, err := h.engine.NewWorker(countersign.WorkerOptions{Sealer: o}); err == nil || !strings.Contains(err.Error(), "SealerOptions."+strings.Fields(name)[0]) {
			t.Errorf("%s: NewWorker = %v", name, err)
		}
	}
	// Without a key, checkpoint_every is unused: a sealer of a long
	// interval stays valid.
	if _, err := h.engine.NewWorker(countersign.WorkerOptions{Sealer: countersign.SealerOptions{Interval: 2 * time.Minute, LeaseDuration: time.Hour}}); err != nil {
		t.Errorf("a sealer every 2m without a key: %v", err)
	}
}
