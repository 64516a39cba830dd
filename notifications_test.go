package countersign_test

import (
	"context"
	"errors"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Only the tenant's operators list and retry notifications, on every store:
// a notification can carry any proposal of the tenant, whoever may see it.
func TestNotificationsAreForOperators(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		h := newHarness(t, harnessOpts{open: open})
		ctx := context.Background()
		if err := h.store.SetNotificationTargets(ctx, &store.SetNotificationTargetsParams{Targets: []store.NotificationTarget{
			{Name: "hook", Events: []cstype.EventType{cstype.EventCreated}},
		}}); err != nil {
			t.Fatal(err)
		}
		pending := h.call(refundCall("call_1", countersign.ModeIndependent, `{"amount":40,"customer":"c_9"}`))
		ns, err := h.engine.Notifications(ctx, tBob, "", 0)
		if err != nil || len(ns) != 1 || ns[0].ProposalID != pending.ProposalID || ns[0].EventType != cstype.EventCreated {
			t.Fatalf("the operator's listing: %+v, %v", ns, err)
		}
		for _, id := range []countersign.Identity{tAlice, tCarol, tDave} {
			var fe *countersign.ForbiddenError
			if _, err := h.engine.Notifications(ctx, id, "", 0); !errors.As(err, &fe) {
				t.Errorf("%s lists notifications: %v", id.Actor, err)
			}
			if _, err := h.engine.RetryNotification(ctx, id, ns[0].ID); !errors.As(err, &fe) {
				t.Errorf("%s retries a notification: %v", id.Actor, err)
			}
		}
		otherOperator := countersign.Identity{Tenant: "other", Actor: "olga", Roles: []string{countersign.RoleOperator}}
		if got, err := h.engine.Notifications(ctx, otherOperator, "", 0); err != nil || len(got) != 0 {
			t.Errorf("another tenant's operator lists %+v, %v", got, err)
		}
		if _, err := h.engine.RetryNotification(ctx, otherOperator, ns[0].ID); !errors.Is(err, countersign.ErrNotFound) {
			t.Errorf("another tenant's operator retries: %v, want not found", err)
		}
		// A pending notification is not retried: only a failed one.
		if _, err := h.engine.RetryNotification(ctx, tBob, ns[0].ID); !errors.Is(err, cstype.ErrConflict) {
			t.Errorf("retry a pending notification: %v, want a conflict", err)
		}
		if _, err := h.engine.Notifications(ctx, tBob, "lost", 0); !errors.Is(err, cstype.ErrInvalidParams) {
			t.Errorf("an unknown status: %v", err)
		}
	})
}
