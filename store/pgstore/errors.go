package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/countersign/countersign/store"
)

// PostgreSQL error codes the store acts on (Appendix A of the manual).
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeUndefinedTable       = "42P01"
	codeInvalidSchemaName    = "3F000"
	// Values PostgreSQL cannot store: a NUL byte or invalid UTF-8 in text,
	// \u0000 in jsonb, a time out of timestamptz's range, an index entry
	// over the size limit (a very long key).
	codeCharacterNotInRepertoire = "22021"
	codeUntranslatableCharacter  = "22P05"
	codeDatetimeFieldOverflow    = "22008"
	codeProgramLimitExceeded     = "54000"
	// The server cannot serve the session: shutting down, crashed,
	// starting up or out of connection slots. Class 08 (connection
	// exceptions) is matched by its prefix.
	codeAdminShutdown      = "57P01"
	codeCrashShutdown      = "57P02"
	codeCannotConnectNow   = "57P03"
	codeTooManyConnections = "53300"
)

// unreachable reports whether err means that PostgreSQL cannot be reached
// now: the connection could not be made or was lost (refused, reset, timed
// out, closed under the query), or the server said it cannot serve
// (shutting down, starting up, a connection exception, no free connection
// slot). A server that answered with any other error is reachable, and so
// is a connection refused for its credentials or database name (a
// configuration error, not an outage); a cancellation is the caller's.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow, codeTooManyConnections:
			return true
		}
		return len(pe.Code) == 5 && pe.Code[:2] == "08"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true // no server error in it: the connection was never made
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT):
		return true
	}
	return false
}

// pgCode returns the SQLSTATE of a server error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// uniqueViolation reports whether err is a unique violation, and of which
// constraint or index.
func uniqueViolation(err error) (constraint string, ok bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeUniqueViolation {
		return pe.ConstraintName, true
	}
	return "", false
}

// retryable reports whether err aborted a transaction that may simply be
// run again.
func retryable(err error) bool {
	switch pgCode(err) {
	case codeSerializationFailure, codeDeadlockDetected:
		return true
	}
	return false
}

func isUndefinedTable(err error) bool { return pgCode(err) == codeUndefinedTable }

// classify turns errors caused by the caller's values into
// store.ErrInvalidParams and those that mean the server cannot be reached
// into store.ErrUnavailable; others pass unchanged.
func classify(err error) error {
	if unreachable(err) {
		return store.Unavailable(err)
	}
	if constraint, ok := uniqueViolation(err); ok {
		// Every unique key but the tool call's (which CreateProposal
		// absorbs) is an id the caller chose: a proposal's, a
		// confirmation's, a grant's.
		return fmt.Errorf("%w: %s exists: %w", store.ErrInvalidParams, constraint, err)
	}
	switch pgCode(err) {
	case codeCharacterNotInRepertoire, codeUntranslatableCharacter, codeDatetimeFieldOverflow, codeProgramLimitExceeded:
		return fmt.Errorf("%w: %w", store.ErrInvalidParams, err)
	}
	return err
}

// wrap prefixes err with the operation, after classifying it; nil stays
// nil.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("pgstore: %s: %w", op, classify(err))
}
