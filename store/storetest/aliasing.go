package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// A driver keeps no reference to its callers' memory and hands out none of
// its own: whatever a caller does to a value it passed in or got back, the
// store's records stay as written. The durable drivers get this for free by
// serialising; the memory driver must copy.
func testAliasing(t *testing.T, newStore Factory) {
	t.Run("SettleParams", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		next := fx.clock.Now().Add(time.Minute)
		sp := settleParams(p, store.StatusReconciling)
		sp.Executed = ptr(true)
		sp.Error = ptr("502")
		sp.Result = json.RawMessage(`{"partial":true}`)
		sp.NextAttemptAt = &next
		fx.settle(sp)
		want := fx.get(p)

		*sp.Executed = false
		*sp.Error = "changed"
		sp.Result[2] = 'X'
		*sp.NextAttemptAt = next.Add(time.Hour)
		requireSameProposal(t, fx.get(p), want)
	})

	t.Run("Messages", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.claimed()
		sp := settleParams(p, store.StatusSucceeded)
		sp.Executed = ptr(true)
		sp.Receipt = "rf_1"
		sp.Result = json.RawMessage(`{"ok":true}`)
		fx.settle(sp)
		want := fx.get(p)
		msgs := fx.messages(thread)
		if len(msgs) != 1 || msgs[0].Outcome == nil {
			t.Fatalf("thread messages = %+v, want one outcome message", msgs)
		}
		msgs[0].Text = "changed"
		msgs[0].Outcome.Receipt = "forged"
		msgs[0].Outcome.Summary = "forged"
		*msgs[0].Outcome.Executed = false
		if len(msgs[0].Outcome.Result) > 2 {
			msgs[0].Outcome.Result[2] = 'X'
		}
		requireSameProposal(t, fx.get(p), want)
		again := fx.messages(thread)
		if m := again[0]; m.Text == "changed" || m.Outcome == nil || m.Outcome.Receipt != "rf_1" || m.Outcome.Summary == "forged" ||
			m.Outcome.Executed == nil || !*m.Outcome.Executed || !jsonEqual(m.Outcome.Result, sp.Result) {
			t.Errorf("a caller's edit reached the stored message: %+v (outcome %+v)", m, m.Outcome)
		}
	})

	t.Run("Grants", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, newStore)
		p := fx.createNew()
		expiresAt := fx.clock.Now().Add(time.Hour)
		g := grantFor(fx, p, store.ScopeThread)
		g.ExpiresAt = &expiresAt
		approveWithGrant(t, fx, p, g)
		fx.succeed(fx.claim(p, longLease))

		// The caller's grant, then the returned ones.
		expiresAt = expiresAt.Add(-2 * time.Hour)
		g.Requester = "mallory"
		found, err := fx.store.FindGrant(fx.ctx, findParams(p))
		if err != nil {
			t.Fatalf("FindGrant after the caller edited its grant: %v", err)
		}
		*found.ActivatedAt = time.Time{}
		*found.ExpiresAt = time.Time{}
		listed := fx.listGrants()
		*listed[0].ExpiresAt = time.Time{}
		listed[0].Requester = "mallory"

		again, err := fx.store.FindGrant(fx.ctx, findParams(p))
		if err != nil {
			t.Fatalf("FindGrant after the caller edited returned grants: %v", err)
		}
		if again.ActivatedAt == nil || again.ActivatedAt.IsZero() || again.ExpiresAt == nil ||
			!again.ExpiresAt.Equal(fx.clock.Now().Add(time.Hour)) || again.Requester != p.Requester {
			t.Errorf("a caller's edit reached the stored grant: %+v", again)
		}
	})
}
