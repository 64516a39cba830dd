package store

import (
	"errors"
	"fmt"
)

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

// ErrVersionMoved is the answer to a decision judged on a version of its
// proposal that is no longer the stored one (DecideParams.Version): nothing
// was written, and the decision is to be judged again on the row as stored.
var ErrVersionMoved = errors.New("the proposal has moved on from the version the decision was judged on")

func invalidParams(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidParams}, args...)...)
}
