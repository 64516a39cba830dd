package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Conversations stores what people and agents say in a thread, and the runs
// (one model turn each) that hold it. docs/design.md §12, docs/api.md "Messages and
// runs".
//
// A run is running → parked → running → finished | failed | cancelled. At
// most one run holds a thread: the thread's RunID names it while it is
// running or parked, and starting a run is a compare-and-set on that field.
// A running run is held by a process under a lease; a parked run holds
// nothing but its row. Every change of a run is one compare-and-set (see
// ApplyRunUpdate, ApplyRunClaim, ApplyRunCancel, the rules every driver
// shares).
type Conversations interface {
	// PostMessage stores a message a human wrote (role user) and, with
	// Run, starts the run it asks for. The thread is created, owned by
	// Owner, if it does not exist; when it exists and Owner is not its
	// owner, nothing is stored and the error wraps ErrNotThreadOwner. When
	// a run holds the thread, nothing is stored and the error is a
	// *ThreadBusyError (ErrThreadBusy) — unless Decision is set. When the
	// thread already holds a message of one of the posted ids, nothing is
	// stored and the error is a *MessageIDTakenError (ErrMessageIDTaken);
	// ownership and a busy thread are judged first, so that only who may
	// post learns which ids the thread holds.
	PostMessage(ctx context.Context, params *PostMessageParams) (*PostMessageResult, error)

	// GetRun returns one run, or ErrNotFound.
	GetRun(ctx context.Context, params *GetRunParams) (*Run, error)

	// ListRuns returns a thread's runs, newest first, at most Limit.
	ListRuns(ctx context.Context, params *ListRunsParams) ([]*Run, error)

	// UpdateRun changes a running run as its lease holder (ApplyRunUpdate):
	// appends its messages, records its proposals and steps, renews its
	// lease, parks it or ends it. Ending it releases the thread. A message
	// id the thread holds already is a *MessageIDTakenError, and nothing
	// is written.
	UpdateRun(ctx context.Context, params *UpdateRunParams) (*Run, error)

	// ClaimRuns leases up to Limit runs that are ready to go on (see
	// RunResumable): parked runs whose awaited proposal is no longer
	// pending, and running runs whose lease ran out. Concurrent claims, in
	// any process, never return the same run twice.
	ClaimRuns(ctx context.Context, params *ClaimRunsParams) ([]*Run, error)

	// CancelRun cancels a run that has not ended (ApplyRunCancel) and
	// releases its thread. A run that already ended is returned unchanged.
	CancelRun(ctx context.Context, params *CancelRunParams) (*Run, error)
}

// NewMessageID returns an id for a message the server writes on its own
// account (an outcome admitted to the thread): "msg_" and 128 random bits,
// so that no client can choose or predict it and take it first.
func NewMessageID() string { return "msg_" + NewToken() }

// PostMessageParams carries a human's message and, optionally, the run it
// starts.
type PostMessageParams struct {
	// Owner is the thread's owner: it must own an existing thread, and it
	// owns a thread the message creates. Ignored with Decision.
	Owner string
	// Message is the message (Tenant, ThreadID, ID, Text, Sender; Role
	// user). CreatedAt is set by the store. It may be nil when Results are
	// given.
	Message *Message
	// Results are tool messages (Tenant, ThreadID, ID, ToolCallID, Result,
	// Text, Sender; Role tool) answering the thread's pending client tool
	// calls, stored before Message in the same write, under the same
	// conditions. The caller checks that they answer pending calls
	// (PendingClientCalls).
	Results []*Message
	// Run, when set, starts this run (ID, Agent, Roles) holding the thread, under
	// a lease of LeaseOwner for LeaseDuration.
	Run           *Run
	LeaseOwner    string
	LeaseDuration time.Duration
	// Decision marks a text decision: stored in an existing thread whoever
	// sends it and while a run holds the thread; it never starts a run.
	Decision bool
}

// Posted is what PostMessage stores, in order: the results, then the
// message.
func (p *PostMessageParams) Posted() []*Message {
	out := slices.Clone(p.Results)
	if p.Message != nil {
		out = append(out, p.Message)
	}
	return out
}

// Thread names the thread the messages are posted to (valid params only).
func (p *PostMessageParams) Thread() (tenant, id string) {
	m := p.Message
	if m == nil && len(p.Results) > 0 {
		m = p.Results[0]
	}
	if m == nil {
		return "", ""
	}
	return m.Tenant, m.ThreadID
}

// PostMessageResult reports what PostMessage stored.
type PostMessageResult struct {
	Thread  *Thread
	Message *Message   // nil when only results were posted
	Results []*Message // the results posted, in order
	Run     *Run       // nil unless one was started
}

