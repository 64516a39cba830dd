package store

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file holds the state machine's rules as pure functions over a
// *Proposal. Every driver loads the row (locked, or under its single writer),
// applies one of these, and writes the row back guarded by its version. Keeping
// the rules here, once, is what makes memory, SQLite and PostgreSQL behave
// alike; the drivers differ only in how they lock and persist.

// Change describes the side effects of an applied transition, for the driver
// to persist in the same transaction as the row.
type Change struct {
	// Events to append to the audit trail. The driver fills ID, Tenant,
	// ProposalID, Status and At.
	Events []Event
	// Admit asks for the outcome message to be admitted to the thread:
	// always, except into a thread that is gone (then it is dropped). At
	// most one outcome message is kept per tenant, proposal and outcome
	// status, whatever its id.
	Admit *Message
	// Grant is stored, inactive, with the row.
	Grant *Grant
	// ActivateGrants makes the grants that originate in this proposal live.
	ActivateGrants bool
}

// event appends an event by actor, whose credential is of kind ("" for an
// event no credential is behind: a worker's, an expiry, the server's own).
func (c *Change) event(t EventType, actor, kind, via, detail string) {
	c.Events = append(c.Events, Event{Type: t, Actor: actor, ActorKind: kind, Via: via, Detail: detail})
}

// NewToken returns a random lease token.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return hex.EncodeToString(b[:])
}

// Due reports whether p's deadline has passed in a status that lapses: pending,
// or approved in a mode whose caller executes.
func Due(p *Proposal, now time.Time) bool {
	if now.Before(p.ExpiresAt) {
		return false
	}
	return p.Status == StatusPending || (p.Status == StatusApproved && p.Mode.CallerExecutes())
}

// DefaultSummary is the one-line summary for the model of an outcome.
func DefaultSummary(action string, status Status, detail string) string {
	var s string
	switch status {
	case StatusSucceeded:
		s = fmt.Sprintf("Action %q completed.", action)
	case StatusFailed:
		s = fmt.Sprintf("Action %q failed.", action)
	case StatusRejected:
		s = fmt.Sprintf("Action %q was rejected; it was not executed.", action)
	case StatusExpired:
		s = fmt.Sprintf("Action %q expired before it was approved and executed; it was not executed.", action)
	case StatusSuperseded:
		s = fmt.Sprintf("Action %q was replaced by a newer proposal; it was not executed.", action)
	case StatusCancelled:
		s = fmt.Sprintf("Action %q was cancelled; it was not executed.", action)
	case StatusUnknown:
		return "Action outcome unknown; it may or may not have been applied. Do not retry automatically." + suffix(detail)
	case StatusReconciling:
		s = fmt.Sprintf("Action %q outcome is being reconciled; it may or may not have been applied.", action)
	default:
		s = fmt.Sprintf("Action %q is %s.", action, status)
	}
	return s + suffix(detail)
}

func suffix(detail string) string {
	if detail == "" {
		return ""
	}
	return " " + detail
}

func boolPtr(b bool) *bool { return &b }

// settle records a terminal (or reconciling) outcome on p and the message
// that admits it to the thread.
func settle(p *Proposal, c *Change, status Status, o Outcome, now time.Time) {
	p.Status = status
	o.ProposalID = p.ID
	o.Status = status
	o.At = now
	if o.Summary == "" {
		detail := ""
		if o.Receipt != "" {
			detail = "Receipt: " + o.Receipt + "."
		} else if o.Error != nil && *o.Error != "" {
			detail = *o.Error
		}
		o.Summary = DefaultSummary(p.Action, status, detail)
	}
	// The outcome owns its memory: nothing the caller passed in aliases it.
	p.Outcome = o.Clone()
	if status.Terminal() {
		p.Lease = nil
		p.NextAttemptAt = nil
		c.Admit = &Message{
			// The server's own id, never derived from the proposal: a
			// client that could name it beforehand could take it first.
			ID:         NewMessageID(),
			Tenant:     p.Tenant,
			ThreadID:   p.ThreadID,
			Role:       "assistant",
			Text:       o.Summary,
			ProposalID: p.ID,
			Outcome:    p.Outcome.Clone(),
			CreatedAt:  now,
		}
	}
}

