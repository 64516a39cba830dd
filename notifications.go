package countersign

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/internal/outboxhost"
	"github.com/countersign/countersign/store"
)

// Notifications and RetryNotification are the operators' view of the
// notification outbox (see package notifications for delivery). A
// notification can carry any proposal of the tenant, whoever may see it, so
// only the tenant's operators list or retry them; every surface asks here
// rather than checking the role itself.

// Notifications lists the notifications of id's tenant, newest event first,
// at most limit (0: cstype.MaxPageSize), optionally of one status. Anyone but
// an operator gets a *ForbiddenError; an unknown status wraps
// cstype.ErrInvalidParams.
func (e *Engine) Notifications(ctx context.Context, id Identity, status cstype.NotificationStatus, limit int) ([]*cstype.OutboxEntry, error) {
	if err := requireOperator(id, "", "only an operator may list notifications"); err != nil {
		return nil, err
	}
	out, err := e.store.ListNotifications(ctx, &store.ListNotificationsParams{Tenant: id.Tenant, Status: status, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	return out, nil
}

// RetryNotification puts a failed notification of id's tenant back in the
// outbox, due at once with its attempts counted afresh. Anyone but an
// operator gets a *ForbiddenError; an unknown id, or another tenant's, wraps
// ErrNotFound; a notification that is not failed is a *ConflictError.
func (e *Engine) RetryNotification(ctx context.Context, id Identity, notificationID string) (*cstype.OutboxEntry, error) {
	if err := requireOperator(id, "", "only an operator may retry notifications"); err != nil {
		return nil, err
	}
	if !validID(notificationID) {
		return nil, fmt.Errorf("retry notification %q: %w", notificationID, ErrNotFound)
	}
	n, err := e.store.RetryNotification(ctx, &store.RetryNotificationParams{Tenant: id.Tenant, ID: notificationID})
	if err != nil {
		return nil, fmt.Errorf("retry notification: %w", err)
	}
	return n, nil
}

// Outbox is the engine's store as the notification deliverer (package
// notifications) needs it: the outbox of every tenant, and the proposal a
// notification announces. It checks nobody: it is the deliverer's, which
// acts for the engine. Its argument is the proof that the caller may import
// internal/outboxhost (package notifications, the composition root;
// test/imports checks who does): outboxhost.Grant(). Any other key panics, as a
// misuse of the engine rather than an input.
func (e *Engine) Outbox(k *outboxhost.Key) maintenance.NotificationStore {
	if !outboxhost.Valid(k) {
		panic("countersign: Engine.Outbox wants outboxhost.Grant()")
	}
	return e.store
}
