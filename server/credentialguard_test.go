package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/server/auth"
)

// changingAuth is fakeAuth whose tokens can be withdrawn, and whose
// "short_alice" token expires life after it is first presented, as a JWT's
// exp (counted from its first use, so that a slow start cannot expire it
// before its stream opens).
type changingAuth struct {
	mu      sync.Mutex
	revoked map[string]bool
	life    time.Duration
	expires time.Time // set at the first use of short_alice
}

func (a *changingAuth) Authenticate(ctx context.Context, token string) (countersign.Identity, error) {
	c, err := a.AuthenticateCredential(ctx, token)
	return c.Identity, err
}

func (a *changingAuth) AuthenticateCredential(ctx context.Context, token string) (auth.Credential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.revoked[token] {
		return auth.Credential{}, fmt.Errorf("%w: revoked", auth.ErrUnauthenticated)
	}
	if token == "short_alice" {
		if a.expires.IsZero() {
			a.expires = time.Now().Add(a.life)
		}
		if !time.Now().Before(a.expires) {
			return auth.Credential{}, fmt.Errorf("%w: expired", auth.ErrUnauthenticated)
		}
		return auth.Credential{Identity: identities["alice"], ExpiresAt: a.expires}, nil
	}
	id, err := fakeAuth(identities).Authenticate(ctx, token)
	return auth.Credential{Identity: id, Revocable: true}, err
}

func (a *changingAuth) revoke(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.revoked[token] = true
}

// closedWithin reports whether the stream ch ends within d, draining it.
func closedWithin(ch <-chan sseEvent, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// TestStreamEndsWithItsCredential: GET /v1/events ends when the credential
// that opened it expires or is revoked (docs/api.md Part 3), and while it stands
// the stream goes on.
func TestStreamEndsWithItsCredential(t *testing.T) {
	t.Parallel()
	a := &changingAuth{revoked: map[string]bool{}, life: time.Second}
	h := newHarness(t, "sqlite", harnessOptions{server: func(o *Options) { o.Auth = a }})
	h.srv.creds.SetPeriod(20 * time.Millisecond)

	short := h.stream(t, "short_alice", "")
	revocable := h.stream(t, "alice", "")
	kept := h.stream(t, "bob", "")

	a.revoke("alice")
	if !closedWithin(revocable, 10*time.Second) {
		t.Fatal("the stream of a revoked key did not end")
	}
	if !closedWithin(short, 10*time.Second) {
		t.Fatal("the stream of an expired token did not end")
	}
	a.mu.Lock()
	expires := a.expires
	a.mu.Unlock()
	if !time.Now().After(expires) {
		t.Fatal("the expiring token's stream ended before it expired")
	}
	// bob's credential stands: his stream carries what happens next.
	body := refund("cg1", "c_cg1", 40)
	body["thread_id"] = "t_dave"
	id, _ := h.call("dave", body)["proposal_id"].(string)
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-kept:
			if !ok {
				t.Fatal("the stream of a standing credential ended")
			}
			if ev.name == "proposal.created" && strings.Contains(ev.data, id) {
				return
			}
		case <-deadline:
			t.Fatal("bob's stream never carried the new proposal")
		}
	}
}

// recheckAuth counts the questions asked about each token. A token in
// fixed is a JWT's kind: it expires in an hour and cannot be withdrawn
// before; any other is revocable, and stands for whoever as says now.
type recheckAuth struct {
	mu    sync.Mutex
	asks  map[string]int
	as    map[string]countersign.Identity
	fixed map[string]bool
}

func (a *recheckAuth) Authenticate(ctx context.Context, token string) (countersign.Identity, error) {
	c, err := a.AuthenticateCredential(ctx, token)
	return c.Identity, err
}

func (a *recheckAuth) AuthenticateCredential(_ context.Context, token string) (auth.Credential, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asks[token]++
	id, ok := a.as[token]
	if !ok {
		return auth.Credential{}, fmt.Errorf("%w: unknown token", auth.ErrUnauthenticated)
	}
	if a.fixed[token] {
		return auth.Credential{Identity: id, ExpiresAt: time.Now().Add(time.Hour)}, nil
	}
	return auth.Credential{Identity: id, Revocable: true}, nil
}

func (a *recheckAuth) count(token string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.asks[token]
}

// TestCredentialRecheckShared: the server asks about each revocable token
// once a round, however many streams it opened; never again about a
// credential that cannot be withdrawn before it expires; ends every stream
// of a token that now stands for someone else, and no other; and runs no
// goroutine for it once no guarded stream is open.
func TestCredentialRecheckShared(t *testing.T) {
	t.Parallel()
	a := &recheckAuth{
		asks:  map[string]int{},
		as:    map[string]countersign.Identity{"alice": identities["alice"], "bob": identities["bob"], "jwt_carol": identities["carol"]},
		fixed: map[string]bool{"jwt_carol": true},
	}
	h := newHarness(t, "sqlite", harnessOptions{server: func(o *Options) { o.Auth, o.MaxStreamsPerActor = a, 20 }})
	h.srv.creds.SetPeriod(20 * time.Millisecond)

	t.Run("open", func(t *testing.T) {
		var alice []<-chan sseEvent
		for range 10 {
			alice = append(alice, h.stream(t, "alice", ""))
		}
		bob := h.stream(t, "bob", "")
		carol := h.stream(t, "jwt_carol", "")
		carolOpened := a.count("jwt_carol")

		// bob's one stream is asked about once a round: wait for a few
		// rounds, then alice's ten must have been asked about as often.
		bob0, alice0 := a.count("bob"), a.count("alice")
		deadline := time.Now().Add(10 * time.Second)
		for a.count("bob")-bob0 < 5 {
			if time.Now().After(deadline) {
				t.Fatalf("bob's credential asked about %d times in 10 s, want a round every 20 ms", a.count("bob")-bob0)
			}
			time.Sleep(5 * time.Millisecond)
		}
		rounds, asked := a.count("bob")-bob0, a.count("alice")-alice0
		if asked < rounds-1 || asked > rounds+1 {
			t.Fatalf("alice's token, 10 streams, asked about %d times in %d rounds: want once a round", asked, rounds)
		}
		if n := a.count("jwt_carol"); n != carolOpened {
			t.Fatalf("a credential that cannot be withdrawn was asked about %d times after its stream opened", n-carolOpened)
		}

		// alice's token now stands for dave: her streams end, the others
		// go on.
		a.mu.Lock()
		a.as["alice"] = identities["dave"]
		a.mu.Unlock()
		for i, ch := range alice {
			if !closedWithin(ch, 10*time.Second) {
				t.Fatalf("alice's stream %d did not end when her token came to stand for dave", i)
			}
		}
		for name, ch := range map[string]<-chan sseEvent{"bob": bob, "jwt_carol": carol} {
			select {
			case _, ok := <-ch:
				if !ok {
					t.Fatalf("%s's stream ended with alice's", name)
				}
			default:
			}
		}
	})
	// The subtest's streams are closed: the watch's goroutine ends.
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, open := h.srv.creds.Running()
		if !running && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after every stream closed: the guard is running %v, holds %d tokens", running, open)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