// expire ends p as expired. An approval that lapsed says so, never that it
// was not approved: one that waited for its agent to call again is
// not_collected.
func expire(p *Proposal, c *Change, now time.Time) {
	o := Outcome{Executed: boolPtr(false)}
	if p.Status == StatusApproved {
		o.Summary = LapsedSummary(p.Action, p.ExpiresAt, false)
		if AwaitsCaller(p) {
			o.Reason = ReasonNotCollected
			o.Summary = LapsedSummary(p.Action, p.ExpiresAt, true)
		}
	}
	settle(p, c, StatusExpired, o, now)
	c.event(EventExpired, "", "", "", o.Reason)
}

// AwaitsCaller reports whether p is an approval that only its agent's next
// call executes: approved, in a mode whose caller executes, and the approval
// that completed it recorded that no server-side process would (a waiting
// call, a parked run). Such an approval that lapses is not_collected.
func AwaitsCaller(p *Proposal) bool {
	if p.Status != StatusApproved || !p.Mode.CallerExecutes() {
		return false
	}
	for i := len(p.Decisions) - 1; i >= 0; i-- {
		if d := p.Decisions[i]; d.Decision == VerdictApproved {
			return d.AwaitsCaller
		}
	}
	return false
}

// LapsedSummary is the summary of an approval that lapsed at deadline
// without running: notCollected when it waited for its agent to call again.
func LapsedSummary(action string, deadline time.Time, notCollected bool) string {
	by := deadline.UTC().Format(time.RFC3339)
	if notCollected {
		return fmt.Sprintf("Action %q was approved, but the agent did not call again before %s; it was not executed.", action, by)
	}
	return fmt.Sprintf("Action %q was approved, but it did not run before %s; it was not executed.", action, by)
}

// ApplyDecision applies one decision to p. The change is nil when nothing is
// to be written. A decision after the deadline expires the proposal (if it is
// due) and answers DecideExpired. Malformed parameters are ErrInvalidParams.
func ApplyDecision(p *Proposal, d *DecideParams, now time.Time) (DecideOutcome, *Change, error) {
	switch {
	case d.Verdict != VerdictApproved && d.Verdict != VerdictRejected:
		return "", nil, invalidParams("verdict %q", d.Verdict)
	case d.Remember != "" && (!d.Remember.Valid() || d.Verdict != VerdictApproved):
		return "", nil, invalidParams("remember %q with verdict %s", d.Remember, d.Verdict)
	case d.Actor == "":
		return "", nil, invalidParams("a decision needs an actor")
	case d.Version != 0 && p.Version != d.Version:
		return "", nil, fmt.Errorf("proposal %s is at version %d, the decision was judged on version %d: %w", p.ID, p.Version, d.Version, ErrVersionMoved)
	}
	out, c := applyDecision(p, d, now)
	return out, c, nil
}

func applyDecision(p *Proposal, d *DecideParams, now time.Time) (DecideOutcome, *Change) {
	if Due(p, now) {
		c := &Change{}
		expire(p, c, now)
		return DecideExpired, c
	}
	switch p.Status {
	case StatusExpired:
		return DecideExpired, nil
	case StatusPending:
		if d.Verdict == VerdictApproved && slices.ContainsFunc(p.Decisions, func(x Decision) bool {
			return x.Actor == d.Actor && x.Decision == VerdictApproved
		}) {
			return DecideUnchanged, nil
		}
		c := &Change{}
		p.Decisions = append(p.Decisions, Decision{
			Actor: d.Actor, ActorKind: d.ActorKind, Decision: d.Verdict, Via: d.Via, At: now, Reason: d.Reason, Remember: d.Remember, StepUp: d.StepUp,
		})
		c.event(EventDecided, d.Actor, d.ActorKind, d.Via, string(d.Verdict))
		if d.Verdict == VerdictRejected {
			detail := ""
			if d.Reason != "" {
				detail = "Reason: " + d.Reason
			}
			settle(p, c, StatusRejected, Outcome{Executed: boolPtr(false), Summary: DefaultSummary(p.Action, StatusRejected, detail)}, now)
			return DecideApplied, c
		}
		if p.Approvals() >= max(p.Quorum, 1) {
			p.Status = StatusApproved
			c.Grant = CompleteGrant(p, d.Grant)
			p.Decisions[len(p.Decisions)-1].AwaitsCaller = d.AwaitsCaller && p.Mode.CallerExecutes()
		}
		return DecideApplied, c
	case StatusRejected:
		if d.Verdict == VerdictRejected {
			return DecideUnchanged, nil
		}
		return DecideConflict, nil
	case StatusApproved, StatusExecuting, StatusSucceeded, StatusFailed, StatusReconciling, StatusUnknown:
		if d.Verdict == VerdictApproved {
			return DecideUnchanged, nil
		}
		return DecideConflict, nil
	default: // superseded, cancelled
		return DecideConflict, nil
	}
}

