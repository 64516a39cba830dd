package storetest

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// newEnrollment returns a valid, unspent link for approver, made now.
func newEnrollment(now time.Time, ttl time.Duration) *store.PasskeyEnrollment {
	return &store.PasskeyEnrollment{
		Hash: sessionID(), Tenant: tenant, Actor: approver, CreatedBy: "root", CreatedAt: now, ExpiresAt: now.Add(ttl),
	}
}

// newPasskey returns a valid passkey of approver, made now.
func newPasskey(now time.Time) *store.Passkey {
	return &store.Passkey{
		Tenant: tenant, Actor: approver, ID: uniqueID("cred"), Name: "laptop",
		Credential: []byte(`{"id":"` + uniqueID("c") + `"}`), CreatedAt: now,
	}
}

// newChallenge returns a valid step-up challenge of approver for proposal
// prop, made now.
func newChallenge(now time.Time, prop string) *store.PasskeyChallenge {
	return &store.PasskeyChallenge{
		Hash: sessionID(), Tenant: tenant, Actor: approver, Purpose: store.PurposeStepUp, ProposalID: prop,
		InputDigest: "sha256:" + prop, Session: []byte(`{"challenge":"x"}`), CreatedAt: now, ExpiresAt: now.Add(2 * time.Minute),
	}
}

// spendOf names exactly what c is bound to, at now.
func spendOf(c *store.PasskeyChallenge, now time.Time) *store.SpendPasskeyChallengeParams {
	return &store.SpendPasskeyChallengeParams{
		Hash: c.Hash, Tenant: c.Tenant, Actor: c.Actor, Purpose: c.Purpose, ProposalID: c.ProposalID, InputDigest: c.InputDigest, Now: now,
	}
}

func (fx *fixture) listPasskeys(tn, actor string) []*store.Passkey {
	fx.t.Helper()
	ps, err := fx.store.ListPasskeys(fx.ctx, &store.ListPasskeysParams{Tenant: tn, Actor: actor})
	if err != nil {
		fx.t.Fatalf("ListPasskeys: %v", err)
	}
	return ps
}

