package store

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// Outbox stores the notifications that announce events to configured
// receivers (webhook URLs): a transactional outbox. A notification is
// written in the transaction of the event it announces, one per target
// whose event types name the event's type, so that an event is never
// committed without its notifications nor a notification without its
// event, whichever write path made the event. The durable drivers do it
// with a trigger on the events table that joins the targets; the memory
// driver in the same critical section that appends the event.
//
// Delivery is the workers' (package notifications): they claim due
// notifications under a lease, post them and record each attempt with the
// lease's token. The lease, not the clock, decides who may record: a
// worker whose lease ran out and was claimed again records nothing.
type Outbox interface {
	// SetNotificationTargets replaces the targets and the event types each
	// is sent. Events appended afterwards are announced to them; earlier
	// events are not. Notifications already written, for targets kept or
	// not, are left as they are.
	SetNotificationTargets(ctx context.Context, params *SetNotificationTargetsParams) error

	// ClaimNotifications leases up to Limit due notifications of Targets:
	// pending ones whose next attempt is due and whose lease, if any, has
	// run out (a worker that died mid-delivery). Each claim counts one
	// attempt. Concurrent claims, in any process, never return the same
	// notification while its lease runs; the earliest due come first.
	ClaimNotifications(ctx context.Context, params *ClaimNotificationsParams) ([]*OutboxEntry, error)

	// RecordDelivery records the result of one attempt under the lease of
	// the claim that made it: delivered, retried after RetryAfter, or
	// failed for good. A lease taken over by another claim, or a
	// notification no longer pending, is a *ConflictError (ErrLeaseLost
	// for the former) and nothing is written. The payload, if given, is
	// kept so that later attempts send the same body.
	RecordDelivery(ctx context.Context, params *RecordDeliveryParams) (*OutboxEntry, error)

	// ListNotifications returns a tenant's notifications, newest event
	// first, at most Limit, optionally of one status.
	ListNotifications(ctx context.Context, params *ListNotificationsParams) ([]*OutboxEntry, error)

	// RetryNotification puts a failed notification back to pending, due at
	// once, with its attempts counted from zero. An unknown id (or another
	// tenant's) wraps ErrNotFound; a notification that is not failed is a
	// *ConflictError and nothing is written.
	RetryNotification(ctx context.Context, params *RetryNotificationParams) (*OutboxEntry, error)
}

// NotificationTarget is one receiver and the event types it is sent. Name
// identifies it in the outbox (the notifications package derives it from
// the receiver's URL); it is a short token of letters, digits, '-' and '_'.
type NotificationTarget struct {
	Name   string
	Events []EventType
}

// SetNotificationTargetsParams carries the whole set of targets.
type SetNotificationTargetsParams struct {
	Targets []NotificationTarget
}

var targetName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidateNotificationTargets checks a set of targets: valid, distinct
// names, and event types that are not empty.
func ValidateNotificationTargets(params *SetNotificationTargetsParams) error {
	if params == nil {
		return invalidParams("no parameters")
	}
	seen := map[string]bool{}
	for _, t := range params.Targets {
		if !targetName.MatchString(t.Name) {
			return invalidParams("notification target name %q: want 1..64 letters, digits, '-' or '_'", t.Name)
		}
		if seen[t.Name] {
			return invalidParams("notification target %q named twice", t.Name)
		}
		seen[t.Name] = true
		for _, e := range t.Events {
			if e == "" || len(e) > 64 {
				return invalidParams("notification target %q: event type %q", t.Name, e)
			}
		}
	}
	return nil
}

// NotificationID is the id of the notification of event eventID to target.
func NotificationID(eventID int64, target string) string {
	return fmt.Sprintf("ntf_%d_%s", eventID, target)
}

// ClaimNotificationsParams asks for due notifications.
type ClaimNotificationsParams struct {
	Owner         string
	LeaseDuration time.Duration
	Limit         int
	// Targets are the targets the claimer can deliver to; notifications of
	// other targets are left for a process that knows them.
	Targets []string
}

// ValidateClaimNotifications checks a claim's parameters.
func ValidateClaimNotifications(params *ClaimNotificationsParams) error {
	switch {
	case params == nil:
		return invalidParams("no parameters")
	case params.Owner == "":
		return invalidParams("a claim needs an owner")
	case params.LeaseDuration <= 0:
		return invalidParams("a claim needs a positive lease duration")
	case params.Limit <= 0:
		return invalidParams("a claim needs a positive limit")
	}
	return nil
}