// CompleteGrant returns the grant that the approval which just completed p's
// quorum makes of asked (the grant that approval asked to remember), or nil.
// A grant stands for a complete approval: every approval counted toward the
// quorum — each distinct approver's, the completing one included — must have
// asked to remember, and the narrowest scope asked applies (run is narrower
// than thread). A run grant is for p's run; a thread grant for none. The
// grant takes p's rule fingerprint, and is granted by the approver who asked
// for the scope it has (the completing one when it did). p must already hold
// the completing decision, last.
func CompleteGrant(p *Proposal, asked *Grant) *Grant {
	if asked == nil || !mayHoldGrant(p) {
		return nil
	}
	var counted []Decision
	scope := ScopeThread
	for _, d := range p.Decisions {
		if d.Decision != VerdictApproved {
			continue
		}
		if d.Remember == ScopeRun {
			scope = ScopeRun
		}
		counted = append(counted, d)
	}
	g := asked.Clone()
	g.Scope = scope
	g.RunID = ""
	if scope == ScopeRun {
		g.RunID = p.RunID
	}
	g.RuleFingerprint = p.RuleFingerprint
	if last := counted[len(counted)-1]; last.Remember != scope {
		for _, d := range counted {
			if d.Remember == scope {
				g.GrantedBy = d.Actor
				break
			}
		}
	}
	return g
}

// mayHoldGrant reports whether a grant may originate in p: whether p's
// approvals, at least one, all asked to remember a scope (run or thread).
// CompleteGrant makes a grant only then, and a success activates the
// proposal's grants only then; the others have none, and their settlement
// writes no statement for it (on SQLite, 11 µs of the single writer's time
// per settlement, docs/profiles/scale.md, change 15).
func mayHoldGrant(p *Proposal) bool {
	approvals := 0
	for _, d := range p.Decisions {
		if d.Decision != VerdictApproved {
			continue
		}
		if d.Remember != ScopeRun && d.Remember != ScopeThread {
			return false
		}
		approvals++
	}
	return approvals > 0
}

// GrantMatches reports whether g answers the call q describes, live or not:
// same tenant, requester, action, version, thread and rule fingerprint, the
// same input unless the grant was widened to any, and the same run for a run
// grant.
func GrantMatches(g *Grant, q *FindGrantParams) bool {
	if g.Tenant != q.Tenant || g.Requester != q.Requester || g.Action != q.Action ||
		g.ActionVersion != q.ActionVersion || g.ThreadID != q.ThreadID || g.RuleFingerprint != q.RuleFingerprint {
		return false
	}
	if g.InputDigest != "" && g.InputDigest != q.InputDigest {
		return false
	}
	return g.Scope == ScopeThread || (g.Scope == ScopeRun && g.RunID == q.RunID)
}

// GrantApproves reports whether g, read in the transaction that creates p,
// may stand in for p's approval at now: it is live and matches p's call.
func GrantApproves(g *Grant, p *Proposal, now time.Time) bool {
	return g.Live(now) && GrantMatches(g, &FindGrantParams{
		Tenant: p.Tenant, Requester: p.Requester, ThreadID: p.ThreadID, RunID: p.RunID,
		Action: p.Action, ActionVersion: p.ActionVersion, InputDigest: p.InputDigest,
		RuleFingerprint: p.RuleFingerprint,
	})
}

// ApplyCancel withdraws a pending proposal. Cancelling a cancelled proposal
// changes nothing and is not an error.
func ApplyCancel(p *Proposal, params *CancelParams, now time.Time) (*Change, error) {
	if p.Status == StatusCancelled {
		return nil, nil
	}
	if Due(p, now) {
		c := &Change{}
		expire(p, c, now)
		return c, &ConflictError{ID: p.ID, Op: "cancel", Want: []Status{StatusPending}, Got: StatusExpired}
	}
	if p.Status != StatusPending {
		return nil, &ConflictError{ID: p.ID, Op: "cancel", Want: []Status{StatusPending}, Got: p.Status}
	}
	c := &Change{}
	detail := ""
	if params.Reason != "" {
		detail = "Reason: " + params.Reason
	}
	settle(p, c, StatusCancelled, Outcome{Executed: boolPtr(false), Summary: DefaultSummary(p.Action, StatusCancelled, detail)}, now)
	c.event(EventCancelled, params.Actor, params.ActorKind, params.Via, params.Reason)
	return c, nil
}

