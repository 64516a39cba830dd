package store

import (
	"context"
	"encoding/json"
	"time"
)

// Store is the contract every driver implements: memstore, sqlitestore and
// pgstore. The conformance suite in store/storetest pins its semantics.
//
// Concurrency: every method is safe for concurrent use, from many goroutines
// and (for the durable drivers) many processes. Every state change is one
// guarded compare-and-set; see transition.go for the rules all drivers share.
//
// Time: drivers read the current time from their own clock (an option, so
// tests can move it). Lease expiry may be judged by the database's clock.
type Store interface {
	// Sessions stores the inbox's signed-in browsers.
	Sessions

	// Conversations stores a thread's messages and runs.
	Conversations

	// Outbox stores the notifications that announce events.
	Outbox

	// Audit chains every tenant's events after they commit (audit.go).
	Audit

	// SlackAnnouncements stores the Slack messages that announce proposals
	// (slack.go).
	SlackAnnouncements
	// EmailLinks stores the email channel's decision links (emaillinks.go).
	EmailLinks
	// Passkeys stores passkeys, their enrollment links and challenges
	// (passkeys.go).
	Passkeys
	// MCPNonces spends the MCP gateway's request-state nonces
	// (mcpnonces.go).
	MCPNonces

	// CreateProposal stores a proposal. It is idempotent on (tenant, thread,
	// tool call id): a replay returns the existing proposal with Created false
	// and supersedes nothing. A new proposal with a replacement key supersedes
	// the pending proposals of the same tenant, requester, thread, action and
	// key, in the same transaction. The thread is created, owned by the
	// requester, if it does not exist.
	//
	// A thread belongs to its first caller: when the thread exists and its
	// owner is not the proposal's requester, CreateProposal stores nothing
	// and returns an error wrapping ErrNotThreadOwner — replays included, so
	// that another actor never gets the owner's proposal back. Of concurrent
	// creations in a new thread, the first to commit owns it.
	//
	// With GrantID, the grant is re-read in the creating transaction and must
	// still approve the proposal (see GrantApproves), else the error wraps
	// ErrGrantNotLive and nothing is stored; a revocation that returned
	// before the creation began is never outrun. With Allowed, the proposal
	// is stored already executing under a new lease (see AllowedExecution).
	CreateProposal(ctx context.Context, params *CreateProposalParams) (*CreateProposalResult, error)

	// GetProposal returns one proposal, or ErrNotFound.
	GetProposal(ctx context.Context, params *GetProposalParams) (*Proposal, error)

	// ProposalTenant returns the tenant that owns a proposal id, or
	// ErrNotFound. A server uses it to answer "forbidden" rather than "not
	// found" for another tenant's proposal, as docs/api.md asks.
	ProposalTenant(ctx context.Context, id string) (string, error)

	// GetProposalByToolCall returns the proposal created for a tool call, or ErrNotFound.
	GetProposalByToolCall(ctx context.Context, params *GetProposalByToolCallParams) (*Proposal, error)

	// LookupCall reads what a call needs to know before it records
	// anything: the call's thread (as GetThread returns it), its tool
	// call's proposal (as GetProposalByToolCall) and, when params carry
	// Grant, the live grant FindGrant would return. The reads come from one
	// snapshot, so that a proposal is never seen without the thread its
	// creation made (unless DeleteThread removed it), and on a database
	// server they cost one round trip. What does not
	// exist is a nil field, not ErrNotFound; malformed params are
	// ErrInvalidParams (see ValidateLookupCallParams).
	LookupCall(ctx context.Context, params *LookupCallParams) (*CallLookup, error)

	// GetProposalByConfirmation returns the proposal a two-phase confirmation id
	// belongs to, or ErrNotFound.
	GetProposalByConfirmation(ctx context.Context, params *GetProposalByConfirmationParams) (*Proposal, error)

	// ListProposals returns one page, newest first, keyset-paginated behind an
	// opaque signed cursor. A forged or altered cursor is ErrInvalidCursor.
	ListProposals(ctx context.Context, params *ListProposalsParams) (*ProposalPage, error)

	// Decide records an approval or a rejection (see ApplyDecision).
	Decide(ctx context.Context, params *DecideParams) (*DecideResult, error)

	// Cancel withdraws a pending proposal.
	Cancel(ctx context.Context, params *CancelParams) (*TransitionResult, error)

	// Expire moves one proposal past its deadline to expired: a pending one, or
	// an approved one whose caller executes (wait, two_phase).
	Expire(ctx context.Context, params *ExpireParams) (*TransitionResult, error)

	// ExpireDue expires up to Limit due proposals and returns them.
	ExpireDue(ctx context.Context, params *ExpireDueParams) ([]*Proposal, error)

	// EscalateDue escalates up to Limit pending proposals whose EscalateAt
	// has come (ApplyEscalate), most overdue first, and returns them.
	// RemindDue records the due reminder of up to Limit pending proposals
	// (ApplyRemind), most overdue first. Concurrent sweepers, in any
	// process, never apply the same due time twice.
	EscalateDue(ctx context.Context, params *ExpireDueParams) ([]*Proposal, error)
	RemindDue(ctx context.Context, params *ExpireDueParams) ([]*Proposal, error)

	// Claim moves one approved proposal to executing under a new lease, or
	// takes an execution released to its caller (ReleasedToCaller) for its
	// next attempt, one more, clearing NextAttemptAt. A
	// claim that finds the approval lapsed (wait, two_phase past the deadline)
	// expires it and returns the expired proposal together with a
	// *ConflictError{Got: expired}, so the caller can settle it once; any
	// other refusal returns a nil proposal and a *ConflictError.
	Claim(ctx context.Context, params *ClaimParams) (*Proposal, error)

	// ClaimBatch claims up to Limit proposals for a worker: approved
	// independent ones, executing ones whose lease expired (recovery) unless
	// released to their caller until a NextAttemptAt still to come, and
	// reconciling ones whose next attempt is due (see Claimable).
	ClaimBatch(ctx context.Context, params *ClaimBatchParams) ([]*Claimed, error)

	// RenewLease extends a held lease and returns it, its ExpiresAt the
	// store's clock plus LeaseDuration (the clock a claimer judges expiry by).
	//
	// The fence, not the clock, decides who holds a lease: a holder whose
	// lease ran out but which nobody claimed again still renews, retries and
	// settles with its fence. Once another claim took the proposal over
	// (ClaimBatch recovering it, which writes a new token and generation),
	// every fenced call of the old holder — RenewLease, BeginRetry, Settle,
	// SettleMany — fails with a *ConflictError matching ErrLeaseLost and
	// writes nothing.
	RenewLease(ctx context.Context, params *RenewLeaseParams) (*Lease, error)

	// BeginRetry starts the next attempt of an idempotent action under the
	// held lease, with the same operation id.
	BeginRetry(ctx context.Context, params *BeginRetryParams) (*Proposal, error)

	// Settle records the result of an execution under the held lease, with
	// its outcome message and, on success, the activation of pending grants.
	Settle(ctx context.Context, params *SettleParams) (*TransitionResult, error)

	// SettleMany settles several proposals in one transaction, so that a
	// busy worker pays one commit for a group of settlements. Each item
	// stands alone: results and errs are parallel to params, and a lost lease
	// fails only its item. A non-nil error means the whole group failed and
	// nothing was written.
	SettleMany(ctx context.Context, params []*SettleParams) (results []*TransitionResult, errs []error, err error)

	// Resolve is an operator's verdict on a reconciling or unknown proposal.
	Resolve(ctx context.Context, params *ResolveParams) (*TransitionResult, error)

	// FindGrant returns a live grant matching the call, or ErrNotFound.
	FindGrant(ctx context.Context, params *FindGrantParams) (*Grant, error)

	// ListGrants lists a tenant's grants, newest first.
	ListGrants(ctx context.Context, params *ListGrantsParams) ([]*Grant, error)

	// RevokeGrant revokes a grant. Revoking twice is not an error.
	RevokeGrant(ctx context.Context, params *RevokeGrantParams) (*Grant, error)

	// EnsureThread returns the thread, creating it owned by Owner if absent.
	EnsureThread(ctx context.Context, params *EnsureThreadParams) (*Thread, error)

	// GetThread returns a thread, or ErrNotFound.
	GetThread(ctx context.Context, params *GetThreadParams) (*Thread, error)

	// DeleteThread removes a thread, its messages and its runs. Outcomes
	// settled later are dropped rather than delivered.
	DeleteThread(ctx context.Context, params *GetThreadParams) error

	// ListMessages returns a thread's messages, oldest first.
	ListMessages(ctx context.Context, params *ListMessagesParams) ([]*Message, error)

	// CountByStatus counts every tenant's proposals by status, for metrics.
	CountByStatus(ctx context.Context) (map[Status]int, error)

	// ListEvents returns audit events in ID order after AfterID.
	ListEvents(ctx context.Context, params *ListEventsParams) ([]*Event, error)

	// LastEventID returns the tenant's highest event id, 0 when it has none:
	// where a stream that starts "now" begins, found by one index probe.
	LastEventID(ctx context.Context, params *LastEventIDParams) (int64, error)

	// Close releases the driver's resources.
	Close() error
}

