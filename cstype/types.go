package cstype

import (
	"encoding/json"
	"slices"
	"time"
)

// Status is the state of a proposal. See docs/state-machine.md.
type Status string

// The proposal statuses.
const (
	StatusPending     Status = "pending"
	StatusApproved    Status = "approved"
	StatusExecuting   Status = "executing"
	StatusSucceeded   Status = "succeeded"
	StatusFailed      Status = "failed"
	StatusReconciling Status = "reconciling"
	StatusUnknown     Status = "unknown"
	StatusRejected    Status = "rejected"
	StatusExpired     Status = "expired"
	StatusSuperseded  Status = "superseded"
	StatusCancelled   Status = "cancelled"
)

// Statuses lists every status, in state-machine order.
var Statuses = []Status{
	StatusPending, StatusApproved, StatusExecuting, StatusSucceeded, StatusFailed,
	StatusReconciling, StatusUnknown, StatusRejected, StatusExpired, StatusSuperseded,
	StatusCancelled,
}

// Valid reports whether s is one of the statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Terminal reports whether s is final: nothing moves a proposal out of it
// except an operator's resolution of unknown.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusUnknown, StatusRejected, StatusExpired,
		StatusSuperseded, StatusCancelled:
		return true
	}
	return false
}

// Mode says who executes an approved proposal and what the caller sees.
type Mode string

// The modes (docs/design.md §4).
const (
	ModeWait        Mode = "wait"
	ModeTwoPhase    Mode = "two_phase"
	ModeIndependent Mode = "independent"
)

// Valid reports whether m is one of the modes.
func (m Mode) Valid() bool {
	return m == ModeWait || m == ModeTwoPhase || m == ModeIndependent
}

// CallerExecutes reports whether the calling agent (not the worker) executes
// an approved proposal of this mode. Such approvals lapse at the deadline.
func (m Mode) CallerExecutes() bool { return m == ModeWait || m == ModeTwoPhase }

// Verdict is what a decider asks for.
type Verdict string

// The verdicts a decision can carry.
const (
	VerdictApproved Verdict = "approved"
	VerdictRejected Verdict = "rejected"
)

// Scope is the reach of a remembered approval.
type Scope string

// The remember scopes.
const (
	ScopeRun    Scope = "run"
	ScopeThread Scope = "thread"
)

// Valid reports whether s is a remember scope.
func (s Scope) Valid() bool { return s == ScopeRun || s == ScopeThread }

// Confirmation is the copy shown to an approver.
type Confirmation struct {
	Title string
	Verb  string
}

// Decision is one recorded decision on a proposal.
type Decision struct {
	Actor string
	// ActorKind is the kind of credential the decision came through
	// ("human"); empty on decisions recorded before kinds were.
	ActorKind string
	Decision  Verdict
	Via       string
	At        time.Time
	Reason    string
	Remember  Scope
	// AwaitsCaller is set on the approval that completed a wait or
	// two_phase proposal's quorum when no server-side process would execute
	// it: the requester's agent must call again, before ExpiresAt (see
	// store.AwaitsCaller). Only the engine knows whether someone still waits.
	AwaitsCaller bool
	// StepUp names the step-up the approval carried ("passkey": a fresh
	// assertion, verified and spent); empty when its rule asked none.
	StepUp string
}

// Lease fences the execution of one proposal. Only the holder of the current
// token and generation may renew it or settle the proposal.
type Lease struct {
	Owner      string
	Token      string
	Generation int64
	ExpiresAt  time.Time
}

// Fence identifies a lease in a renewal or a settlement.
type Fence struct {
	Token      string
	Generation int64
}

// Outcome is the terminal (or reconciling) result of a proposal. It is recorded
// once, atomically with the transition that produced it.
type Outcome struct {
	ProposalID string
	Status     Status
	Executed   *bool
	Receipt    string
	Result     json.RawMessage
	Error      *string
	Summary    string
	Note       string
	ResolvedBy string
	// Reconciles counts the Reconcile attempts that answered unknown, which
	// sets the backoff before the next one.
	Reconciles int
	// Reason names why a proposal ended as it did, where its status alone
	// does not say: ReasonNotCollected. Empty otherwise.
	Reason string
	At     time.Time
}

// ReasonNotCollected is the outcome reason of an approval that waited for
// its agent to call again, which it did not do before the deadline.
const ReasonNotCollected = "not_collected"