// ApplyExpire expires p if it is due. Expiring an expired proposal changes
// nothing and is not an error; a proposal that is not due is a conflict.
func ApplyExpire(p *Proposal, now time.Time) (*Change, error) {
	if p.Status == StatusExpired {
		return nil, nil
	}
	if !Due(p, now) {
		return nil, &ConflictError{ID: p.ID, Op: "expire", Want: []Status{StatusPending, StatusApproved}, Got: p.Status}
	}
	c := &Change{}
	expire(p, c, now)
	return c, nil
}

// ApplySupersede replaces a pending proposal by a newer one.
func ApplySupersede(p *Proposal, byID string, now time.Time) *Change {
	c := &Change{}
	settle(p, c, StatusSuperseded, Outcome{Executed: boolPtr(false)}, now)
	c.event(EventSuperseded, "", "", "", "by "+byID)
	return c
}

func newLease(p *Proposal, owner string, d time.Duration, now time.Time) {
	// The generation is the row version the claim writes: unique and growing.
	p.Lease = &Lease{Owner: owner, Token: NewToken(), Generation: p.Version + 1, ExpiresAt: now.Add(d)}
}

// ApplyClaim moves an approved proposal to executing under a new lease. An
// approval that lapsed is expired (the change is returned with the error so
// the driver writes it).
func ApplyClaim(p *Proposal, params *ClaimParams, now time.Time) (*Change, error) {
	if params.LeaseDuration <= 0 || params.Owner == "" {
		return nil, invalidParams("a claim needs an owner and a positive lease duration")
	}
	if Due(p, now) {
		c := &Change{}
		expire(p, c, now)
		return c, &ConflictError{ID: p.ID, Op: "claim", Want: []Status{StatusApproved}, Got: StatusExpired}
	}
	if p.Status != StatusApproved && !ReleasedToCaller(p) {
		return nil, &ConflictError{ID: p.ID, Op: "claim", Want: []Status{StatusApproved}, Got: p.Status}
	}
	c := &Change{}
	p.Status = StatusExecuting
	p.Attempt++
	p.ConsumedBy = params.ConsumedBy
	// A released execution is claimed for its next attempt: it is no longer
	// waiting for its caller.
	p.NextAttemptAt = nil
	newLease(p, params.Owner, params.LeaseDuration, now)
	c.event(EventClaimed, params.Owner, "", "", fmt.Sprintf("attempt %d", p.Attempt))
	return c, nil
}

// ReleasedToCaller reports whether p is an execution whose caller's lease
// lapsed and which was released for the caller to claim again (see
// SettleParams, Status executing): executing, with no lease, and a
// NextAttemptAt saying until when the caller may come back. Claim takes it
// (the next attempt, same operation id); ClaimBatch leaves it alone until
// NextAttemptAt, after which a worker settles it as unknown.
func ReleasedToCaller(p *Proposal) bool {
	return p.Status == StatusExecuting && p.Lease == nil && p.NextAttemptAt != nil
}

// Claimable reports whether a worker may claim p at now, and from which status.
func Claimable(p *Proposal, now time.Time) bool {
	switch p.Status {
	case StatusApproved:
		return p.Mode == ModeIndependent
	case StatusExecuting:
		leaseFree := p.Lease == nil || !now.Before(p.Lease.ExpiresAt)
		// A released execution waits for its caller until NextAttemptAt.
		return leaseFree && (p.NextAttemptAt == nil || !now.Before(*p.NextAttemptAt))
	case StatusReconciling:
		leaseFree := p.Lease == nil || !now.Before(p.Lease.ExpiresAt)
		return leaseFree && (p.NextAttemptAt == nil || !now.Before(*p.NextAttemptAt))
	}
	return false
}