// CreateProposalParams carries a fully formed proposal. The engine fills every
// field except Status, Version, Decisions, Outcome and timestamps, which the
// driver sets (Status pending, Version 1, CreatedAt = UpdatedAt = now).
type CreateProposalParams struct {
	Proposal *Proposal
	// ApprovedBy, when set, creates the proposal already approved by this
	// decision: a remembered approval (grant) standing in for the humans.
	ApprovedBy *Decision
	// GrantID names the grant ApprovedBy stands for (set only with
	// ApprovedBy). The creating transaction re-reads it: unless it is still
	// live by the store's clock and approves this proposal (same tenant,
	// requester, action, version, thread, run for a run grant, input unless
	// widened, and rule fingerprint), the creation fails with
	// ErrGrantNotLive.
	GrantID string
	// Allowed, when set, records a write the policy allowed: the proposal is
	// created executing under a new lease, without decisions.
	Allowed *AllowedExecution
}

// AllowedExecution asks CreateProposal to record a write the policy allowed
// without a human. The proposal is stored directly executing, attempt 1, its
// ConsumedBy its own tool call id, under a new lease of Owner running for
// LeaseDuration, with no decisions; its Approvers may be empty and its Quorum
// 0. The events are those of a creation and a claim. A replay of the tool
// call returns the existing record (Created false) and grants no lease. From
// there it is an execution like any other: the holder settles with the
// lease's fence, and a lease that lapses is recovered by ClaimBatch (From
// executing).
type AllowedExecution struct {
	Owner         string
	LeaseDuration time.Duration
}