// Proposal is the durable approval record for one call that needs a decision.
// Field names follow docs/api.md's proposal object.
type Proposal struct {
	ID             string
	Tenant         string
	Requester      string
	RequesterRoles []string
	// RequesterKind is the kind of credential that made the call: "human"
	// or "agent"; empty on proposals made before kinds were recorded.
	RequesterKind string
	ThreadID      string
	RunID         string
	ToolCallID    string
	Action        string
	ActionVersion string
	Input         json.RawMessage
	// RawInput is the input exactly as the caller sent it. Before execution it
	// is re-parsed by the current schema and must equal Input (drift check).
	RawInput       json.RawMessage
	InputDigest    string
	Preview        string
	StateVersion   string
	Confirmation   Confirmation
	ConfirmationID string
	Mode           Mode
	Status         Status
	Approvers      []string
	Quorum         int
	// ForbidSelfApproval, Channels, RememberScopes and GrantAnyInput are the
	// rule's terms, frozen at creation so a later policy edit cannot loosen them.
	ForbidSelfApproval bool
	Channels           []string
	// Notify are the approver channels ("slack", "email") the proposal is
	// announced on, and StepUp the step-up each approval needs ("passkey"
	// or none): the rule's, frozen at creation like its terms.
	Notify         []string
	StepUp         string
	RememberScopes []Scope
	GrantAnyInput  bool
	GrantTTL       time.Duration
	// RuleFingerprint identifies the rule the proposal was made under; a
	// grant made by its approval takes it, and approves only proposals of
	// the same fingerprint, so that changing the rule retires the grant.
	RuleFingerprint string
	// RuleMatch and RuleWhen are the rule that applied (its match, and its
	// condition: a When expression or a Go condition's name); both empty
	// when no rule did and the defaults decided.
	RuleMatch, RuleWhen string
	ReplacementKey      string
	Decisions           []Decision
	ExpiresAt           time.Time
	// EscalateAt is when a pending proposal adds EscalateTo to its
	// approvers (store.ApplyEscalate), once: nil when the rule has no
	// escalate_after, and after it escalated.
	EscalateAt *time.Time
	EscalateTo []string
	// RemindAt is when the next reminder of a pending proposal is due
	// (store.ApplyRemind), RemindEvery the time between reminders (0: none).
	RemindAt    *time.Time
	RemindEvery time.Duration
	// TraceParent is the W3C traceparent of the call that made the
	// proposal ("" when it was not traced): spans about the proposal in
	// any process (a decision, the worker's execution) continue that trace.
	// Written once, at creation.
	TraceParent string
	OperationID string
	Attempt     int
	Lease       *Lease
	// ConsumedBy is the tool call that claimed the approval for execution: the
	// original one, or a later one that spent the two-phase evidence.
	ConsumedBy    string
	NextAttemptAt *time.Time
	Outcome       *Outcome
	Version       int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Clone returns a deep copy, so that a driver never shares mutable state with
// its callers.
func (p *Proposal) Clone() *Proposal {
	if p == nil {
		return nil
	}
	c := *p
	c.RequesterRoles = slices.Clone(p.RequesterRoles)
	c.Input = slices.Clone(p.Input)
	c.RawInput = slices.Clone(p.RawInput)
	c.Approvers = slices.Clone(p.Approvers)
	c.EscalateTo = slices.Clone(p.EscalateTo)
	c.EscalateAt = clonePtr(p.EscalateAt)
	c.RemindAt = clonePtr(p.RemindAt)
	c.Channels = slices.Clone(p.Channels)
	c.Notify = slices.Clone(p.Notify)
	c.RememberScopes = slices.Clone(p.RememberScopes)
	c.Decisions = slices.Clone(p.Decisions)
	if p.Lease != nil {
		l := *p.Lease
		c.Lease = &l
	}
	if p.NextAttemptAt != nil {
		t := *p.NextAttemptAt
		c.NextAttemptAt = &t
	}
	c.Outcome = p.Outcome.Clone()
	return &c
}

// Clone returns a deep copy of o (nil for nil).
func (o *Outcome) Clone() *Outcome {
	if o == nil {
		return nil
	}
	c := *o
	c.Result = slices.Clone(o.Result)
	c.Executed = clonePtr(o.Executed)
	c.Error = clonePtr(o.Error)
	return &c
}

// Clone returns a deep copy of g (nil for nil).
func (g *Grant) Clone() *Grant {
	if g == nil {
		return nil
	}
	c := *g
	c.ActivatedAt = clonePtr(g.ActivatedAt)
	c.ExpiresAt = clonePtr(g.ExpiresAt)
	c.RevokedAt = clonePtr(g.RevokedAt)
	return &c
}

// Clone returns a deep copy of m (nil for nil).
func (m *Message) Clone() *Message {
	if m == nil {
		return nil
	}
	c := *m
	c.Outcome = m.Outcome.Clone()
	if m.ToolCalls != nil {
		c.ToolCalls = make([]ToolCall, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			tc.Input = slices.Clone(tc.Input)
			c.ToolCalls[i] = tc
		}
	}
	c.Result = slices.Clone(m.Result)
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Approvals counts the distinct actors that approved.
func (p *Proposal) Approvals() int {
	seen := map[string]bool{}
	for _, d := range p.Decisions {
		if d.Decision == VerdictApproved {
			seen[d.Actor] = true
		}
	}
	return len(seen)
}

// Grant is a remembered approval. It is created inactive with the approval that
// asked for it and becomes live when that proposal's execution succeeds.
type Grant struct {
	ID            string
	Tenant        string
	Requester     string
	Scope         Scope
	ThreadID      string
	RunID         string
	Action        string
	ActionVersion string
	// InputDigest is empty when the rule widened the grant to any input.
	InputDigest string
	// RuleFingerprint is the fingerprint of the rule the grant was made
	// under (the origin proposal's); the grant matches only calls made under
	// a rule of the same fingerprint.
	RuleFingerprint  string
	OriginProposalID string
	GrantedBy        string
	CreatedAt        time.Time
	ActivatedAt      *time.Time
	ExpiresAt        *time.Time
	RevokedAt        *time.Time
	RevokedBy        string
}

// Live reports whether the grant approves calls at now.
func (g *Grant) Live(now time.Time) bool {
	return g.ActivatedAt != nil && g.RevokedAt == nil && (g.ExpiresAt == nil || now.Before(*g.ExpiresAt))
}

// Thread is a conversation. Its owner is its first caller.
type Thread struct {
	Tenant string
	ID     string
	Owner  string
	// RunID is the run that holds the thread (running or parked), "" when
	// none does.
	RunID     string
	CreatedAt time.Time
}

// Message is one entry of a thread: a human's (role user), an assistant's
// (a model's reply, or an admitted outcome, which carries the outcome
// object) or a tool's (a tool call's result).
type Message struct {
	ID       string
	Tenant   string
	ThreadID string
	Role     string
	Text     string
	// Sender is the actor who wrote a user message.
	Sender string
	// Decision marks a user message that was a text decision: addressed
	// to the approval it decided, not to the agent, so a model is not
	// shown it (store.PostMessageParams.Decision sets it).
	Decision bool
	// RunID is the run that wrote an assistant or tool message.
	RunID string
	// ToolCalls are the tools an assistant message called.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers; Result its result
	// object (JSON).
	ToolCallID string
	Result     json.RawMessage
	ProposalID string
	Outcome    *Outcome
	CreatedAt  time.Time
}

// EventType names an entry of a proposal's audit trail.
type EventType string

// The audit events. The first five are also streamed to clients (docs/api.md).
const (
	EventCreated    EventType = "proposal.created"
	EventDecided    EventType = "proposal.decided"
	EventSettled    EventType = "proposal.settled"
	EventExpired    EventType = "proposal.expired"
	EventSuperseded EventType = "proposal.superseded"
	EventCancelled  EventType = "proposal.cancelled"
	EventClaimed    EventType = "proposal.claimed"
	EventRetried    EventType = "proposal.retried"
	// EventReleased: a caller's lapsed execution was released for the
	// caller to claim its next attempt (see store.ReleasedToCaller).
	EventReleased  EventType = "proposal.released"
	EventResolved  EventType = "proposal.resolved"
	EventEscalated EventType = "proposal.escalated"
	EventReminder  EventType = "proposal.reminder"
)

// Event is one entry of a proposal's audit trail. IDs grow monotonically per
// store, so they double as a resumable stream position.
type Event struct {
	ID         int64
	Tenant     string
	ProposalID string
	Type       EventType
	Actor      string
	// ActorKind is the kind of credential behind the event ("human" or
	// "agent"): the requester's for a creation, the decider's, the
	// canceller's, the resolving operator's. Empty on events no credential
	// is behind (a worker's claim, an expiry, the server's own) and on
	// events written before kinds were recorded; the chain hashes it only
	// when it is not empty (auditchain.Event), so those hash as they did.
	ActorKind string
	Via       string
	Status    Status
	Detail    string
	At        time.Time
}
