package countersign

import (
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/schema"
)

// Sentinels, for errors.Is. Each typed error below matches one of them.
var (
	// ErrNotFound: no such proposal, grant or thread in the caller's tenant.
	ErrNotFound = cstype.ErrNotFound
	// ErrConflict: a compare-and-set found the proposal in another state.
	// The error is a *ConflictError.
	ErrConflict = cstype.ErrConflict
	// ErrLeaseLost: the execution lease was taken over; the holder must stop.
	ErrLeaseLost = cstype.ErrLeaseLost
	// ErrActionNotFound: the call names an action that is not registered.
	ErrActionNotFound = errors.New("action not found")
	// ErrInvalidInput: the input failed the action's schema (*InvalidInputError).
	ErrInvalidInput = errors.New("invalid input")
	// ErrDenied: policy, authorization or preflight refused (*DeniedError).
	ErrDenied = errors.New("denied")
	// ErrInvalidEvidence: two-phase evidence cannot be spent (*EvidenceError).
	ErrInvalidEvidence = errors.New("invalid evidence")
	// ErrForbidden: the actor may not take this decision (*ForbiddenError).
	ErrForbidden = errors.New("forbidden")
	// ErrNotApplied marks an Execute error as definite: the change did not
	// happen. Any other Execute error is treated as an uncertain outcome.
	ErrNotApplied = errors.New("not applied")
	// ErrInvalidCall: the call itself is malformed (missing ids, bad mode).
	ErrInvalidCall = errors.New("invalid call")
)

// ConflictError reports a guarded transition refused by the proposal's state.
type ConflictError = cstype.ConflictError

// InputProblem is one failing location of an input.
type InputProblem = schema.Problem

// InvalidInputError lists every location where an input failed its schema.
type InvalidInputError struct {
	Action   string
	Problems []InputProblem
}

func (e *InvalidInputError) Error() string {
	return fmt.Sprintf("invalid input for %s: %s", e.Action, (&schema.Error{Problems: e.Problems}).Error())
}

// Is matches ErrInvalidInput.
func (e *InvalidInputError) Is(target error) bool { return target == ErrInvalidInput }

// Denial codes say who refused.
const (
	DeniedByPolicy = "POLICY_DENIED"
	// DeniedByPolicyError: a rule's condition could not decide the call
	// (it failed, was not a boolean, or cost too much), so it was denied.
	DeniedByPolicyError = "POLICY_ERROR"
	DeniedByAuthorize   = "UNAUTHORIZED_ACTION"
	DeniedByPreflight   = "PREFLIGHT_DENIED"
)

// DeniedError reports a call refused before anything was stored.
type DeniedError struct {
	Code   string // one of the Denied* codes
	Action string
	Reason string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s denied (%s): %s", e.Action, strings.ToLower(e.Code), e.Reason)
}

// Is matches ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// EvidenceReason says why two-phase evidence was refused.
type EvidenceReason string

// The reasons evidence can be refused (docs/design.md §4).
const (
	EvidenceMismatch EvidenceReason = "mismatch"
	EvidenceConsumed EvidenceReason = "consumed"
	EvidenceDenied   EvidenceReason = "denied"
)

// EvidenceError answers CONFIRMATION_INVALID: the evidence cannot be spent,
// and the caller must not retry it.
type EvidenceError struct {
	Reason         EvidenceReason
	ProposalID     string
	ConfirmationID string
}

func (e *EvidenceError) Error() string {
	return fmt.Sprintf("confirmation %s invalid: %s", e.ConfirmationID, e.Reason)
}

// Is matches ErrInvalidEvidence.
func (e *EvidenceError) Is(target error) bool { return target == ErrInvalidEvidence }

// ForbiddenError reports an actor who may not do what it asked: decide,
// cancel or see a proposal, or act in a thread another actor owns. It names
// nothing the actor did not send.
type ForbiddenError struct {
	// ProposalID is the proposal asked about; empty for a thread.
	ProposalID string
	Actor      string
	Reason     string
}