// CreateProposalResult reports what CreateProposal did.
type CreateProposalResult struct {
	Proposal   *Proposal
	Created    bool        // false: a replay returned the existing proposal
	Superseded []*Proposal // proposals this creation replaced
}

// GetProposalParams names one proposal within a tenant.
type GetProposalParams struct {
	Tenant string
	ID     string
}

// GetProposalByToolCallParams names a proposal by the call that created it.
type GetProposalByToolCallParams struct {
	Tenant     string
	ThreadID   string
	ToolCallID string
}

// LookupCallParams names a call about to be recorded: its thread and tool
// call, and the grant that could approve it.
type LookupCallParams struct {
	Tenant     string
	ThreadID   string
	ToolCallID string
	// Grant, when set, also looks for a live grant matching the call, as
	// FindGrant(Grant) does; its Tenant and ThreadID are the call's. A call
	// that asks for no decision leaves it nil.
	Grant *FindGrantParams
}

// CallLookup is what LookupCall found; a nil field is something that does
// not exist.
type CallLookup struct {
	// Thread is the call's thread; nil when it does not exist yet.
	Thread *Thread
	// Proposal is the tool call's record; nil when the tool call is new.
	Proposal *Proposal
	// Grant is the newest live grant matching params.Grant; nil when none
	// does, or when params.Grant is nil.
	Grant *Grant
}

