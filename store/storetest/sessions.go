package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// sessionID returns a fresh SHA-256 in hex, as a session's ID or credential.
func sessionID() string {
	d := sha256.Sum256([]byte(uniqueID("session")))
	return hex.EncodeToString(d[:])
}

// newSession returns a valid session created now, expiring after ttl.
func newSession(now time.Time, ttl time.Duration) *store.Session {
	return &store.Session{
		ID: sessionID(), Tenant: tenant, Actor: approver, Roles: []string{"finance", "ops"},
		CredentialSHA256: sessionID(), Revocable: true, CSRF: uniqueID("csrf"), CreatedAt: now, ExpiresAt: now.Add(ttl),
	}
}

func (fx *fixture) createSession(s *store.Session) {
	fx.t.Helper()
	if err := fx.store.CreateSession(fx.ctx, &store.CreateSessionParams{Session: s}); err != nil {
		fx.t.Fatalf("create session: %v", err)
	}
}

func (fx *fixture) getSession(id string) (*store.Session, error) {
	return fx.store.GetSession(fx.ctx, &store.GetSessionParams{ID: id})
}

func requireSameSession(t *testing.T, got, want *store.Session) {
	t.Helper()
	if got == nil {
		t.Fatalf("session %s: got none", want.ID)
	}
	if got.ID != want.ID || got.Tenant != want.Tenant || got.Actor != want.Actor || !slices.Equal(got.Roles, want.Roles) ||
		got.CredentialSHA256 != want.CredentialSHA256 || got.Revocable != want.Revocable || got.CSRF != want.CSRF ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Errorf("session differs:\n  got  %+v\n  want %+v", got, want)
	}
	if got.CreatedAt.Location() != time.UTC || got.ExpiresAt.Location() != time.UTC {
		t.Errorf("session times %v, %v: want UTC", got.CreatedAt, got.ExpiresAt)
	}
}

