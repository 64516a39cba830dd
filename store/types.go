package store

import "github.com/countersign/countersign/cstype"

// Aliases of the records moved to package cstype, kept so that drivers
// and store's own code compile unchanged.
type Status = cstype.Status

const (
	StatusPending     = cstype.StatusPending
	StatusApproved    = cstype.StatusApproved
	StatusExecuting   = cstype.StatusExecuting
	StatusSucceeded   = cstype.StatusSucceeded
	StatusFailed      = cstype.StatusFailed
	StatusReconciling = cstype.StatusReconciling
	StatusUnknown     = cstype.StatusUnknown
	StatusRejected    = cstype.StatusRejected
	StatusExpired     = cstype.StatusExpired
	StatusSuperseded  = cstype.StatusSuperseded
	StatusCancelled   = cstype.StatusCancelled
)

var (
	Statuses = cstype.Statuses
)

type Mode = cstype.Mode

const (
	ModeWait        = cstype.ModeWait
	ModeTwoPhase    = cstype.ModeTwoPhase
	ModeIndependent = cstype.ModeIndependent
)

type Verdict = cstype.Verdict

const (
	VerdictApproved = cstype.VerdictApproved
	VerdictRejected = cstype.VerdictRejected
)

type Scope = cstype.Scope

const (
	ScopeRun    = cstype.ScopeRun
	ScopeThread = cstype.ScopeThread
)

type Confirmation = cstype.Confirmation
type Decision = cstype.Decision
type Lease = cstype.Lease
type Fence = cstype.Fence
type Outcome = cstype.Outcome

const (
	ReasonNotCollected = cstype.ReasonNotCollected
)

type Proposal = cstype.Proposal
type Grant = cstype.Grant
type Thread = cstype.Thread
type Message = cstype.Message
type EventType = cstype.EventType

const (
	EventCreated    = cstype.EventCreated
	EventDecided    = cstype.EventDecided
	EventSettled    = cstype.EventSettled
	EventExpired    = cstype.EventExpired
	EventSuperseded = cstype.EventSuperseded
	EventCancelled  = cstype.EventCancelled
	EventClaimed    = cstype.EventClaimed
	EventRetried    = cstype.EventRetried
	EventReleased   = cstype.EventReleased
	EventResolved   = cstype.EventResolved
	EventEscalated  = cstype.EventEscalated
	EventReminder   = cstype.EventReminder
)

type Event = cstype.Event