// ValidateLookupCallParams checks a lookup's parameters: a tenant, a thread
// and a tool call id, and a grant query, if any, about the same tenant and
// thread.
func ValidateLookupCallParams(params *LookupCallParams) error {
	switch {
	case params == nil:
		return invalidParams("no parameters")
	case params.Tenant == "" || params.ThreadID == "" || params.ToolCallID == "":
		return invalidParams("a call lookup needs a tenant, a thread and a tool call id")
	case params.Grant != nil && (params.Grant.Tenant != params.Tenant || params.Grant.ThreadID != params.ThreadID):
		return invalidParams("a call lookup's grant query must name the call's tenant and thread")
	}
	return nil
}

// GetProposalByConfirmationParams names a proposal by its confirmation id.
type GetProposalByConfirmationParams struct {
	Tenant         string
	ConfirmationID string
}

// Visibility narrows a listing to what one actor may see: proposals in threads
// the actor owns, and proposals whose approvers name one of Principals
// ("actor:ID", "role:NAME") or name "requester" when the actor is the requester.
type Visibility struct {
	Actor      string
	Principals []string
	// Operator also shows the tenant's reconciling and unknown proposals,
	// which operators resolve.
	Operator bool
}

// ListProposalsParams selects a page of proposals.
type ListProposalsParams struct {
	Tenant   string
	Statuses []Status // empty: any
	Action   string   // empty: any
	ThreadID string   // empty: any
	// Visible, when set, keeps only what that actor may see.
	Visible *Visibility
	After   string // an opaque cursor from a previous page's Next
	Limit   int    // 1..MaxPageSize; 0 means MaxPageSize
}

// DecideParams asks for one decision.
type DecideParams struct {
	Tenant    string
	ID        string
	Actor     string
	ActorKind string // the decider's credential kind, recorded with the decision
	Verdict   Verdict
	Via       string
	Reason    string
	Remember  Scope // only with VerdictApproved
	// Grant is the grant this approval asks to remember. It is stored,
	// inactive, in the same transaction only when the approval completes the
	// quorum and every approval counted toward it asked to remember (see
	// CompleteGrant); it goes live when the execution succeeds.
	Grant *Grant
	// AwaitsCaller says that no server-side process would execute the
	// approval: recorded on the approval when it completes the quorum of a
	// wait or two_phase proposal (Decision.AwaitsCaller), ignored otherwise.
	AwaitsCaller bool
	// StepUp is the step-up the engine verified for this approval
	// ("passkey"), recorded on the decision (Decision.StepUp).
	StepUp string
	// Version, when not 0, is the version of the proposal the engine judged
	// the decision on (a remembered row, see Rememberer): the decision
	// applies to that version alone, and any other fails with an error
	// wrapping ErrVersionMoved, having written nothing.
	Version int64
}

// DecideResult reports a decision's answer and the proposal after it.
type DecideResult struct {
	Outcome  DecideOutcome
	Proposal *Proposal
	// Transition is the status change the decision caused (From == To when none),
	// so the caller can wake waiters and run settlement hooks once.
	From, To Status
}

// CancelParams withdraws a pending proposal.
type CancelParams struct {
	Tenant string
	ID     string
	Actor  string
	// ActorKind is the canceller's credential kind, recorded on the event.
	ActorKind string
	Via       string
	Reason    string
}