// DeliveryResult is what one attempt came to.
type DeliveryResult string

// The results of an attempt.
const (
	// DeliveryDelivered: the receiver accepted it (a 2xx answer).
	DeliveryDelivered DeliveryResult = "delivered"
	// DeliveryRetry: it failed; try again after RetryAfter.
	DeliveryRetry DeliveryResult = "retry"
	// DeliveryFailed: it failed and its attempts are spent.
	DeliveryFailed DeliveryResult = "failed"
)

// RecordDeliveryParams records one attempt.
type RecordDeliveryParams struct {
	Tenant     string
	ID         string
	LeaseToken string
	Result     DeliveryResult
	// RetryAfter is the delay before the next attempt (DeliveryRetry).
	RetryAfter time.Duration
	// Error says why the attempt failed; empty when delivered.
	Error string
	// Payload is the body sent, kept for later attempts when the
	// notification has none yet.
	Payload []byte
}

// ValidateRecordDelivery checks an attempt's parameters.
func ValidateRecordDelivery(params *RecordDeliveryParams) error {
	switch {
	case params == nil:
		return invalidParams("no parameters")
	case params.Tenant == "" || params.ID == "" || params.LeaseToken == "":
		return invalidParams("recording a delivery needs a tenant, an id and a lease token")
	case params.Result != DeliveryDelivered && params.Result != DeliveryRetry && params.Result != DeliveryFailed:
		return invalidParams("delivery result %q", params.Result)
	case params.RetryAfter < 0:
		return invalidParams("negative retry delay")
	}
	return nil
}

// ApplyDelivery is RecordDelivery's rule, which every driver shares: the
// status, next attempt and error an attempt leaves on e, given the time now.
// The lease is released in every case.
func ApplyDelivery(e *OutboxEntry, params *RecordDeliveryParams, now time.Time) {
	switch params.Result {
	case DeliveryDelivered:
		e.Status = NotificationDelivered
		e.LastError = ""
	case DeliveryRetry:
		e.NextAttemptAt = now.Add(params.RetryAfter)
		e.LastError = params.Error
	case DeliveryFailed:
		e.Status = NotificationFailed
		e.LastError = params.Error
	}
	if e.Payload == nil && params.Payload != nil {
		e.Payload = append([]byte(nil), params.Payload...)
	}
	e.LeaseToken = ""
	e.UpdatedAt = now
}

// deliveryConflict is the error of an attempt recorded without the lease.
func deliveryConflict(id string, got NotificationStatus, leaseLost bool) error {
	return &ConflictError{ID: id, Op: "record delivery of notification", Want: []Status{Status(NotificationPending)},
		Got: Status(got), LeaseLost: leaseLost}
}

// DeliveryConflict returns the *ConflictError of RecordDelivery on a
// notification found in status got: ErrLeaseLost when it is still pending
// (another claim holds it), a plain conflict when it left pending.
func DeliveryConflict(id string, got NotificationStatus) error {
	return deliveryConflict(id, got, got == NotificationPending)
}

// RetryConflict returns the *ConflictError of RetryNotification on a
// notification that is not failed.
func RetryConflict(id string, got NotificationStatus) error {
	return &ConflictError{ID: id, Op: "retry notification", Want: []Status{Status(NotificationFailed)}, Got: Status(got)}
}

// ListNotificationsParams selects a tenant's notifications.
type ListNotificationsParams struct {
	Tenant string
	Status NotificationStatus // empty: any
	Limit  int                // 1..MaxPageSize; 0 means MaxPageSize
}

// ValidateListNotifications checks a listing's parameters and returns the
// limit to apply.
func ValidateListNotifications(params *ListNotificationsParams) (int, error) {
	switch {
	case params == nil:
		return 0, invalidParams("no parameters")
	case params.Tenant == "":
		return 0, invalidParams("a listing needs a tenant")
	case params.Status != "" && !params.Status.Valid():
		return 0, invalidParams("notification status %q", params.Status)
	case params.Limit < 0 || params.Limit > MaxPageSize:
		return 0, invalidParams("limit %d: want 1..%d", params.Limit, MaxPageSize)
	case params.Limit == 0:
		return MaxPageSize, nil
	}
	return params.Limit, nil
}

// RetryNotificationParams names a failed notification to send again.
type RetryNotificationParams struct {
	Tenant string
	ID     string
}