// ApplyClaimBatch claims one claimable proposal for a worker. A proposal
// claimed from approved starts its first attempt; one recovered from executing
// keeps its attempt count, since whether that attempt ran is unknown.
func ApplyClaimBatch(p *Proposal, params *ClaimBatchParams, now time.Time) (*Claimed, *Change) {
	from := p.Status
	c := &Change{}
	if from == StatusApproved {
		p.Status = StatusExecuting
		p.Attempt++
	}
	newLease(p, params.Owner, params.LeaseDuration, now)
	c.event(EventClaimed, params.Owner, "", "", fmt.Sprintf("from %s, attempt %d", from, p.Attempt))
	return &Claimed{Proposal: p, From: from}, c
}

func checkFence(op string, p *Proposal, f Fence, want ...Status) error {
	if !slices.Contains(want, p.Status) {
		return &ConflictError{ID: p.ID, Op: op, Want: want, Got: p.Status, LeaseLost: true}
	}
	if p.Lease == nil || p.Lease.Token != f.Token || p.Lease.Generation != f.Generation {
		return &ConflictError{ID: p.ID, Op: op, Want: want, Got: p.Status, LeaseLost: true}
	}
	return nil
}

// ApplyRenew extends the held lease. An expired lease that nobody took over
// may still be renewed: the fence, not the clock, decides who holds it.
func ApplyRenew(p *Proposal, params *RenewLeaseParams, now time.Time) (*Change, error) {
	if err := checkFence("renew lease of", p, params.Fence, StatusExecuting, StatusReconciling); err != nil {
		return nil, err
	}
	p.Lease.ExpiresAt = now.Add(params.LeaseDuration)
	return &Change{}, nil
}

// ApplyBeginRetry starts the next attempt of an idempotent action.
func ApplyBeginRetry(p *Proposal, params *BeginRetryParams, now time.Time) (*Change, error) {
	if err := checkFence("retry", p, params.Fence, StatusExecuting); err != nil {
		return nil, err
	}
	p.Attempt++
	p.Lease.ExpiresAt = now.Add(params.LeaseDuration)
	c := &Change{}
	c.event(EventRetried, p.Lease.Owner, "", "", fmt.Sprintf("attempt %d", p.Attempt))
	return c, nil
}

// ApplySettle records an execution's result under the held lease, or (Status
// executing) releases a caller's lapsed execution for the caller to claim
// again.
func ApplySettle(p *Proposal, params *SettleParams, now time.Time) (*Change, error) {
	switch params.Status {
	case StatusSucceeded, StatusFailed, StatusUnknown, StatusReconciling:
	case StatusExecuting:
		return applyRelease(p, params)
	default:
		return nil, invalidParams("settle to %q", params.Status)
	}
	if err := checkFence("settle", p, params.Fence, StatusExecuting, StatusReconciling); err != nil {
		return nil, err
	}
	c := &Change{}
	holder := p.Lease.Owner
	settle(p, c, params.Status, Outcome{
		Executed:   params.Executed,
		Receipt:    params.Receipt,
		Result:     params.Result,
		Error:      params.Error,
		Summary:    params.Summary,
		Reconciles: params.Reconciles,
	}, now)
	if c.Admit != nil && params.Presentation != "" {
		c.Admit.Text = params.Presentation
	}
	if params.Status == StatusReconciling {
		if params.ReleaseLease {
			p.Lease = nil
		}
		if params.NextAttemptAt != nil {
			t := *params.NextAttemptAt
			p.NextAttemptAt = &t
		}
	}
	c.ActivateGrants = params.Status == StatusSucceeded && mayHoldGrant(p)
	c.event(EventSettled, holder, "", "", string(params.Status))
	return c, nil
}

// applyRelease gives up the held lease of an execution without an outcome,
// for its caller to claim the next attempt until params.NextAttemptAt (see
// ReleasedToCaller).
func applyRelease(p *Proposal, params *SettleParams) (*Change, error) {
	if !params.ReleaseLease || params.NextAttemptAt == nil {
		return nil, invalidParams("settle to executing releases the lease until a next attempt: it needs ReleaseLease and NextAttemptAt")
	}
	if err := checkFence("release", p, params.Fence, StatusExecuting); err != nil {
		return nil, err
	}
	c := &Change{}
	holder := p.Lease.Owner
	p.Lease = nil
	t := *params.NextAttemptAt
	p.NextAttemptAt = &t
	detail := fmt.Sprintf("attempt %d may be claimed again by its caller until %s", p.Attempt+1, t.UTC().Format(time.RFC3339))
	c.event(EventReleased, holder, "", "", detail)
	return c, nil
}

