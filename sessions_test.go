package countersign_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// sessionEngine returns an engine on a fresh store of open, both on clock.
func sessionEngine(t *testing.T, open storeOpener) (*countersign.Engine, store.Store, interface {
	Now() time.Time
	Advance(time.Duration)
}) {
	t.Helper()
	clock := newClock()
	s := open(t, clock.Now)
	e, err := countersign.New(countersign.Options{Store: s, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e, s, clock
}

var sessionUser = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}

// TestSessionLifecycle starts a session, finds it by its token (from a
// second engine on the same store too), checks that the store holds neither
// the token nor the credential, and ends it for everyone.
func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		e, s, clock := sessionEngine(t, open)
		ctx := t.Context()
		token, started, err := e.StartSession(ctx, &countersign.StartSessionParams{
			Identity: sessionUser, Credential: "sk_live_secret", Revocable: true, TTL: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		if token == "" || started.CSRF == "" || started.CSRF == token {
			t.Fatalf("token %q, CSRF %q: want two distinct secrets", token, started.CSRF)
		}
		if !started.ExpiresAt.Equal(clock.Now().Add(time.Hour)) {
			t.Errorf("expires at %v, want %v", started.ExpiresAt, clock.Now().Add(time.Hour))
		}
		digest := sha256.Sum256([]byte(token))
		rec, err := s.GetSession(ctx, &store.GetSessionParams{ID: hex.EncodeToString(digest[:])})
		if err != nil {
			t.Fatalf("the store holds no session under the token's SHA-256: %v", err)
		}
		if _, err := s.GetSession(ctx, &store.GetSessionParams{ID: token}); !errors.Is(err, cstype.ErrNotFound) {
			t.Errorf("the store holds the token itself: %v", err)
		}
		if rec.CredentialSHA256 != countersign.CredentialSHA256("sk_live_secret") || strings.Contains(rec.CredentialSHA256, "secret") {
			t.Errorf("stored credential %q, want the SHA-256 of the key", rec.CredentialSHA256)
		}

		other, err := countersign.New(countersign.Options{Store: s, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		for name, eng := range map[string]*countersign.Engine{"this engine": e, "another engine": other} {
			got, err := eng.Session(ctx, token)
			if err != nil {
				t.Fatalf("%s: session: %v", name, err)
			}
			if got.Identity.Tenant != "acme" || got.Identity.Actor != "bob" || !slices.Equal(got.Identity.Roles, sessionUser.Roles) ||
				got.CSRF != started.CSRF || got.CredentialSHA256 != rec.CredentialSHA256 || !got.Revocable {
				t.Errorf("%s: session %+v, want %+v", name, got, started)
			}
		}
		if err := other.EndSession(ctx, token); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Session(ctx, token); !errors.Is(err, countersign.ErrNotFound) {
			t.Errorf("a session ended by another engine: %v, want not found", err)
		}
		if err := e.EndSession(ctx, token); err != nil {
			t.Errorf("ending it again: %v", err)
		}
	})
}

// TestSessionExpiry checks that a session ends at its TTL or at the
// credential's NotAfter, whichever is sooner, judged by the engine's clock.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		e, _, clock := sessionEngine(t, open)
		ctx := t.Context()
		start := func(ttl time.Duration, notAfter time.Time) (string, *countersign.Session) {
			t.Helper()
			tok, s, err := e.StartSession(ctx, &countersign.StartSessionParams{Identity: sessionUser, Credential: "jwt", TTL: ttl, NotAfter: notAfter})
			if err != nil {
				t.Fatal(err)
			}
			return tok, s
		}
		byTTL, _ := start(time.Hour, time.Time{})
		exp := clock.Now().Add(10 * time.Minute)
		byExp, s := start(time.Hour, exp)
		if !s.ExpiresAt.Equal(exp) {
			t.Errorf("a session opened with a token expiring at %v expires at %v", exp, s.ExpiresAt)
		}
		later, _ := start(time.Hour, clock.Now().Add(2*time.Hour)) // the TTL is sooner

		clock.Advance(10*time.Minute - time.Microsecond)
		if _, err := e.Session(ctx, byExp); err != nil {
			t.Errorf("just before the token's exp: %v", err)
		}
		clock.Advance(time.Microsecond)
		if _, err := e.Session(ctx, byExp); !errors.Is(err, countersign.ErrNotFound) {
			t.Errorf("at the token's exp: %v, want not found", err)
		}
		if _, err := e.Session(ctx, byTTL); err != nil {
			t.Errorf("before the TTL: %v", err)
		}
		clock.Advance(50 * time.Minute)
		for name, tok := range map[string]string{"TTL": byTTL, "TTL before exp": later} {
			if _, err := e.Session(ctx, tok); !errors.Is(err, countersign.ErrNotFound) {
				t.Errorf("%s: at the TTL: %v, want not found", name, err)
			}
		}

		_, _, err := e.StartSession(ctx, &countersign.StartSessionParams{Identity: sessionUser, Credential: "jwt", TTL: time.Hour, NotAfter: clock.Now()})
		if !errors.Is(err, countersign.ErrInvalidCall) {
			t.Errorf("a session from an expired token: %v, want invalid call", err)
		}
	})
}