// ExpireParams expires one proposal if it is due.
type ExpireParams struct {
	Tenant string
	ID     string
}

// ExpireDueParams bounds a sweep (of expiries, escalations or reminders).
type ExpireDueParams struct {
	Limit int
}

// TransitionResult reports a guarded transition that was applied.
type TransitionResult struct {
	Proposal *Proposal
	From     Status
	// Changed is false when the proposal was already in the asked-for state
	// (for example an idempotent Expire); then nothing was written.
	Changed bool
}

// ClaimParams claims one approved proposal.
type ClaimParams struct {
	Tenant        string
	ID            string
	Owner         string
	LeaseDuration time.Duration
	// ConsumedBy is the tool call spending the approval.
	ConsumedBy string
}

// ClaimBatchParams claims work for a worker.
type ClaimBatchParams struct {
	Owner         string
	LeaseDuration time.Duration
	Limit         int
}

// Claimed is one proposal claimed by ClaimBatch, with the status it was claimed
// from: approved (first execution), executing (a lease that expired: the
// outcome is uncertain) or reconciling.
type Claimed struct {
	Proposal *Proposal
	From     Status
}

// RenewLeaseParams extends a lease.
type RenewLeaseParams struct {
	Tenant        string
	ID            string
	Fence         Fence
	LeaseDuration time.Duration
}

// BeginRetryParams starts another attempt under the held lease.
type BeginRetryParams struct {
	Tenant        string
	ID            string
	Fence         Fence
	LeaseDuration time.Duration
}

// SettleParams records an execution's result.
type SettleParams struct {
	Tenant string
	ID     string
	Fence  Fence
	// Status is succeeded, failed, unknown or reconciling; or executing,
	// which records no outcome but releases the lapsed execution of a
	// caller-executed action for its caller to claim again (the next
	// attempt, same operation id): it needs ReleaseLease and NextAttemptAt,
	// until when the caller may (see ReleasedToCaller).
	Status   Status
	Executed *bool
	Receipt  string
	Result   json.RawMessage
	Error    *string
	Summary  string
	// Presentation is the text of the outcome message admitted to the thread.
	Presentation string
	// For Status reconciling: ReleaseLease gives the lease up until
	// NextAttemptAt; otherwise the holder keeps it and reconciles at once.
	ReleaseLease  bool
	NextAttemptAt *time.Time
	// Reconciles is recorded on the outcome (see Outcome.Reconciles).
	Reconciles int
}

// ResolveParams is an operator's verdict on an uncertain proposal.
type ResolveParams struct {
	Tenant string
	ID     string
	Actor  string
	// ActorKind is the operator's credential kind, recorded on the event
	// (an operator is a person: "human").
	ActorKind string
	Via       string
	Status    Status // succeeded or failed
	Receipt   string
	Note      string
}

// FindGrantParams describes a call that a grant could approve.
type FindGrantParams struct {
	Tenant        string
	Requester     string
	ThreadID      string
	RunID         string
	Action        string
	ActionVersion string
	InputDigest   string
	// RuleFingerprint is the fingerprint of the rule the call falls under
	// now: a grant matches only when its own equals it.
	RuleFingerprint string
}

// ListGrantsParams selects grants.
type ListGrantsParams struct {
	Tenant    string
	Requester string // empty: any
	ThreadID  string // empty: any
}

// RevokeGrantParams revokes one grant.
type RevokeGrantParams struct {
	Tenant string
	ID     string
	Actor  string
}

// EnsureThreadParams names a thread and its would-be owner.
type EnsureThreadParams struct {
	Tenant string
	ID     string
	Owner  string
}

// GetThreadParams names a thread.
type GetThreadParams struct {
	Tenant string
	ID     string
}

// ListMessagesParams selects a thread's messages.
type ListMessagesParams struct {
	Tenant   string
	ThreadID string
}

