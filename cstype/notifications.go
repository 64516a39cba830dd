package cstype

import "time"

// NotificationStatus is where a notification stands.
type NotificationStatus string

// The statuses of a notification: pending until a receiver accepts it
// (delivered) or its attempts are spent (failed). Retry takes a failed one
// back to pending.
const (
	NotificationPending   NotificationStatus = "pending"
	NotificationDelivered NotificationStatus = "delivered"
	NotificationFailed    NotificationStatus = "failed"
)

// Valid reports whether s is one of the statuses.
func (s NotificationStatus) Valid() bool {
	switch s {
	case NotificationPending, NotificationDelivered, NotificationFailed:
		return true
	}
	return false
}

// OutboxEntry is one notification: one event announced to one target.
type OutboxEntry struct {
	// ID is "ntf_<event id>_<target>": one per event and target, and the
	// Idempotency-Key its receiver sees on every attempt.
	ID         string
	Tenant     string
	Target     string
	EventID    int64
	EventType  EventType
	ProposalID string
	// At is the event's time.
	At     time.Time
	Status NotificationStatus
	// Attempts counts the claims made of it since it was written or
	// retried: the attempt under way, for a claimed notification.
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	// Payload is the body sent at the first attempt, nil before it.
	Payload []byte
	// LeaseToken is set on a claimed notification: RecordDelivery's fence.
	LeaseToken string
	UpdatedAt  time.Time
}

// Clone returns a deep copy.
func (e *OutboxEntry) Clone() *OutboxEntry {
	c := *e
	if e.Payload != nil {
		c.Payload = append([]byte(nil), e.Payload...)
	}
	return &c
}