// TestSweepSessions: a worker's sweep removes the sessions expired by the
// engine's clock, a batch (SweepBatch) at a time, and keeps the others.
func TestSweepSessions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		e, _, clock := sessionEngine(t, open)
		ctx := t.Context()
		for range 3 {
			if _, _, err := e.StartSession(ctx, &countersign.StartSessionParams{Identity: sessionUser, Credential: "k", TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		long, _, err := e.StartSession(ctx, &countersign.StartSessionParams{Identity: sessionUser, Credential: "k", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		sweep := func(batch int) countersign.SweepCounts {
			t.Helper()
			w, err := e.NewWorker(countersign.WorkerOptions{SweepBatch: batch})
			if err != nil {
				t.Fatal(err)
			}
			c, err := w.SweepOnce(ctx)
			if err != nil {
				t.Fatalf("sweep of %d: %v", batch, err)
			}
			return c
		}
		if c := sweep(2); c.Sessions != 2 {
			t.Fatalf("sweep: %+v; want 2 sessions", c)
		}
		if c := sweep(100); c.Sessions != 1 {
			t.Fatalf("sweep: %+v; want 1 session", c)
		}
		if _, err := e.Session(ctx, long); err != nil {
			t.Errorf("the live session: %v", err)
		}
		if _, err := e.NewWorker(countersign.WorkerOptions{SweepBatch: -1}); err == nil || !strings.Contains(err.Error(), "SweepBatch") {
			t.Errorf("a sweep of a negative batch: %v, want refused", err)
		}
	})
}

// TestStartSessionRemovesExpiredSessions: each sign-in removes a bounded
// batch of the expired sessions, anyone's, with no worker running, and
// keeps the live ones. On every store.
func TestStartSessionRemovesExpiredSessions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		e, s, clock := sessionEngine(t, open)
		e.SetSessionSweep(2)
		ctx := t.Context()
		start := func(who countersign.Identity, ttl time.Duration) string {
			t.Helper()
			token, _, err := e.StartSession(ctx, &countersign.StartSessionParams{Identity: who, Credential: "k", TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			return token
		}
		stored := func(tokens []string) int {
			t.Helper()
			n := 0
			for _, token := range tokens {
				digest := sha256.Sum256([]byte(token))
				_, err := s.GetSession(ctx, &store.GetSessionParams{ID: hex.EncodeToString(digest[:])})
				switch {
				case err == nil:
					n++
				case !errors.Is(err, cstype.ErrNotFound):
					t.Fatal(err)
				}
			}
			return n
		}
		other := countersign.Identity{Tenant: "globex", Actor: "eve"}
		expiring := []string{start(sessionUser, time.Minute), start(sessionUser, time.Minute), start(other, time.Minute)}
		live := []string{start(sessionUser, time.Hour)}
		if n := stored(expiring); n != 3 {
			t.Fatalf("%d of the sessions stored before they expired, want 3", n)
		}
		clock.Advance(time.Minute)
		live = append(live, start(sessionUser, time.Hour))
		if n := stored(expiring); n != 1 {
			t.Fatalf("after a sign-in, %d expired sessions stored; want 1 (a batch of 2 removed)", n)
		}
		live = append(live, start(other, time.Hour))
		if n := stored(expiring); n != 0 {
			t.Fatalf("after a second sign-in, %d expired sessions stored; want none", n)
		}
		if n := stored(live); n != len(live) {
			t.Errorf("%d of %d live sessions stored", n, len(live))
		}
	})
}

// TestSessionRefusals checks the lookups of tokens that open nothing and the
// sessions that may not start.
func TestSessionRefusals(t *testing.T) {
	t.Parallel()
	e, _, _ := sessionEngine(t, openMemory)
	ctx := t.Context()
	for _, tok := range []string{"", "nope", strings.Repeat("a", 100000)} {
		if _, err := e.Session(ctx, tok); !errors.Is(err, countersign.ErrNotFound) {
			t.Errorf("token %.10q: %v, want not found", tok, err)
		}
		if err := e.EndSession(ctx, tok); err != nil {
			t.Errorf("end %.10q: %v", tok, err)
		}
	}
	for name, p := range map[string]*countersign.StartSessionParams{
		"no tenant":     {Identity: countersign.Identity{Actor: "bob"}, Credential: "k", TTL: time.Hour},
		"no actor":      {Identity: countersign.Identity{Tenant: "acme"}, Credential: "k", TTL: time.Hour},
		"no credential": {Identity: sessionUser, TTL: time.Hour},
		"no TTL":        {Identity: sessionUser, Credential: "k"},
	} {
		if _, _, err := e.StartSession(ctx, p); !errors.Is(err, countersign.ErrInvalidCall) {
			t.Errorf("%s: %v, want invalid call", name, err)
		}
	}
}

// The worker removes expired sessions too, with nobody signing in.
func TestSweeperRemovesExpiredSessions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		e, s, clock := sessionEngine(t, open)
		ctx, stop := context.WithCancel(t.Context())
		defer stop()
		token, _, err := e.StartSession(ctx, &countersign.StartSessionParams{Identity: sessionUser, Credential: "k", TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		digest := sha256.Sum256([]byte(token))
		id := hex.EncodeToString(digest[:])
		clock.Advance(time.Hour)
		w, err := e.NewWorker(countersign.WorkerOptions{SweepInterval: time.Millisecond, SweepBatch: 10, NoSealer: true})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		// Until the worker removes it (the test's deadline bounds the wait).
		for {
			_, err := s.GetSession(ctx, &store.GetSessionParams{ID: id})
			if errors.Is(err, cstype.ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// TestSessions: Engine.Sessions answers, by token, exactly the sessions
// Session would: not one ended, expired by the engine's clock, unknown or
// malformed; each token once however often it is named; and as many tokens
// as it is given, across the store's bound on one read.
func TestSessions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		e, _, clock := sessionEngine(t, open)
		ctx := t.Context()
		start := func(ttl time.Duration) string {
			t.Helper()
			token, _, err := e.StartSession(ctx, &countersign.StartSessionParams{Identity: sessionUser, Credential: "k", Revocable: true, TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			return token
		}
		long, short, ended := start(time.Hour), start(time.Minute), start(time.Hour)
		if err := e.EndSession(ctx, ended); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		tokens := []string{long, short, ended, long, "", "unknown", strings.Repeat("x", 200)}
		// More tokens than one store read takes: the live one last.
		for i := range store.MaxGetSessions + 10 {
			tokens = append(tokens, fmt.Sprintf("no-such-token-%d", i))
		}
		later := start(time.Hour)
		tokens = append(tokens, later)
		live, err := e.Sessions(ctx, tokens)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) != 2 || live[long] == nil || live[later] == nil {
			t.Fatalf("live sessions: %d (long %v, later %v), want long and later", len(live), live[long] != nil, live[later] != nil)
		}
		want, err := e.Session(ctx, long)
		if err != nil {
			t.Fatal(err)
		}
		if got := live[long]; got.Identity.Actor != want.Identity.Actor || got.CSRF != want.CSRF || !got.ExpiresAt.Equal(want.ExpiresAt) || !got.Revocable {
			t.Errorf("Sessions answered %+v, Session %+v", got, want)
		}
		if live, err := e.Sessions(ctx, nil); err != nil || len(live) != 0 {
			t.Errorf("no tokens: %v, %v; want none", live, err)
		}
	})
}
