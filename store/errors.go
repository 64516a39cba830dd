package store

import (
	"errors"
	"fmt"

	"github.com/countersign/countersign/cstype"
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

func invalidParams(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidParams}, args...)...)
}

// Aliases of the records moved to package cstype, kept so that drivers
// and store's own code compile unchanged.
var (
	ErrNotFound = cstype.ErrNotFound
)
var (
	ErrConflict = cstype.ErrConflict
)
var (
	ErrLeaseLost = cstype.ErrLeaseLost
)
var (
	ErrInvalidCursor = cstype.ErrInvalidCursor
)
var (
	ErrNotThreadOwner = cstype.ErrNotThreadOwner
)
var (
	ErrGrantNotLive = cstype.ErrGrantNotLive
)
var (
	ErrUnavailable = cstype.ErrUnavailable
)
var (
	ErrInvalidParams = cstype.ErrInvalidParams
)

type ConflictError = cstype.ConflictError
