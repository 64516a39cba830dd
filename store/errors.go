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

// ErrUnavailable wraps an error that means the store cannot be reached at
// the moment: a connection refused, reset or timed out, a database shutting
// down or not yet accepting connections. Nothing is known to have changed by
// the call that failed (a write whose commit was cut off may have landed,
// as with any lost answer); the same call may succeed once the store is
// back. Each driver sets it where it classifies its errors, so that callers
// match it with errors.Is and answer "try again later" (HTTP 503) rather
// than "internal error". A store that is reachable but slow (SQLite's lock
// held past its busy timeout, a serialization failure) is not unavailable.
var ErrUnavailable = errors.New("store unavailable")

// Unavailable marks err as ErrUnavailable, keeping err in the chain; nil
// stays nil and an error already marked is returned as it is.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailableError{err}
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string        { return "store unavailable: " + e.err.Error() }
func (e *unavailableError) Unwrap() error        { return e.err }
func (e *unavailableError) Is(target error) bool { return target == ErrUnavailable }

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