func (e *ForbiddenError) Error() string {
	if e.ProposalID == "" {
		return fmt.Sprintf("%s is forbidden: %s", e.Actor, e.Reason)
	}
	return fmt.Sprintf("%s may not act on proposal %s: %s", e.Actor, e.ProposalID, e.Reason)
}

// Is matches ErrForbidden.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// NotApplied wraps an Execute error to say the change definitely did not
// happen, so the proposal fails instead of going to reconciling or unknown.
func NotApplied(err error) error {
	if err == nil {
		err = errors.New("not applied")
	}
	return &notApplied{err}
}

type notApplied struct{ err error }

func (e *notApplied) Error() string        { return e.err.Error() }
func (e *notApplied) Unwrap() error        { return e.err }
func (e *notApplied) Is(target error) bool { return target == ErrNotApplied }

// CodeActionVersionChanged begins the error of a proposal that failed
// because its action's version changed after it was proposed: the engine's
// own check before execution, or a hook that saw its backend's version
// differ (NotExecuted).
const CodeActionVersionChanged = "ACTION_VERSION_CHANGED"

// NotExecuted wraps an Execute error to say the hook made no attempt at the
// change at all: a check only the hook can make, just before the change,
// failed. The proposal fails as when the engine's own checks before
// execution fail (executed false), and its error reads "<code>: <err>", so
// that every surface can tell the reason by its UPPER_SNAKE code. It
// matches ErrNotApplied.
func NotExecuted(code string, err error) error {
	if err == nil {
		err = errors.New("not executed")
	}
	return &notExecuted{code: code, err: err}
}

type notExecuted struct {
	code string
	err  error
}

func (e *notExecuted) Error() string {
	if e.code == "" {
		return e.err.Error()
	}
	return e.code + ": " + e.err.Error()
}
func (e *notExecuted) Unwrap() error        { return e.err }
func (e *notExecuted) Is(target error) bool { return target == ErrNotApplied }

// ErrCallMismatch: a tool call id was repeated with another action or
// another input (*MismatchError). Nothing was stored or run.
var ErrCallMismatch = errors.New("call mismatch")

// MismatchError reports a call that repeats a tool call id of the thread
// with another action or another input than the recorded call's: a tool call
// id names one call, so the repeat is refused rather than answered with the
// other call's proposal.
type MismatchError struct {
	ToolCallID string
	// Differs names what differs, in this order: "action", "input".
	Differs []string
	// Action is the recorded call's action, InputDigest its input's digest;
	// both are the caller's own.
	Action      string
	InputDigest string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("tool call %s was made with another %s", e.ToolCallID, strings.Join(e.Differs, " and "))
}

// Is matches ErrCallMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrCallMismatch }

// ErrToolCallIDReused: a call that had to be new to its thread
// (Call.FreshToolCallID) named a tool call id another call of the thread
// made (*ToolCallIDReusedError). Nothing was stored, replayed or run.
var ErrToolCallIDReused = errors.New("tool call id reused")

// CodeToolCallIDReused is the code a built-in run's tool result carries
// for a *ToolCallIDReusedError (docs/api.md, One tool-call identity).
const CodeToolCallIDReused = "TOOL_CALL_ID_REUSED"

// ToolCallIDReusedError reports a run's call whose tool call id another
// call of the thread already used: the id names that call, so this one is
// refused rather than answered with that call's proposal.
type ToolCallIDReusedError struct {
	ToolCallID string
}

func (e *ToolCallIDReusedError) Error() string {
	return fmt.Sprintf("tool call id %q was already used by another call in this thread: call again with a new id", e.ToolCallID)
}

// Is matches ErrToolCallIDReused.
func (e *ToolCallIDReusedError) Is(target error) bool { return target == ErrToolCallIDReused }
