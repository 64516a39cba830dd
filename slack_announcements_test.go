package countersign_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// slackHarness is a harness whose refunds are announced on Slack to finance.
func slackHarness(t *testing.T, open storeOpener) *harness {
	return newHarness(t, harnessOpts{open: open, rules: []countersign.Rule{{
		Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Notify: []string{"slack"},
	}}})
}

// postedSlackAnnouncement is a pending refund's posted Slack message to bob.
func postedSlackAnnouncement(t *testing.T, h *harness) *cstype.SlackAnnouncement {
	t.Helper()
	ctx := context.Background()
	res := h.call(refundCall("slack_1", countersign.ModeIndependent, `{"amount": 5, "customer": "c_1"}`))
	bob := tBob
	bob.Kind = countersign.KindHuman
	claim, err := h.engine.ClaimSlackPost(ctx, res.Proposal, bob, "U0BOB", time.Hour)
	if err != nil || !claim.Claimed {
		t.Fatalf("claim bob's post: %+v, %v", claim, err)
	}
	a, err := h.engine.RecordSlackPost(ctx, claim.Announcement, "D0BOB", "1700000000.000001")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A refresh that loses its rotation to one for an earlier version rotates
// again: it never returns a nonce issued for an earlier version than its
// own. (It did, and two deliveries of different versions then shared a
// nonce version, so that the older one's update, landing last, did not
// know it had raced: a Slack message kept showing "approved" after the
// call succeeded.)
func TestRefreshSlackNonceNeverSettlesForAnEarlierVersion(t *testing.T) {
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := slackHarness(t, open)
		ctx := context.Background()
		stale := postedSlackAnnouncement(t, h)
		base := stale.NonceVersion
		older, err := h.engine.RefreshSlackNonce(ctx, stale, base+2)
		if err != nil || older.NonceVersion != base+2 || older.Nonce == stale.Nonce {
			t.Fatalf("refresh for version %d: %+v, %v; want a new nonce of that version", base+2, older, err)
		}
		// The delivery of a later version still holds the announcement as
		// it was before the rotation above.
		got, err := h.engine.RefreshSlackNonce(ctx, stale, base+3)
		if err != nil || got.NonceVersion != base+3 || got.Nonce == older.Nonce || got.Nonce == stale.Nonce {
			t.Fatalf("refresh for version %d after one for %d won: %+v, %v; want a nonce of its own version", base+3, base+2, got, err)
		}
		// A refresh for an earlier version than the announcement's leaves it.
		if again, err := h.engine.RefreshSlackNonce(ctx, stale, base+1); err != nil || again.Nonce != got.Nonce || again.NonceVersion != base+3 {
			t.Fatalf("refresh for an earlier version: %+v, %v; want the announcement as it stands (%s, version %d)", again, err, got.Nonce, base+3)
		}
		now, err := h.engine.SlackAnnouncement(ctx, "acme", stale.ProposalID, "bob")
		if err != nil || now.Nonce != got.Nonce || now.NonceVersion != base+3 {
			t.Fatalf("stored: %+v, %v; want %s of version %d", now, err, got.Nonce, base+3)
		}
	})
}

// Many deliveries of different versions refresh one announcement at once,
// each from the announcement as it was: each gets a nonce of its version
// or a later one, and the announcement ends at the latest.
func TestRefreshSlackNonceConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := slackHarness(t, open)
		stale := postedSlackAnnouncement(t, h)
		const n = 16
		var wg sync.WaitGroup
		for i := range int64(n) {
			version := stale.NonceVersion + 1 + i
			wg.Go(func() {
				got, err := h.engine.RefreshSlackNonce(context.Background(), stale, version)
				if err != nil || got.NonceVersion < version {
					t.Errorf("refresh for version %d: %+v, %v; want a nonce of that version or a later one", version, got, err)
				}
			})
		}
		wg.Wait()
		now, err := h.engine.SlackAnnouncement(context.Background(), "acme", stale.ProposalID, "bob")
		if err != nil || now.NonceVersion != stale.NonceVersion+n {
			t.Fatalf("stored: %+v, %v; want version %d", now, err, stale.NonceVersion+n)
		}
	})
}