func testPasskeys(t *testing.T, newStore Factory) {
	t.Run("EnrollmentRoundTrip", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now().Add(123456 * time.Microsecond)
		e := newEnrollment(now, 15*time.Minute)
		if err := fx.store.CreatePasskeyEnrollment(fx.ctx, &store.CreatePasskeyEnrollmentParams{Enrollment: e}); err != nil {
			t.Fatal(err)
		}
		got, err := fx.store.GetPasskeyEnrollment(fx.ctx, &store.GetPasskeyEnrollmentParams{Hash: e.Hash})
		if err != nil {
			t.Fatal(err)
		}
		if got.Hash != e.Hash || got.Tenant != tenant || got.Actor != approver || got.CreatedBy != "root" ||
			!got.CreatedAt.Equal(e.CreatedAt) || !got.ExpiresAt.Equal(e.ExpiresAt) || got.SpentAt != nil ||
			got.CreatedAt.Location() != time.UTC {
			t.Errorf("enrollment = %+v, want %+v", got, e)
		}
		if err := fx.store.CreatePasskeyEnrollment(fx.ctx, &store.CreatePasskeyEnrollmentParams{Enrollment: e}); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("the same hash again: %v, want invalid params", err)
		}
		if _, err := fx.store.GetPasskeyEnrollment(fx.ctx, &store.GetPasskeyEnrollmentParams{Hash: sessionID()}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("an unknown hash: %v, want not found", err)
		}
		for name, edit := range map[string]func(*store.PasskeyEnrollment){
			"raw token":   func(e *store.PasskeyEnrollment) { e.Hash = "a-token" },
			"no actor":    func(e *store.PasskeyEnrollment) { e.Actor = "" },
			"no creator":  func(e *store.PasskeyEnrollment) { e.CreatedBy = "" },
			"no lifetime": func(e *store.PasskeyEnrollment) { e.ExpiresAt = e.CreatedAt },
			"spent":       func(e *store.PasskeyEnrollment) { e.SpentAt = &e.CreatedAt },
		} {
			bad := newEnrollment(now, time.Minute)
			edit(bad)
			if err := fx.store.CreatePasskeyEnrollment(fx.ctx, &store.CreatePasskeyEnrollmentParams{Enrollment: bad}); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("%s: %v, want invalid params", name, err)
			}
		}
	})

	t.Run("EnrollSpendsTheLinkOnce", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		e := newEnrollment(now, 15*time.Minute)
		if err := fx.store.CreatePasskeyEnrollment(fx.ctx, &store.CreatePasskeyEnrollmentParams{Enrollment: e}); err != nil {
			t.Fatal(err)
		}
		// Someone else's passkey cannot spend bob's link.
		other := newPasskey(now)
		other.Actor = "carol"
		if err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: other, EnrollmentHash: e.Hash, Now: now, Via: "web"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("carol spending bob's link: %v, want not found", err)
		}
		// Nor after it expired.
		late := newPasskey(now)
		if err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: late, EnrollmentHash: e.Hash, Now: e.ExpiresAt, Via: "web"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("spending at expiry: %v, want not found", err)
		}
		if ps := fx.listPasskeys(tenant, "carol"); len(ps) != 0 {
			t.Errorf("refused passkeys were stored: %+v", ps)
		}
		first := newPasskey(now)
		spentAt := now.Add(time.Minute)
		if err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: first, EnrollmentHash: e.Hash, Now: spentAt, Via: "web"}); err != nil {
			t.Fatalf("enrol: %v", err)
		}
		got, err := fx.store.GetPasskeyEnrollment(fx.ctx, &store.GetPasskeyEnrollmentParams{Hash: e.Hash})
		if err != nil || got.SpentAt == nil || !got.SpentAt.Equal(spentAt) {
			t.Errorf("the link after enrolling: %+v, %v; want spent at %v", got, err, spentAt)
		}
		second := newPasskey(now)
		if err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: second, EnrollmentHash: e.Hash, Now: spentAt, Via: "web"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the link again: %v, want not found", err)
		}
		if ps := fx.listPasskeys(tenant, approver); len(ps) != 1 || ps[0].ID != first.ID {
			t.Errorf("bob's passkeys = %+v, want only the first", ps)
		}
		// A new link for bob prunes his spent one.
		next := newEnrollment(now.Add(2*time.Minute), 15*time.Minute)
		if err := fx.store.CreatePasskeyEnrollment(fx.ctx, &store.CreatePasskeyEnrollmentParams{Enrollment: next}); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.store.GetPasskeyEnrollment(fx.ctx, &store.GetPasskeyEnrollmentParams{Hash: e.Hash}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the spent link after a new one: %v, want not found", err)
		}
	})

	t.Run("PasskeysRoundTrip", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now().Add(123456 * time.Microsecond)
		a, b := newPasskey(now), newPasskey(now.Add(time.Second))
		for _, p := range []*store.Passkey{b, a} {
			if err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: p, Now: now, Via: "web"}); err != nil {
				t.Fatal(err)
			}
		}
		dup := newPasskey(now)
		dup.ID, dup.Actor = a.ID, "carol"
		if err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: dup, Now: now, Via: "web"}); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("a credential id stored for bob, again for carol: %v, want invalid params", err)
		}
		ps := fx.listPasskeys(tenant, approver)
		if len(ps) != 2 || ps[0].ID != a.ID || ps[1].ID != b.ID {
			t.Fatalf("bob's passkeys = %+v, want a then b (oldest first)", ps)
		}
		if !bytes.Equal(ps[0].Credential, a.Credential) || ps[0].Name != "laptop" || !ps[0].CreatedAt.Equal(a.CreatedAt) || ps[0].LastUsedAt != nil {
			t.Errorf("passkey = %+v, want %+v", ps[0], a)
		}
		if got := fx.listPasskeys(otherTenant, approver); len(got) != 0 {
			t.Errorf("bob of another tenant has %d passkeys, want none", len(got))
		}
		used := now.Add(time.Hour)
		if err := fx.store.UpdatePasskey(fx.ctx, &store.UpdatePasskeyParams{Tenant: tenant, Actor: approver, ID: a.ID, Credential: []byte(`{"n":2}`), UsedAt: used}); err != nil {
			t.Fatal(err)
		}
		if err := fx.store.UpdatePasskey(fx.ctx, &store.UpdatePasskeyParams{Tenant: tenant, Actor: "carol", ID: a.ID, Credential: []byte(`{}`), UsedAt: used}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("carol updating bob's passkey: %v, want not found", err)
		}
		ps = fx.listPasskeys(tenant, approver)
		if string(ps[0].Credential) != `{"n":2}` || ps[0].LastUsedAt == nil || !ps[0].LastUsedAt.Equal(used) {
			t.Errorf("after the update: %+v", ps[0])
		}
		if err := fx.store.DeletePasskey(fx.ctx, &store.DeletePasskeyParams{Tenant: tenant, Actor: "carol", ID: a.ID, Now: used, Via: "web"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("carol removing bob's passkey: %v, want not found", err)
		}
		if err := fx.store.DeletePasskey(fx.ctx, &store.DeletePasskeyParams{Tenant: tenant, Actor: approver, ID: a.ID, Now: used, Via: "web"}); err != nil {
			t.Fatal(err)
		}
		if err := fx.store.DeletePasskey(fx.ctx, &store.DeletePasskeyParams{Tenant: tenant, Actor: approver, ID: a.ID, Now: used, Via: "web"}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("removing it twice: %v, want not found", err)
		}
		if ps := fx.listPasskeys(tenant, approver); len(ps) != 1 || ps[0].ID != b.ID {
			t.Errorf("after the removal: %+v, want b only", ps)
		}
	})

	t.Run("AuditEvents", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		e := newEnrollment(now, 15*time.Minute)
		if err := fx.store.CreatePasskeyEnrollment(fx.ctx, &store.CreatePasskeyEnrollmentParams{Enrollment: e}); err != nil {
			t.Fatal(err)
		}
		first, second := newPasskey(now), newPasskey(now)
		second.Name = "phone"
		if err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: first, EnrollmentHash: e.Hash, Now: now, Via: "web"}); err != nil {
			t.Fatal(err)
		}
		if err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: second, Now: now, Via: "web"}); err != nil {
			t.Fatal(err)
		}
		if err := fx.store.DeletePasskey(fx.ctx, &store.DeletePasskeyParams{Tenant: tenant, Actor: approver, ID: first.ID, Now: now, Via: "web"}); err != nil {
			t.Fatal(err)
		}
		l := fx.acquireSeal(sealer, longLease)
		for fx.seal(l, 100) > 0 {
		}
		chain := fx.chain(tenant)
		want := []struct {
			typ    store.EventType
			detail string
		}{
			{store.EventPasskeyEnrolled, store.PasskeyEventDetail(first)},
			{store.EventPasskeyAdded, store.PasskeyEventDetail(second)},
			{store.EventPasskeyRemoved, store.PasskeyEventDetail(first)},
		}
		if len(chain) != len(want) {
			t.Fatalf("chain holds %d events, want %d", len(chain), len(want))
		}
		for i, w := range want {
			ev := chain[i]
			if ev.Type != w.typ || ev.Detail != w.detail || ev.Actor != approver || ev.ActorKind != "human" || ev.Via != "web" || ev.ProposalID != "" {
				t.Errorf("event %d = %+v, want %s %q by bob via web, of no proposal", i, ev.Event, w.typ, w.detail)
			}
		}
	})

	t.Run("ChallengeBindings", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		c := newChallenge(now, "prop_1")
		if err := fx.store.CreatePasskeyChallenge(fx.ctx, &store.CreatePasskeyChallengeParams{Challenge: c}); err != nil {
			t.Fatal(err)
		}
		if err := fx.store.CreatePasskeyChallenge(fx.ctx, &store.CreatePasskeyChallengeParams{Challenge: c}); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("the same hash again: %v, want invalid params", err)
		}
		for name, edit := range map[string]func(*store.SpendPasskeyChallengeParams){
			"another proposal": func(p *store.SpendPasskeyChallengeParams) { p.ProposalID = "prop_2" },
			"another input":    func(p *store.SpendPasskeyChallengeParams) { p.InputDigest = "sha256:other" },
			"another approver": func(p *store.SpendPasskeyChallengeParams) { p.Actor = "carol" },
			"another tenant":   func(p *store.SpendPasskeyChallengeParams) { p.Tenant = otherTenant },
			"another purpose":  func(p *store.SpendPasskeyChallengeParams) { p.Purpose = store.PurposeManage },
			"at expiry":        func(p *store.SpendPasskeyChallengeParams) { p.Now = c.ExpiresAt },
			"another hash":     func(p *store.SpendPasskeyChallengeParams) { p.Hash = sessionID() },
		} {
			p := spendOf(c, now)
			edit(p)
			if got, err := fx.store.SpendPasskeyChallenge(fx.ctx, p); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: %+v, %v; want not found", name, got, err)
			}
		}
		// None of those spent it.
		got, err := fx.store.SpendPasskeyChallenge(fx.ctx, spendOf(c, now.Add(time.Minute)))
		if err != nil {
			t.Fatalf("spend: %v", err)
		}
		if got.Hash != c.Hash || got.ProposalID != "prop_1" || got.InputDigest != c.InputDigest || !bytes.Equal(got.Session, c.Session) ||
			!got.ExpiresAt.Equal(c.ExpiresAt) || got.Purpose != store.PurposeStepUp {
			t.Errorf("spent = %+v, want %+v", got, c)
		}
		if _, err := fx.store.SpendPasskeyChallenge(fx.ctx, spendOf(c, now)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("spending twice: %v, want not found", err)
		}

		for name, edit := range map[string]func(*store.PasskeyChallenge){
			"raw challenge":          func(c *store.PasskeyChallenge) { c.Hash = "challenge" },
			"no purpose":             func(c *store.PasskeyChallenge) { c.Purpose = "" },
			"step-up, no proposal":   func(c *store.PasskeyChallenge) { c.ProposalID = "" },
			"manage, with proposal":  func(c *store.PasskeyChallenge) { c.Purpose = store.PurposeManage },
			"no session":             func(c *store.PasskeyChallenge) { c.Session = nil },
			"no lifetime":            func(c *store.PasskeyChallenge) { c.ExpiresAt = c.CreatedAt },
			"step-up, an enrollment": func(c *store.PasskeyChallenge) { c.EnrollmentHash = sessionID() },
		} {
			bad := newChallenge(now, "prop_3")
			edit(bad)
			if err := fx.store.CreatePasskeyChallenge(fx.ctx, &store.CreatePasskeyChallengeParams{Challenge: bad}); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("%s: %v, want invalid params", name, err)
			}
		}
		reg := &store.PasskeyChallenge{
			Hash: sessionID(), Tenant: tenant, Actor: approver, Purpose: store.PurposeRegister, EnrollmentHash: sessionID(),
			Session: []byte(`{}`), CreatedAt: now, ExpiresAt: now.Add(time.Minute),
		}
		if err := fx.store.CreatePasskeyChallenge(fx.ctx, &store.CreatePasskeyChallengeParams{Challenge: reg}); err != nil {
			t.Fatal(err)
		}
		got, err = fx.store.SpendPasskeyChallenge(fx.ctx, spendOf(reg, now))
		if err != nil || got.EnrollmentHash != reg.EnrollmentHash {
			t.Errorf("spend the registration challenge: %+v, %v; want its enrollment", got, err)
		}
	})

	t.Run("ExpiredChallengesPruned", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		old := newChallenge(now, "prop_1")
		if err := fx.store.CreatePasskeyChallenge(fx.ctx, &store.CreatePasskeyChallengeParams{Challenge: old}); err != nil {
			t.Fatal(err)
		}
		later := old.ExpiresAt.Add(time.Second)
		fresh := newChallenge(later, "prop_2")
		if err := fx.store.CreatePasskeyChallenge(fx.ctx, &store.CreatePasskeyChallengeParams{Challenge: fresh}); err != nil {
			t.Fatal(err)
		}
		// Pruned, so not even a clock set back could spend it.
		if _, err := fx.store.SpendPasskeyChallenge(fx.ctx, spendOf(old, now)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the expired challenge after a new one: %v, want it pruned", err)
		}
		if _, err := fx.store.SpendPasskeyChallenge(fx.ctx, spendOf(fresh, later)); err != nil {
			t.Errorf("the fresh challenge: %v", err)
		}
	})

	t.Run("DecisionRecordsStepUp", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		res, err := fx.store.Decide(fx.ctx, &store.DecideParams{
			Tenant: tenant, ID: p.ID, Actor: approver, ActorKind: "human", Verdict: store.VerdictApproved, Via: "web", StepUp: "passkey",
		})
		if err != nil {
			t.Fatal(err)
		}
		requireDecision(t, res, store.DecideApplied, store.StatusPending, store.StatusApproved)
		got := fx.get(p)
		if len(got.Decisions) != 1 || got.Decisions[0].StepUp != "passkey" {
			t.Errorf("decisions = %+v, want one with step-up passkey", got.Decisions)
		}
		q := fx.createNew()
		if _, err := fx.store.Decide(fx.ctx, &store.DecideParams{Tenant: tenant, ID: q.ID, Actor: approver, Verdict: store.VerdictRejected, Via: "web"}); err != nil {
			t.Fatal(err)
		}
		if got := fx.get(q); len(got.Decisions) != 1 || got.Decisions[0].StepUp != "" {
			t.Errorf("decisions = %+v, want one with no step-up", got.Decisions)
		}
	})

	t.Run("RaceSpend", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		c := newChallenge(now, "prop_1")
		if err := fx.store.CreatePasskeyChallenge(fx.ctx, &store.CreatePasskeyChallengeParams{Challenge: c}); err != nil {
			t.Fatal(err)
		}
		const n = 8
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			won   int
			other []error
		)
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				<-start
				_, err := fx.store.SpendPasskeyChallenge(fx.ctx, spendOf(c, now))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case !errors.Is(err, store.ErrNotFound):
					other = append(other, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if won != 1 || len(other) > 0 {
			t.Errorf("%d spends of one challenge: %d won, other errors %v; want exactly one", n, won, other)
		}
	})

	t.Run("RaceEnroll", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		e := newEnrollment(now, 15*time.Minute)
		if err := fx.store.CreatePasskeyEnrollment(fx.ctx, &store.CreatePasskeyEnrollmentParams{Enrollment: e}); err != nil {
			t.Fatal(err)
		}
		const n = 8
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			won int
		)
		start := make(chan struct{})
		for range n {
			wg.Go(func() {
				<-start
				err := fx.store.CreatePasskey(fx.ctx, &store.CreatePasskeyParams{Passkey: newPasskey(now), EnrollmentHash: e.Hash, Now: now, Via: "web"})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won++
				case !errors.Is(err, store.ErrNotFound):
					t.Errorf("enrol: %v, want success or not found", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if ps := fx.listPasskeys(tenant, approver); won != 1 || len(ps) != 1 {
			t.Errorf("%d enrollments through one link: %d won, %d stored; want one", n, won, len(ps))
		}
	})
}