// ApplyResolve records an operator's verdict on a reconciling or unknown
// proposal. It takes the lease away from any reconciler.
func ApplyResolve(p *Proposal, params *ResolveParams, now time.Time) (*Change, error) {
	if params.Status != StatusSucceeded && params.Status != StatusFailed {
		return nil, invalidParams("resolve to %q", params.Status)
	}
	if p.Status != StatusReconciling && p.Status != StatusUnknown {
		return nil, &ConflictError{ID: p.ID, Op: "resolve", Want: []Status{StatusReconciling, StatusUnknown}, Got: p.Status}
	}
	c := &Change{}
	var errText *string
	if params.Status == StatusFailed {
		e := "resolved as failed by an operator"
		if params.Note != "" {
			e += ": " + params.Note
		}
		errText = &e
	}
	var executed *bool
	if p.Outcome != nil {
		executed = p.Outcome.Executed
	}
	settle(p, c, params.Status, Outcome{
		Executed:   executed,
		Receipt:    params.Receipt,
		Error:      errText,
		Note:       params.Note,
		ResolvedBy: params.Actor,
	}, now)
	c.ActivateGrants = params.Status == StatusSucceeded && mayHoldGrant(p)
	c.event(EventResolved, params.Actor, params.ActorKind, params.Via, string(params.Status)+": "+params.Note)
	return c, nil
}

// Finish stamps a written row: one more version, updated now. Drivers call it
// after applying a change and before writing the row.
func Finish(p *Proposal, now time.Time) {
	p.Version++
	p.UpdatedAt = now
}

// ValidateCreate checks the fields a driver relies on.
func ValidateCreate(p *Proposal) error {
	switch {
	case p == nil:
		return invalidParams("no proposal")
	case p.ID == "" || p.Tenant == "" || p.ThreadID == "" || p.ToolCallID == "" || p.Action == "":
		return invalidParams("proposal needs id, tenant, thread_id, tool_call_id and action")
	case !p.Mode.Valid():
		return invalidParams("mode %q", p.Mode)
	case p.ExpiresAt.IsZero():
		return invalidParams("proposal needs expires_at")
	case p.OperationID == "":
		return invalidParams("proposal needs operation_id")
	case len(p.ID) > MaxIDLen || len(p.ThreadID) > MaxIDLen || len(p.ToolCallID) > MaxIDLen || len(p.RunID) > MaxIDLen:
		return invalidParams("ids are at most %d bytes", MaxIDLen)
	}
	return nil
}

// ValidateCreateParams checks a creation's parameters: the proposal (see
// ValidateCreate) with approvers and a quorum of at least 1 unless it records
// an allowed write, a grant id only with the approval it stands for, and an
// allowed execution with an owner and a positive lease, never together with
// an approval.
func ValidateCreateParams(params *CreateProposalParams) error {
	if params == nil {
		return invalidParams("no parameters")
	}
	if err := ValidateCreate(params.Proposal); err != nil {
		return err
	}
	// A proposal that asks humans must name who may decide it; only the
	// record of an allowed write has nobody to ask.
	if p := params.Proposal; params.Allowed == nil && (len(p.Approvers) == 0 || p.Quorum < 1) {
		return invalidParams("a proposal needs approvers and a quorum of at least 1, unless it records an allowed write")
	}
	switch a := params.Allowed; {
	case params.GrantID != "" && params.ApprovedBy == nil:
		return invalidParams("a grant id needs the approval it stands for")
	case a != nil && params.ApprovedBy != nil:
		return invalidParams("an allowed execution has no approval")
	case a != nil && (a.Owner == "" || a.LeaseDuration <= 0):
		return invalidParams("an allowed execution needs an owner and a positive lease duration")
	}
	return nil
}

