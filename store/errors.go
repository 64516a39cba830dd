package store

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned when a proposal, grant or thread does not exist in
// the tenant asked about. Another tenant's record is indistinguishable from a
// missing one at this layer.
var ErrNotFound = errors.New("not found")

// ErrConflict matches every *ConflictError.
var ErrConflict = errors.New("conflict")

// ErrLeaseLost matches a *ConflictError raised because the caller's lease is no
// longer the current one (expired and taken over, or the proposal moved on).
var ErrLeaseLost = errors.New("lease lost")

// ErrInvalidCursor is returned for a cursor that was altered, forged, or
// issued by another store.
var ErrInvalidCursor = errors.New("invalid cursor")

// ErrNotThreadOwner is returned when a proposal would be created in a thread
// that another actor owns. A thread belongs to its first caller; nothing is
// stored, and nothing of the thread or its proposals is returned.
var ErrNotThreadOwner = errors.New("thread owned by another actor")

// ErrGrantNotLive is returned when a proposal approved by a grant is created
// but, in the creating transaction, that grant no longer approves it:
// revoked, expired, never activated, or made under another rule. Nothing is
// stored; the caller asks the humans instead.
var ErrGrantNotLive = errors.New("grant not live")

// ErrInvalidParams wraps a caller's mistake in the parameters of a call.
var ErrInvalidParams = errors.New("invalid parameters")

// ConflictError reports a compare-and-set that changed nothing because the
// proposal was not in a state the operation may start from.
type ConflictError struct {
	ID   string   // the proposal
	Op   string   // the operation that was refused
	Want []Status // the states it may start from
	Got  Status   // the state the proposal was in
	// LeaseLost is set when the state matched but the fence did not.
	LeaseLost bool
}

func (e *ConflictError) Error() string {
	want := make([]string, len(e.Want))
	for i, s := range e.Want {
		want[i] = string(s)
	}
	if e.LeaseLost {
		return fmt.Sprintf("%s proposal %s: lease lost (status %s)", e.Op, e.ID, e.Got)
	}
	return fmt.Sprintf("%s proposal %s: status is %s, want %s", e.Op, e.ID, e.Got, strings.Join(want, " or "))
}

// Is makes errors.Is(err, ErrConflict) and, for fence failures,
// errors.Is(err, ErrLeaseLost) hold.
func (e *ConflictError) Is(target error) bool {
	return target == ErrConflict || (e.LeaseLost && target == ErrLeaseLost)
}

func invalidParams(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidParams}, args...)...)
}