func testSessions(t *testing.T, newStore Factory) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		// Microseconds survive every driver.
		now := fx.clock.Now().Add(123456 * time.Microsecond)
		sent := newSession(now, 8*time.Hour+7*time.Microsecond)
		want := sent.Clone()
		fx.createSession(sent)
		// The store keeps its own copy.
		sent.Roles[0], sent.Actor = "admin", "mallory"
		got, err := fx.getSession(want.ID)
		if err != nil {
			t.Fatal(err)
		}
		requireSameSession(t, got, want)
		got.Roles[0] = "admin"
		again, err := fx.getSession(want.ID)
		if err != nil {
			t.Fatal(err)
		}
		requireSameSession(t, again, want)

		noRoles := newSession(now, time.Hour)
		noRoles.Roles, noRoles.Revocable = nil, false
		fx.createSession(noRoles)
		got, err = fx.getSession(noRoles.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Roles) != 0 || got.Revocable {
			t.Errorf("roles %q, revocable %v; want none, false", got.Roles, got.Revocable)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		fx.createSession(newSession(fx.clock.Now(), time.Hour))
		for _, id := range []string{sessionID(), "", "x"} {
			if _, err := fx.getSession(id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("get session %q: %v, want not found", id, err)
			}
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		for name, edit := range map[string]func(s *store.Session){
			"raw id":             func(s *store.Session) { s.ID = "a-cookie-value" },
			"uppercase id":       func(s *store.Session) { s.ID = "AB" + s.ID[2:] },
			"short id":           func(s *store.Session) { s.ID = s.ID[:63] },
			"raw credential":     func(s *store.Session) { s.CredentialSHA256 = "sk_live_key" },
			"no tenant":          func(s *store.Session) { s.Tenant = "" },
			"no actor":           func(s *store.Session) { s.Actor = "" },
			"no csrf":            func(s *store.Session) { s.CSRF = "" },
			"no creation":        func(s *store.Session) { s.CreatedAt = time.Time{} },
			"expires at created": func(s *store.Session) { s.ExpiresAt = s.CreatedAt },
		} {
			s := newSession(now, time.Hour)
			edit(s)
			err := fx.store.CreateSession(fx.ctx, &store.CreateSessionParams{Session: s})
			if !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("%s: create: %v, want invalid params", name, err)
			}
			if _, err := fx.getSession(s.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: the refused session was stored (%v)", name, err)
			}
		}
		if err := fx.store.CreateSession(fx.ctx, &store.CreateSessionParams{}); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("create without a session: %v, want invalid params", err)
		}
		for _, limit := range []int{0, -1} {
			_, err := fx.store.DeleteExpiredSessions(fx.ctx, &store.DeleteExpiredSessionsParams{Before: now, Limit: limit})
			if !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("sweep with limit %d: %v, want invalid params", limit, err)
			}
		}
	})

	t.Run("GetSessions", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		a, b, c := newSession(now, time.Hour), newSession(now, time.Hour), newSession(now, time.Minute)
		b.Roles, b.Revocable = nil, false
		for _, s := range []*store.Session{a, b, c} {
			fx.createSession(s.Clone())
		}
		get := func(ids ...string) map[string]*store.Session {
			t.Helper()
			got, err := fx.store.GetSessions(fx.ctx, &store.GetSessionsParams{IDs: ids})
			if err != nil {
				t.Fatalf("get sessions %v: %v", ids, err)
			}
			byID := map[string]*store.Session{}
			for _, s := range got {
				if byID[s.ID] != nil {
					t.Fatalf("get sessions %v: %s twice", ids, s.ID)
				}
				byID[s.ID] = s
			}
			return byID
		}
		// Unknown and malformed IDs are left out; a repeat is answered once.
		got := get(a.ID, sessionID(), b.ID, "x", "", a.ID, `"]`)
		if len(got) != 2 {
			t.Fatalf("got %d sessions, want a and b", len(got))
		}
		requireSameSession(t, got[a.ID], a)
		requireSameSession(t, got[b.ID], b)
		if len(get()) != 0 || len(get(sessionID())) != 0 {
			t.Error("no ids, or only unknown ones: want no session")
		}
		// What GetSessions answers is the caller's to change.
		got[a.ID].Roles[0] = "admin"
		requireSameSession(t, get(a.ID)[a.ID], a)

		// An ended session is gone from the answer; expiry is the caller's
		// to judge.
		if err := fx.store.DeleteSession(fx.ctx, &store.DeleteSessionParams{ID: a.ID}); err != nil {
			t.Fatal(err)
		}
		fx.clock.Advance(2 * time.Minute)
		got = get(a.ID, b.ID, c.ID)
		if len(got) != 2 || got[a.ID] != nil || got[b.ID] == nil || got[c.ID] == nil {
			t.Fatalf("after a ended and c expired: %d sessions (a %v, b %v, c %v), want b and c", len(got), got[a.ID] != nil, got[b.ID] != nil, got[c.ID] != nil)
		}

		// The bound: as many IDs as allowed is an answer, one more is
		// refused.
		many := make([]string, store.MaxGetSessions)
		for i := range many {
			many[i] = sessionID()
		}
		many[len(many)-1] = b.ID
		if got := get(many...); len(got) != 1 || got[b.ID] == nil {
			t.Fatalf("%d ids, the last b's: %d sessions, want b", len(many), len(got))
		}
		if _, err := fx.store.GetSessions(fx.ctx, &store.GetSessionsParams{IDs: append(many, c.ID)}); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("%d ids: %v, want invalid params", len(many)+1, err)
		}
		if _, err := fx.store.GetSessions(fx.ctx, nil); !errors.Is(err, store.ErrInvalidParams) {
			t.Errorf("no params: %v, want invalid params", err)
		}
	})

	t.Run("DuplicateID", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		first := newSession(fx.clock.Now(), time.Hour)
		fx.createSession(first)
		second := newSession(fx.clock.Now(), 2*time.Hour)
		second.ID, second.Actor = first.ID, "mallory"
		if err := fx.store.CreateSession(fx.ctx, &store.CreateSessionParams{Session: second}); !errors.Is(err, store.ErrInvalidParams) {
			t.Fatalf("create with a taken id: %v, want invalid params", err)
		}
		got, err := fx.getSession(first.ID)
		if err != nil {
			t.Fatal(err)
		}
		requireSameSession(t, got, first)
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		gone, kept := newSession(fx.clock.Now(), time.Hour), newSession(fx.clock.Now(), time.Hour)
		fx.createSession(gone)
		fx.createSession(kept)
		for range 2 { // signing out twice is signing out
			if err := fx.store.DeleteSession(fx.ctx, &store.DeleteSessionParams{ID: gone.ID}); err != nil {
				t.Fatalf("delete session: %v", err)
			}
		}
		if _, err := fx.getSession(gone.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted session: %v, want not found", err)
		}
		if _, err := fx.getSession(kept.ID); err != nil {
			t.Errorf("the other session: %v", err)
		}
	})

	t.Run("ExpiryIsTheCallers", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		s := newSession(fx.clock.Now().Add(-2*time.Hour), time.Hour)
		fx.createSession(s)
		got, err := fx.getSession(s.ID)
		if err != nil {
			t.Fatalf("get an expired session: %v, want it returned", err)
		}
		requireSameSession(t, got, s)
	})

	t.Run("DeleteExpired", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		var expired []*store.Session
		for i := range 5 { // expired 5, 4, …, 1 minutes ago
			s := newSession(now.Add(-time.Hour), time.Hour-time.Duration(5-i)*time.Minute)
			fx.createSession(s)
			expired = append(expired, s)
		}
		atNow := newSession(now.Add(-time.Hour), time.Hour) // expires at Before: expired
		fx.createSession(atNow)
		live := newSession(now.Add(-time.Hour), time.Hour+time.Microsecond)
		fx.createSession(live)

		n, err := fx.store.DeleteExpiredSessions(fx.ctx, &store.DeleteExpiredSessionsParams{Before: now, Limit: 2})
		if err != nil || n != 2 {
			t.Fatalf("first sweep: %d, %v; want 2 removed", n, err)
		}
		// The longest expired go first.
		for i, s := range expired {
			_, err := fx.getSession(s.ID)
			if gone := errors.Is(err, store.ErrNotFound); gone != (i < 2) {
				t.Errorf("session expired %d minutes ago: removed %v after the first sweep (err %v)", 5-i, gone, err)
			}
		}
		n, err = fx.store.DeleteExpiredSessions(fx.ctx, &store.DeleteExpiredSessionsParams{Before: now, Limit: 100})
		if err != nil || n != 4 {
			t.Fatalf("second sweep: %d, %v; want the 4 left expired removed", n, err)
		}
		if _, err := fx.getSession(atNow.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the session expiring at the sweep's time: %v, want removed", err)
		}
		if _, err := fx.getSession(live.ID); err != nil {
			t.Errorf("the live session: %v, want it kept", err)
		}
		if n, err := fx.store.DeleteExpiredSessions(fx.ctx, &store.DeleteExpiredSessionsParams{Before: now, Limit: 100}); err != nil || n != 0 {
			t.Errorf("third sweep: %d, %v; want nothing removed", n, err)
		}
	})

	t.Run("ConcurrentSweeps", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		now := fx.clock.Now()
		const expired, live, sweepers = 60, 20, 4
		var wg sync.WaitGroup
		errs := make(chan error, expired+live+sweepers*expired)
		for i := range expired + live {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ttl := 2 * time.Hour
				if i < expired {
					ttl = time.Duration(i+1) * time.Second
				}
				s := newSession(now.Add(-time.Hour), ttl)
				if err := fx.store.CreateSession(fx.ctx, &store.CreateSessionParams{Session: s}); err != nil {
					errs <- fmt.Errorf("create: %w", err)
				}
			}()
		}
		wg.Wait()
		// Sweepers race each other; together they remove each expired
		// session exactly once.
		var mu sync.Mutex
		removed := 0
		for range sweepers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					n, err := fx.store.DeleteExpiredSessions(fx.ctx, &store.DeleteExpiredSessionsParams{Before: now, Limit: 7})
					if err != nil {
						errs <- fmt.Errorf("sweep: %w", err)
						return
					}
					mu.Lock()
					removed += n
					done := removed >= expired
					mu.Unlock()
					if n == 0 || done {
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if removed != expired {
			t.Errorf("the sweeps removed %d sessions, want %d", removed, expired)
		}
		if n, err := fx.store.DeleteExpiredSessions(fx.ctx, &store.DeleteExpiredSessionsParams{Before: now.Add(time.Hour), Limit: 1000}); err != nil || n != live {
			t.Errorf("sweeping the rest: %d, %v; want the %d live ones", n, err, live)
		}
	})
}
