package pgstore

import (
	"errors"
	"fmt"

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
)

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
// store.ErrInvalidParams; others pass unchanged.
func classify(err error) error {
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
