package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// testMCPNonces: a request state's nonce is spent once per tenant while it
// is kept, by exactly one of concurrent spenders, and forgotten after.
func testMCPNonces(t *testing.T, newStore Factory) {
	spend := func(fx *fixture, tenant, nonce string, until time.Time) bool {
		fx.t.Helper()
		ok, err := fx.store.SpendMCPNonce(fx.ctx, &store.SpendMCPNonceParams{Tenant: tenant, Nonce: nonce, Until: until})
		if err != nil {
			fx.t.Fatalf("spend %s/%s: %v", tenant, nonce, err)
		}
		return ok
	}
	t.Run("Once", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		until := fx.clock.Now().Add(time.Minute)
		nonce := uniqueID("nonce")
		if !spend(fx, tenant, nonce, until) {
			t.Fatal("a fresh nonce: not spent")
		}
		if spend(fx, tenant, nonce, until) {
			t.Fatal("a spent nonce: spent again")
		}
		if spend(fx, tenant, nonce, until.Add(time.Hour)) {
			t.Fatal("a spent nonce with a later until: spent again")
		}
		if !spend(fx, otherTenant, nonce, until) {
			t.Fatal("the same nonce of another tenant: not spent")
		}
		if !spend(fx, tenant, uniqueID("nonce"), until) {
			t.Fatal("another nonce: not spent")
		}
	})
	t.Run("ForgottenAfterUntil", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		nonce := uniqueID("nonce")
		until := fx.clock.Now().Add(time.Second)
		if !spend(fx, tenant, nonce, until) {
			t.Fatal("a fresh nonce: not spent")
		}
		fx.clock.Advance(time.Second - time.Millisecond)
		if spend(fx, tenant, nonce, until) {
			t.Fatal("a nonce before its until: spent again")
		}
		fx.clock.Advance(2 * time.Millisecond)
		if !spend(fx, tenant, nonce, fx.clock.Now().Add(time.Minute)) {
			t.Fatal("a nonce past its until: not spent again")
		}
		if spend(fx, tenant, nonce, fx.clock.Now().Add(time.Minute)) {
			t.Fatal("a nonce spent again: spent a third time")
		}
		// Many passed nonces are forgotten a few at a time, without
		// touching the live ones.
		for range 3 * store.ForgetMCPNonces {
			spend(fx, tenant, uniqueID("nonce"), fx.clock.Now().Add(time.Millisecond))
		}
		fx.clock.Advance(time.Second)
		for range 3 * store.ForgetMCPNonces {
			spend(fx, tenant, uniqueID("nonce"), fx.clock.Now().Add(time.Minute))
		}
		if spend(fx, tenant, nonce, fx.clock.Now().Add(time.Minute)) {
			t.Fatal("a live nonce was forgotten")
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		nonce := uniqueID("nonce")
		until := fx.clock.Now().Add(time.Minute)
		const n = 8
		var wg sync.WaitGroup
		results := make(chan bool, n)
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				ok, err := fx.store.SpendMCPNonce(fx.ctx, &store.SpendMCPNonceParams{Tenant: tenant, Nonce: nonce, Until: until})
				results <- ok
				errs <- err
			})
		}
		wg.Wait()
		close(results)
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		spent := 0
		for ok := range results {
			if ok {
				spent++
			}
		}
		if spent != 1 {
			t.Fatalf("%d of %d concurrent spenders spent the nonce, want 1", spent, n)
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		until := fx.clock.Now().Add(time.Minute)
		for name, p := range map[string]*store.SpendMCPNonceParams{
			"no tenant": {Nonce: "n", Until: until},
			"no nonce":  {Tenant: tenant, Until: until},
			"too long":  {Tenant: tenant, Nonce: strings.Repeat("n", store.MaxMCPNonce+1), Until: until},
			"no until":  {Tenant: tenant, Nonce: "n"},
		} {
			if _, err := fx.store.SpendMCPNonce(fx.ctx, p); !errors.Is(err, store.ErrInvalidParams) {
				t.Errorf("%s: %v, want ErrInvalidParams", name, err)
			}
		}
	})
}
