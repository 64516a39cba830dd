package maintenance_test

import (
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

// TestSessionCleanup: a triggered run removes the sessions expired by the
// clock it is given, one batch a run, and keeps the live ones. On every
// store.
func TestSessionCleanup(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open opener) {
		clock := newClock()
		st := open(t, clock.Now)
		e := newEngine(t, st, clock)
		startSession := func(ttl time.Duration) string {
			t.Helper()
			token, _, err := e.StartSession(t.Context(), &countersign.StartSessionParams{Identity: bob, Credential: "ck_bob", TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			return token
		}
		var expired []string
		for range 3 {
			expired = append(expired, startSession(time.Minute))
		}
		live := startSession(time.Hour)
		s := maintenance.NewSessionCleanup(st, clock.Now, maintenance.SweepConfig{Interval: time.Hour, Batch: 2, Logger: discard()})
		start(t, s) // its first run finds nothing expired
		clock.Advance(2 * time.Minute)
		// stored reports whether the session a token opens is still in the
		// store (an expired one stays there until it is removed).
		stored := func(token string) bool {
			t.Helper()
			_, err := st.GetSession(t.Context(), &store.GetSessionParams{ID: countersign.CredentialSHA256(token)})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
			return err == nil
		}
		left := func() int {
			n := 0
			for _, tok := range expired {
				if stored(tok) {
					n++
				}
			}
			return n
		}
		if left() != 3 {
			t.Fatal("the expired sessions are not stored before the cleanup")
		}
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		if n := left(); n != 1 {
			t.Errorf("after one run of batch 2, %d of 3 expired sessions are stored, want 1", n)
		}
		if err := trigger(t, s); err != nil {
			t.Fatal(err)
		}
		if n := left(); n != 0 {
			t.Errorf("after two runs, %d expired sessions are stored, want none", n)
		}
		if !stored(live) {
			t.Error("the live session was removed")
		}
	})
}
