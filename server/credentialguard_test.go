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
	h.srv.recheck = 20 * time.Millisecond

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
