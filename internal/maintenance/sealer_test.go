package maintenance_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

func sealerConfig(owner string, key ed25519.PrivateKey, now func() time.Time) maintenance.SealerConfig {
	return maintenance.SealerConfig{Owner: owner, Interval: time.Hour, LeaseDuration: time.Minute, Batch: 2,
		SigningKey: key, CheckpointEvery: time.Hour, CheckpointBudget: 10_000, Now: now, Logger: discard()}
}

// chain reads acme's sealed events and checks their hashes and links.
func chain(t *testing.T, st store.Store) []*store.AuditEvent {
	t.Helper()
	evs, err := st.ListAudit(t.Context(), &store.ListAuditParams{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	v := &auditchain.Verifier{}
	for _, ev := range evs {
		if err := v.Event(ev.Chained()); err != nil {
			t.Fatalf("the sealed chain does not hold: %v", err)
		}
	}
	return evs
}

// TestSealer: a triggered run of the lease holder chains every event
// committed before it (past one batch); a second sealer finds the lease
// held and seals nothing; once the first stops it gives the lease up, and
// the second takes over at its next run rather than when the lease lapses.
// On every store.
func TestSealer(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		propose(t, e, "s1")
		propose(t, e, "s2")
		propose(t, e, "s3")
		if n := len(chain(t, st)); n != 0 {
			t.Fatalf("%d events sealed before any sealer ran", n)
		}
		first := maintenance.NewSealer(st, sealerConfig("first", nil, clock.Now))
		stopFirst := start(t, first)
		if err := trigger(t, first); err != nil {
			t.Fatal(err)
		}
		sealed := len(chain(t, st))
		if sealed < 3 {
			t.Fatalf("%d events sealed after a run; want every event of the 3 proposals", sealed)
		}

		propose(t, e, "s4")
		second := maintenance.NewSealer(st, sealerConfig("second", nil, clock.Now))
		start(t, second)
		if err := trigger(t, second); err != nil {
			t.Fatal(err)
		}
		if n := len(chain(t, st)); n != sealed {
			t.Fatalf("the sealer without the lease sealed: %d events, want %d", n, sealed)
		}
		stopFirst()
		if err := trigger(t, second); err != nil {
			t.Fatal(err)
		}
		if n := len(chain(t, st)); n <= sealed {
			t.Fatalf("after the holder stopped, the other sealer sealed nothing (%d events): the lease was not given up", n)
		}
	})
}

// TestSealerSignsCheckpoints: with a signing key, the run that seals signs
// a checkpoint of the tenant's chain at its head, which verifies under the
// key's public half. On every store.
func TestSealerSignsCheckpoints(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		propose(t, e, "c1")
		pub, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s := maintenance.NewSealer(st, sealerConfig("signer", key, clock.Now))
		start(t, s)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		evs := chain(t, st)
		cps, err := st.ListCheckpoints(t.Context(), &store.ListCheckpointsParams{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 || len(cps) != 1 {
			t.Fatalf("%d events, %d checkpoints; want a checkpoint of the sealed chain", len(evs), len(cps))
		}
		head, cp := evs[len(evs)-1], cps[0]
		if cp.Seq != head.Seq || cp.Hash != head.Hash {
			t.Errorf("checkpoint at seq %d %s, want the head: seq %d %s", cp.Seq, cp.Hash, head.Seq, head.Hash)
		}
		if err := auditchain.NewKeys(pub).VerifySignature(cp.Signed()); err != nil {
			t.Errorf("the checkpoint does not verify: %v", err)
		}
	})
}

// TestSealerReportsSealed: a seal that leaves nothing unchained tells
// OnSealed the time (the metrics' timestamp, whose age is the chain's
// lag); a sealer without the lease tells nothing. On every store.
func TestSealerReportsSealed(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		propose(t, e, "r1")
		propose(t, e, "r2")
		var holder, other []time.Time
		cfg := sealerConfig("holder", nil, clock.Now)
		cfg.OnSealed = func(at time.Time) { holder = append(holder, at) }
		s := maintenance.NewSealer(st, cfg)
		start(t, s)
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		// Each run that ends with everything chained reports (Run's first
		// round, then the triggered one), each at the sealer's clock.
		if len(holder) == 0 {
			t.Fatal("OnSealed not called after a run that sealed everything")
		}
		for _, at := range holder {
			if !at.Equal(clock.Now()) {
				t.Fatalf("OnSealed got %v; want each at %v", holder, clock.Now())
			}
		}
		cfg = sealerConfig("other", nil, clock.Now)
		cfg.OnSealed = func(at time.Time) { other = append(other, at) }
		o := maintenance.NewSealer(st, cfg)
		start(t, o)
		if err := trigger(t, o); err != nil {
			t.Fatal(err)
		}
		if len(other) != 0 {
			t.Errorf("a sealer without the lease reported %v", other)
		}
	})
}