// PrepareCreate stamps a new proposal for insertion at version 1: pending;
// approved, when params.ApprovedBy is a remembered approval; or executing
// under a new lease (attempt 1, consumed by its own tool call), when
// params.Allowed records an allowed write. Unlike the other transitions it
// needs no Finish.
func PrepareCreate(p *Proposal, params *CreateProposalParams, now time.Time) *Change {
	p.Status = StatusPending
	p.Version = 1
	p.Decisions = nil
	p.Outcome = nil
	p.Lease = nil
	p.Attempt = 0
	p.CreatedAt = now
	p.UpdatedAt = now
	c := &Change{}
	c.event(EventCreated, p.Requester, p.RequesterKind, "", "")
	if approvedBy := params.ApprovedBy; approvedBy != nil {
		d := *approvedBy
		d.Decision = VerdictApproved
		d.At = now
		p.Decisions = []Decision{d}
		p.Status = StatusApproved
		c.event(EventDecided, d.Actor, d.ActorKind, d.Via, string(VerdictApproved))
	}
	if a := params.Allowed; a != nil {
		p.Status = StatusExecuting
		p.Attempt = 1
		p.ConsumedBy = p.ToolCallID
		// The generation is the version the creation writes, as for a claim.
		p.Lease = &Lease{Owner: a.Owner, Token: NewToken(), Generation: p.Version, ExpiresAt: now.Add(a.LeaseDuration)}
		c.event(EventClaimed, a.Owner, "", "", fmt.Sprintf("allowed, attempt %d", p.Attempt))
	}
	return c
}

// Supersedes reports whether creating n replaces the pending proposal p.
func Supersedes(n, p *Proposal) bool {
	return n.ReplacementKey != "" && p.Status == StatusPending && p.ID != n.ID &&
		p.Tenant == n.Tenant && p.Requester == n.Requester && p.ThreadID == n.ThreadID &&
		p.Action == n.Action && p.ReplacementKey == n.ReplacementKey
}

// CanSee reports whether v may see p: its requester, who owned p's thread
// when p was made (only a thread's owner makes calls in it); an approver p
// names; and operators, for what is reconciling or unknown. A thread deleted
// and then started again by another actor shows the new owner none of the
// old owner's proposals.
func CanSee(p *Proposal, v *Visibility) bool {
	if v == nil || p.Requester == v.Actor {
		return true
	}
	if v.Operator && (p.Status == StatusReconciling || p.Status == StatusUnknown) {
		return true // operators resolve what nobody knows the outcome of
	}
	for _, a := range p.Approvers {
		if a != "requester" && slices.Contains(v.Principals, a) {
			return true
		}
	}
	return false
}

// Escalatable reports whether p is a pending proposal whose escalation has
// come by now.
func Escalatable(p *Proposal, now time.Time) bool {
	return p.Status == StatusPending && p.EscalateAt != nil && !now.Before(*p.EscalateAt)
}

// ApplyEscalate adds a pending proposal's EscalateTo to its approvers once
// its EscalateAt has come (docs/design.md §14: a due time swept like expiry),
// and records a proposal.escalated event naming who was added. It happens
// once: EscalateAt is cleared. nil: nothing is due.
func ApplyEscalate(p *Proposal, now time.Time) (*Change, error) {
	if !Escalatable(p, now) {
		return nil, nil
	}
	var added []string
	for _, a := range p.EscalateTo {
		if !slices.Contains(p.Approvers, a) {
			p.Approvers = append(p.Approvers, a)
			added = append(added, a)
		}
	}
	p.EscalateAt = nil
	c := &Change{}
	detail := "no approver added: they were approvers already"
	if len(added) > 0 {
		detail = "approvers added: " + strings.Join(added, ", ")
	}
	c.event(EventEscalated, "", "", "", detail)
	return c, nil
}

// Remindable reports whether p is a pending proposal whose next reminder
// is due by now.
func Remindable(p *Proposal, now time.Time) bool {
	return p.Status == StatusPending && p.RemindAt != nil && p.RemindEvery > 0 && !now.Before(*p.RemindAt)
}

// ApplyRemind records a proposal.reminder event for a pending proposal
// whose reminder is due, and schedules the next one RemindEvery after the
// one due, skipping those a stopped sweeper missed: one reminder for the
// backlog, never a burst. nil: nothing is due.
func ApplyRemind(p *Proposal, now time.Time) (*Change, error) {
	if !Remindable(p, now) {
		return nil, nil
	}
	next := *p.RemindAt
	for !next.After(now) {
		next = next.Add(p.RemindEvery)
	}
	p.RemindAt = &next
	c := &Change{}
	c.event(EventReminder, "", "", "", "still pending since "+p.CreatedAt.UTC().Format(time.RFC3339))
	return c, nil
}