// ValidatePostMessageParams checks what every driver checks before writing.
func ValidatePostMessageParams(p *PostMessageParams) error {
	if p == nil || (p.Message == nil && len(p.Results) == 0) {
		return invalidParams("a message is required")
	}
	tenant, thread := p.Thread()
	ids := map[string]bool{}
	for _, m := range p.Posted() {
		switch {
		case m == nil:
			return invalidParams("a nil message")
		case ids[m.ID]:
			return invalidParams("message id %s twice in one post", m.ID)
		case m.Tenant == "" || m.ThreadID == "" || m.ID == "":
			return invalidParams("message tenant, thread and id are required")
		case m.Tenant != tenant || m.ThreadID != thread:
			return invalidParams("the messages of one post are in one thread")
		case m != p.Message && (m.Role != RoleTool || m.ToolCallID == ""):
			return invalidParams("message %s: a posted result is a tool message answering a tool call", m.ID)
		case m == p.Message && m.Role != RoleUser:
			return invalidParams("message role %q: a posted message is the user's", m.Role)
		}
		ids[m.ID] = true
	}
	switch {
	case p.Decision && (p.Message == nil || len(p.Results) > 0):
		return invalidParams("a text decision is one user message")
	case !p.Decision && p.Owner == "":
		return invalidParams("owner is required")
	case p.Decision && p.Run != nil:
		return invalidParams("a text decision starts no run")
	case p.Run != nil && (p.Run.ID == "" || p.LeaseOwner == "" || p.LeaseDuration <= 0):
		return invalidParams("a run needs an id, a lease owner and a lease duration")
	}
	if p.Run != nil {
		for _, t := range p.Run.ClientTools {
			if t.Name == "" || (len(t.Parameters) > 0 && !json.Valid(t.Parameters)) {
				return invalidParams("client tool %q: a name, and parameters that are JSON", t.Name)
			}
		}
	}
	return nil
}

// PendingClientCalls are the client tool calls of the thread's latest run
// that no tool message answers yet, in the order they were made: what the
// run left to its caller (AG-UI's pendingToolCallIds), and what a posted
// result may answer. msgs are the thread's messages, oldest first. A user
// message, or an assistant message of a later run, leaves earlier calls
// unanswered for good: the conversation moved on. A text decision does not
// (it answered an approval, not the agent), nor does an admitted outcome.
func PendingClientCalls(msgs []*Message) []ToolCall {
	var pending []ToolCall
	run := ""
	for _, m := range msgs {
		switch m.Role {
		case RoleUser:
			if !m.Decision {
				pending = nil
			}
		case RoleAssistant:
			// An admitted outcome (no run's) is news, not a new turn.
			if m.RunID != "" && m.RunID != run {
				pending, run = nil, m.RunID
			}
			for _, c := range m.ToolCalls {
				if c.Client {
					pending = append(pending, c)
				}
			}
		case RoleTool:
			pending = slices.DeleteFunc(pending, func(c ToolCall) bool { return c.ID == m.ToolCallID })
		}
	}
	return pending
}

// NewRun returns the run PostMessage starts: running under a new lease.
func NewRun(p *PostMessageParams, now time.Time) *Run {
	tenant, thread := p.Thread()
	r := &Run{
		ID: p.Run.ID, Tenant: tenant, ThreadID: thread, Agent: p.Run.Agent, Roles: slices.Clone(p.Run.Roles),
		ClientTools: p.Run.Clone().ClientTools, Status: RunRunning, Version: 1, StartedAt: now, UpdatedAt: now,
	}
	r.Lease = &Lease{Owner: p.LeaseOwner, Token: NewToken(), Generation: 1, ExpiresAt: now.Add(p.LeaseDuration)}
	return r
}

// GetRunParams names a run.
type GetRunParams struct {
	Tenant string
	ID     string
}

// ListRunsParams selects a thread's runs.
type ListRunsParams struct {
	Tenant   string
	ThreadID string
	Limit    int
}

// UpdateRunParams is a change by the run's lease holder.
type UpdateRunParams struct {
	Tenant string
	ID     string
	// Fence is the caller's lease.
	Fence Fence
	// Messages are appended to the thread, in order (Role assistant or
	// tool; ID, Text, ToolCalls, ToolCallID, Result, ProposalID). Their
	// RunID is the run's.
	Messages []*Message
	// ProposalIDs are added to the run's, each once.
	ProposalIDs []string
	// Steps is added to the run's step count.
	Steps int
	// To is the new status: "" or running (stay running), parked (with
	// Awaiting), finished or failed (with Error).
	To       RunStatus
	Awaiting string
	Error    string
	// LeaseDuration, when positive and the run stays running, renews the
	// lease to now + LeaseDuration.
	LeaseDuration time.Duration
}

// RunChange is what a run change writes besides the run row.
type RunChange struct {
	// Messages are appended to the thread.
	Messages []*Message
	// Release asks for the thread to be released: the run ended.
	Release bool
}

