package store

import "github.com/countersign/countersign/cstype"

// The records live in package cstype, apart from the driver contract
// (docs/decisions/0031-records-package.md): the engine's API and every
// surface name them there. These aliases are for the drivers and for
// store's own code, so that a driver names everything it implements from
// one package; an alias is the same type, so a record a driver returns is
// the one the engine hands a surface, and errors.Is holds across both names.

type (
	Checkpoint          = cstype.Checkpoint
	AuditEvent          = cstype.AuditEvent
	ConflictError       = cstype.ConflictError
	NotificationStatus  = cstype.NotificationStatus
	OutboxEntry         = cstype.OutboxEntry
	ThreadBusyError     = cstype.ThreadBusyError
	MessageIDTakenError = cstype.MessageIDTakenError
	RunConflictError    = cstype.RunConflictError
	RunStatus           = cstype.RunStatus
	ToolCall            = cstype.ToolCall
	ClientTool          = cstype.ClientTool
	Run                 = cstype.Run
	ProposalPage        = cstype.ProposalPage
	DecideOutcome       = cstype.DecideOutcome
	Status              = cstype.Status
	Mode                = cstype.Mode
	Verdict             = cstype.Verdict
	Scope               = cstype.Scope
	Confirmation        = cstype.Confirmation
	Decision            = cstype.Decision
	Lease               = cstype.Lease
	Fence               = cstype.Fence
	Outcome             = cstype.Outcome
	Proposal            = cstype.Proposal
	Grant               = cstype.Grant
	Thread              = cstype.Thread
	Message             = cstype.Message
	EventType           = cstype.EventType
	Event               = cstype.Event
)

const (
	NotificationPending   = cstype.NotificationPending
	NotificationDelivered = cstype.NotificationDelivered
	NotificationFailed    = cstype.NotificationFailed
	RunRunning            = cstype.RunRunning
	RunParked             = cstype.RunParked
	RunFinished           = cstype.RunFinished
	RunFailed             = cstype.RunFailed
	RunCancelled          = cstype.RunCancelled
	RoleUser              = cstype.RoleUser
	RoleAssistant         = cstype.RoleAssistant
	RoleTool              = cstype.RoleTool
	MaxPageSize           = cstype.MaxPageSize
	DecideApplied         = cstype.DecideApplied
	DecideUnchanged       = cstype.DecideUnchanged
	DecideConflict        = cstype.DecideConflict
	DecideExpired         = cstype.DecideExpired
	MaxIDLen              = cstype.MaxIDLen
	StatusPending         = cstype.StatusPending
	StatusApproved        = cstype.StatusApproved
	StatusExecuting       = cstype.StatusExecuting
	StatusSucceeded       = cstype.StatusSucceeded
	StatusFailed          = cstype.StatusFailed
	StatusReconciling     = cstype.StatusReconciling
	StatusUnknown         = cstype.StatusUnknown
	StatusRejected        = cstype.StatusRejected
	StatusExpired         = cstype.StatusExpired
	StatusSuperseded      = cstype.StatusSuperseded
	StatusCancelled       = cstype.StatusCancelled
	ModeWait              = cstype.ModeWait
	ModeTwoPhase          = cstype.ModeTwoPhase
	ModeIndependent       = cstype.ModeIndependent
	VerdictApproved       = cstype.VerdictApproved
	VerdictRejected       = cstype.VerdictRejected
	ScopeRun              = cstype.ScopeRun
	ScopeThread           = cstype.ScopeThread
	ReasonNotCollected    = cstype.ReasonNotCollected
	EventCreated          = cstype.EventCreated
	EventDecided          = cstype.EventDecided
	EventSettled          = cstype.EventSettled
	EventExpired          = cstype.EventExpired
	EventSuperseded       = cstype.EventSuperseded
	EventCancelled        = cstype.EventCancelled
	EventClaimed          = cstype.EventClaimed
	EventRetried          = cstype.EventRetried
	EventReleased         = cstype.EventReleased
	EventResolved         = cstype.EventResolved
	EventEscalated        = cstype.EventEscalated
	EventReminder         = cstype.EventReminder
)

var (
	ErrNotFound       = cstype.ErrNotFound
	ErrConflict       = cstype.ErrConflict
	ErrLeaseLost      = cstype.ErrLeaseLost
	ErrInvalidCursor  = cstype.ErrInvalidCursor
	ErrNotThreadOwner = cstype.ErrNotThreadOwner
	ErrGrantNotLive   = cstype.ErrGrantNotLive
	ErrUnavailable    = cstype.ErrUnavailable
	ErrInvalidParams  = cstype.ErrInvalidParams
	ErrThreadBusy     = cstype.ErrThreadBusy
	ErrMessageIDTaken = cstype.ErrMessageIDTaken
	Statuses          = cstype.Statuses
)
