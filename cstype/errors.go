package cstype

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

// ErrThreadBusy matches a *ThreadBusyError.
var ErrThreadBusy = errors.New("thread busy")

// ThreadBusyError reports a message refused because a run holds the thread.
type ThreadBusyError struct {
	ThreadID string
	RunID    string // the run that holds it
}

func (e *ThreadBusyError) Error() string {
	return fmt.Sprintf("thread %s is busy: run %s holds it", e.ThreadID, e.RunID)
}

// Is makes errors.Is(err, ErrThreadBusy) hold.
func (e *ThreadBusyError) Is(target error) bool { return target == ErrThreadBusy }

// ErrMessageIDTaken matches a *MessageIDTakenError.
var ErrMessageIDTaken = errors.New("message id taken")

// MessageIDTakenError reports a message refused because its thread already
// holds a message of that id. Message ids are keyed by tenant, thread and
// id: the same id in another thread, or another tenant's thread of the same
// name, is another message and never this error. Nothing of the write that
// met it was stored.
type MessageIDTakenError struct {
	ThreadID string
	ID       string // the message id the thread holds
}

func (e *MessageIDTakenError) Error() string {
	return fmt.Sprintf("thread %s already holds message %s", e.ThreadID, e.ID)
}

// Is makes errors.Is(err, ErrMessageIDTaken) hold.
func (e *MessageIDTakenError) Is(target error) bool { return target == ErrMessageIDTaken }

// RunConflictError reports a run change refused: the run was not in a state
// the change may start from, or the caller's lease is no longer the run's.
type RunConflictError struct {
	ID        string
	Op        string
	Got       RunStatus
	LeaseLost bool
}

func (e *RunConflictError) Error() string {
	if e.LeaseLost {
		return fmt.Sprintf("%s run %s: lease lost (status %s)", e.Op, e.ID, e.Got)
	}
	return fmt.Sprintf("%s run %s: status is %s", e.Op, e.ID, e.Got)
}

// Is makes errors.Is(err, ErrConflict) and, for fence failures,
// errors.Is(err, ErrLeaseLost) hold.
func (e *RunConflictError) Is(target error) bool {
	return target == ErrConflict || (e.LeaseLost && target == ErrLeaseLost)
}