// ApplyRunUpdate applies a lease holder's change to r (mutated in place).
// Only a running run whose lease is the caller's may change; a stale fence
// is a *RunConflictError with LeaseLost.
func ApplyRunUpdate(r *Run, p *UpdateRunParams, now time.Time) (*RunChange, error) {
	switch p.To {
	case "", RunRunning, RunFinished, RunFailed:
	case RunParked:
		if p.Awaiting == "" {
			return nil, invalidParams("a parked run awaits a proposal")
		}
	default:
		return nil, invalidParams("run status %q: want running, parked, finished or failed", p.To)
	}
	if p.Steps < 0 {
		return nil, invalidParams("steps %d", p.Steps)
	}
	ids := map[string]bool{}
	for _, m := range p.Messages {
		if m == nil || m.ID == "" || (m.Role != RoleAssistant && m.Role != RoleTool) {
			return nil, invalidParams("a run's messages are the assistant's or tools', with an id")
		}
		if ids[m.ID] {
			return nil, invalidParams("message id %s twice in one update", m.ID)
		}
		ids[m.ID] = true
	}
	if r.Status != RunRunning {
		return nil, &RunConflictError{ID: r.ID, Op: "update", Got: r.Status, LeaseLost: r.Lease == nil || r.Lease.Token != p.Fence.Token}
	}
	if r.Lease == nil || r.Lease.Token != p.Fence.Token || r.Lease.Generation != p.Fence.Generation {
		return nil, &RunConflictError{ID: r.ID, Op: "update", Got: r.Status, LeaseLost: true}
	}
	c := &RunChange{}
	for _, m := range p.Messages {
		mc := m.Clone()
		mc.Tenant, mc.ThreadID, mc.RunID, mc.CreatedAt = r.Tenant, r.ThreadID, r.ID, now
		c.Messages = append(c.Messages, mc)
	}
	for _, id := range p.ProposalIDs {
		if id != "" && !slices.Contains(r.ProposalIDs, id) {
			r.ProposalIDs = append(r.ProposalIDs, id)
		}
	}
	r.Steps += p.Steps
	r.Version++
	r.UpdatedAt = now
	switch p.To {
	case "", RunRunning:
		if p.LeaseDuration > 0 {
			r.Lease.ExpiresAt = now.Add(p.LeaseDuration)
		}
	case RunParked:
		r.Status, r.Awaiting, r.Lease = RunParked, p.Awaiting, nil
	case RunFinished, RunFailed:
		end(r, p.To, now)
		r.Error = p.Error
		c.Release = true
	}
	return c, nil
}

func end(r *Run, to RunStatus, now time.Time) {
	r.Status, r.Lease, r.Awaiting = to, nil, ""
	t := now
	r.EndedAt = &t
}

// ClaimRunsParams asks for runs to go on with.
type ClaimRunsParams struct {
	Owner         string
	LeaseDuration time.Duration
	Limit         int
	// Sweep looks at every parked run, not only those a durable driver
	// marked ready when their proposal left pending. A run that parks at the
	// very moment its proposal is decided may miss the mark on PostgreSQL
	// (the two writes see each other's snapshots too late); a sweep now and
	// then finds it, at the cost of a look at each parked run. Without it, a
	// claim costs the same whatever the number of parked runs.
	Sweep bool
}

// RunResumable reports whether r is ready to go on: parked while its
// awaited proposal (awaited, nil when it does not exist) is not pending, or
// running under a lease that ran out by now.
func RunResumable(r *Run, awaited *Status, now time.Time) bool {
	switch r.Status {
	case RunParked:
		return awaited == nil || *awaited != StatusPending
	case RunRunning:
		return r.Lease == nil || !now.Before(r.Lease.ExpiresAt)
	}
	return false
}

// ApplyRunClaim gives a resumable run (see RunResumable) to owner under a
// new lease: it is running again, its generation the version written.
func ApplyRunClaim(r *Run, p *ClaimRunsParams, now time.Time) {
	r.Version++
	r.Status, r.Awaiting = RunRunning, ""
	r.Lease = &Lease{Owner: p.Owner, Token: NewToken(), Generation: r.Version, ExpiresAt: now.Add(p.LeaseDuration)}
	r.UpdatedAt = now
}

// CancelRunParams names the run to cancel.
type CancelRunParams struct {
	Tenant string
	ID     string
}

// ApplyRunCancel cancels r unless it ended. It reports whether it changed r.
func ApplyRunCancel(r *Run, now time.Time) bool {
	if r.Status.Ended() {
		return false
	}
	r.Version++
	r.UpdatedAt = now
	end(r, RunCancelled, now)
	return true
}

// clientToolJSON is a client tool as the durable drivers store it.
type clientToolJSON struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// EncodeClientTools is a run's client tools as the durable drivers store
// them (a JSON array), nil when it has none.
func EncodeClientTools(tools []ClientTool) ([]byte, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	out := make([]clientToolJSON, len(tools))
	for i, t := range tools {
		out[i] = clientToolJSON(t)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, invalidParams("client tools: %v", err)
	}
	return b, nil
}

// DecodeClientTools reads what EncodeClientTools wrote.
func DecodeClientTools(b []byte) ([]ClientTool, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var in []clientToolJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("client tools: %w", err)
	}
	out := make([]ClientTool, len(in))
	for i, t := range in {
		out[i] = ClientTool(t)
	}
	return out, nil
}