// ListEventsParams selects audit events.
type ListEventsParams struct {
	Tenant     string
	ProposalID string // empty: every proposal of the tenant
	AfterID    int64
	Limit      int // 0: 1000
}

// LastEventIDParams names the tenant whose latest event is asked for.
type LastEventIDParams struct {
	Tenant string
}

// Notification tells listeners that something changed in the store.
type Notification struct {
	// Work is set when claimable work may have appeared (an independent
	// proposal was approved): workers should claim.
	Work bool
	// ProposalID names a proposal whose state changed, so that waiters on it
	// (in any process) re-read it. Empty for pure work notifications.
	ProposalID string
	// Tenant is the tenant of ProposalID, so that only that tenant's
	// event streams wake. Empty when the sender did not say (a process of
	// an earlier version): every tenant's streams should wake.
	Tenant string
}

// Notifier is implemented by drivers that can wake other processes when the
// store changes (PostgreSQL LISTEN/NOTIFY). Drivers without it (memory,
// SQLite) rely on the engine's in-process signals and on polling.
type Notifier interface {
	// Listen delivers notifications to fn until ctx ends, reconnecting after
	// connection failures (notifications sent while disconnected are lost;
	// listeners also poll). It returns ctx's error. fn must not block.
	Listen(ctx context.Context, fn func(Notification)) error
}

// Wrapper is implemented by a store that wraps another, to count, time or
// alter some of its calls, and passes the others through. Its Unwrap
// returns the wrapped store, so that the optional interfaces the wrapper
// does not implement itself (Notifier, Lanes, Statistics) are still found,
// through As.
type Wrapper interface {
	Store
	Unwrap() Store
}

// As returns the first store of st's chain (st, then each Wrapper's
// Unwrap) that implements T, as the engine and the worker look up a
// driver's optional interfaces.
func As[T any](st Store) (T, bool) {
	for st != nil {
		if t, ok := st.(T); ok {
			return t, true
		}
		w, ok := st.(Wrapper)
		if !ok {
			break
		}
		st = w.Unwrap()
	}
	var zero T
	return zero, false
}

// Rememberer is implemented by drivers that remember the last version of
// each proposal they read or wrote, to start their compare-and-set
// transitions from (internal/rowmemory). RememberedProposal returns a copy
// of that version without reading the database, or false when none is
// remembered. It is only a guess: the row may have moved since, in this
// process or another. The engine judges a decision on it and has the
// driver apply the decision to that version alone (DecideParams.Version);
// it never answers a reader with it.
type Rememberer interface {
	RememberedProposal(tenant, id string) (*Proposal, bool)
}

// Statistics is implemented by drivers whose query planner chooses plans
// from table statistics that the database refreshes only now and then
// (PostgreSQL: autovacuum looks at a database once a minute). A schema's
// tables start empty and grow fast: until their first analysis the planner
// knows nothing of them, and a plan it cached while a table was small (a
// sequential scan) stays in use as the table grows, so every write that
// should find its row by key reads the whole table. RefreshStatistics closes
// that window; the worker calls it every second (maintenance.Statistics).
type Statistics interface {
	// RefreshStatistics analyzes the driver's tables that were never
	// analyzed and hold a few pages, or that have grown to twice what they
	// held at their last analysis, and returns the tables it analyzed.
	// Processes sharing the tables analyze each once: a call that finds
	// another process at work returns none.
	RefreshStatistics(ctx context.Context) ([]string, error)
}

// Lanes is implemented by drivers whose writes can run side by side
// (PostgreSQL: one per pooled connection). Drivers without it (memory,
// SQLite: one writer) get one lane: the worker keeps one claim and one
// settlement write in flight at a time, each batched.
type Lanes interface {
	// WriteLanes is how many claims, and how many settlement writes, a
	// worker of this process should keep in flight at once: at least 1.
	WriteLanes() int
}
