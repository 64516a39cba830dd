package server

import (
	"encoding/json"
	"time"

	"github.com/countersign/countersign/cstype"
)

// The wire types are the API's objects as clients see them. They are the
// server's own, converted from the store's records, so that a change to how
// a record is stored never changes an answer, and a field the store keeps
// for itself (leases, confirmation ids, the rule's frozen terms) is never
// sent. Every time is in UTC whatever the store's clock, and every list is
// [] rather than null.

// Proposal is the proposal object.
type Proposal struct {
	ID        string `json:"id"`
	Tenant    string `json:"tenant"`
	Requester string `json:"requester"`
	// RequesterKind is the kind of credential that made the call; absent
	// on proposals made before kinds were recorded.
	RequesterKind string          `json:"requester_kind,omitempty"`
	ThreadID      string          `json:"thread_id"`
	RunID         string          `json:"run_id"`
	ToolCallID    string          `json:"tool_call_id"`
	Action        string          `json:"action"`
	ActionVersion string          `json:"action_version"`
	Input         json.RawMessage `json:"input"`
	InputDigest   string          `json:"input_digest"`
	Preview       string          `json:"preview"`
	StateVersion  string          `json:"state_version"`
	Confirmation  Confirmation    `json:"confirmation"`
	Mode          string          `json:"mode"`
	Status        string          `json:"status"`
	Approvers     []string        `json:"approvers"`
	Quorum        int             `json:"quorum"`
	Decisions     []Decision      `json:"decisions"`
	ExpiresAt     time.Time       `json:"expires_at"`
	OperationID   string          `json:"operation_id"`
	Outcome       *Outcome        `json:"outcome"`
	// Rule is the policy rule that applied to the call; null when none
	// did and the defaults decided.
	Rule      *Rule     `json:"rule"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Rule names the policy rule that applied to a call: its match, and its
// condition ("" when it has none).
type Rule struct {
	Match string `json:"match"`
	When  string `json:"when"`
}

// Confirmation is the copy shown to an approver.
type Confirmation struct {
	Title string `json:"title"`
	Verb  string `json:"verb,omitempty"`
}

// Decision is one recorded decision on a proposal.
type Decision struct {
	Actor string `json:"actor"`
	// ActorKind is the decider's credential kind; absent on decisions
	// recorded before kinds were.
	ActorKind string    `json:"actor_kind,omitempty"`
	Decision  string    `json:"decision"`
	Via       string    `json:"via"`
	At        time.Time `json:"at"`
	Reason    string    `json:"reason,omitempty"`
	Remember  string    `json:"remember,omitempty"`
	// StepUp is "passkey" on an approval that carried a verified passkey
	// assertion; absent otherwise.
	StepUp string `json:"step_up,omitempty"`
}

// Outcome is a proposal's recorded result.
type Outcome struct {
	ProposalID        string          `json:"proposal_id"`
	Status            string          `json:"status"`
	Executed          *bool           `json:"executed"`
	Receipt           string          `json:"receipt,omitempty"`
	Result            json.RawMessage `json:"result,omitempty"`
	Error             *string         `json:"error"`
	Summary           string          `json:"summary"`
	Note              string          `json:"note,omitempty"`
	ResolvedBy        string          `json:"resolved_by,omitempty"`
	ReconcileAttempts int             `json:"reconcile_attempts,omitempty"`
	Reason            string          `json:"reason,omitempty"`
	At                time.Time       `json:"at"`
}

// Grant is a remembered approval.
type Grant struct {
	ID            string `json:"id"`
	Tenant        string `json:"tenant"`
	Requester     string `json:"requester"`
	Scope         string `json:"scope"`
	ThreadID      string `json:"thread_id"`
	RunID         string `json:"run_id,omitempty"`
	Action        string `json:"action"`
	ActionVersion string `json:"action_version"`
	// InputDigest is absent when the rule widened the grant to any input.
	InputDigest      string     `json:"input_digest,omitempty"`
	OriginProposalID string     `json:"origin_proposal_id"`
	GrantedBy        string     `json:"granted_by"`
	CreatedAt        time.Time  `json:"created_at"`
	ActivatedAt      *time.Time `json:"activated_at"`
	ExpiresAt        *time.Time `json:"expires_at"`
	RevokedAt        *time.Time `json:"revoked_at"`
	RevokedBy        string     `json:"revoked_by,omitempty"`
}

// Thread is a conversation; its owner is its first caller.
type Thread struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
}

// Message is one entry of a thread; an outcome message carries the outcome.
type Message struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	Text string `json:"text"`
	// Sender is who wrote a user message.
	Sender string `json:"sender,omitempty"`
	// RunID is the run that wrote an assistant or tool message.
	RunID string `json:"run_id,omitempty"`
	// ToolCalls are the tools an assistant message called.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Result: the call a tool message answers, and its
	// result object.
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Outcome    *Outcome        `json:"outcome,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
}

// ToolCall is one tool an assistant message called.
type ToolCall struct {
	ID     string          `json:"id"`
	Action string          `json:"action"`
	Input  json.RawMessage `json:"input"`
}

// Event is one entry of a proposal's audit trail.
type Event struct {
	ID         int64  `json:"id"`
	ProposalID string `json:"proposal_id"`
	Type       string `json:"type"`
	Actor      string `json:"actor,omitempty"`
	// ActorKind is the kind of credential behind the event; absent on
	// events no credential is behind and on events from before kinds.
	ActorKind string    `json:"actor_kind,omitempty"`
	Via       string    `json:"via,omitempty"`
	Status    string    `json:"status"`
	Detail    string    `json:"detail,omitempty"`
	At        time.Time `json:"at"`
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// orEmpty is s, or an empty list for nil, so that it encodes as [].
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// wireProposal converts a proposal record; nil stays nil.
func wireProposal(p *cstype.Proposal) *Proposal {
	if p == nil {
		return nil
	}
	ds := make([]Decision, len(p.Decisions))
	for i, d := range p.Decisions {
		ds[i] = Decision{Actor: d.Actor, ActorKind: d.ActorKind, Decision: string(d.Decision), Via: d.Via, At: d.At.UTC(),
			Reason: d.Reason, Remember: string(d.Remember), StepUp: d.StepUp}
	}
	return &Proposal{
		ID: p.ID, Tenant: p.Tenant, Requester: p.Requester, RequesterKind: p.RequesterKind,
		ThreadID: p.ThreadID, RunID: p.RunID, ToolCallID: p.ToolCallID,
		Action: p.Action, ActionVersion: p.ActionVersion,
		Input: rawOrNull(p.Input), InputDigest: p.InputDigest,
		Preview: p.Preview, StateVersion: p.StateVersion,
		Confirmation: Confirmation{Title: p.Confirmation.Title, Verb: p.Confirmation.Verb},
		Mode:         string(p.Mode), Status: string(p.Status),
		Approvers: orEmpty(append([]string(nil), p.Approvers...)), Quorum: p.Quorum,
		Decisions: ds, ExpiresAt: p.ExpiresAt.UTC(), OperationID: p.OperationID,
		Outcome: wireOutcome(p.Outcome), Rule: wireRule(p),
		CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC(),
	}
}

// wireRule is the rule p records; nil when it records none.
func wireRule(p *cstype.Proposal) *Rule {
	if p.RuleMatch == "" {
		return nil
	}
	return &Rule{Match: p.RuleMatch, When: p.RuleWhen}
}

func wireProposals(ps []*cstype.Proposal) []*Proposal {
	out := make([]*Proposal, len(ps))
	for i, p := range ps {
		out[i] = wireProposal(p)
	}
	return out
}

// wireOutcome converts an outcome; nil stays nil.
func wireOutcome(o *cstype.Outcome) *Outcome {
	if o == nil {
		return nil
	}
	c := o.Clone()
	if len(c.Result) > 0 && !json.Valid(c.Result) {
		c.Result = nil // a misbehaving hook's result must not break every answer
	}
	return &Outcome{
		ProposalID: c.ProposalID, Status: string(c.Status), Executed: c.Executed,
		Receipt: c.Receipt, Result: c.Result, Error: c.Error, Summary: c.Summary,
		Note: c.Note, ResolvedBy: c.ResolvedBy, ReconcileAttempts: c.Reconciles, Reason: c.Reason, At: c.At.UTC(),
	}
}

func wireThread(t *cstype.Thread) *Thread {
	return &Thread{ID: t.ID, Owner: t.Owner, CreatedAt: t.CreatedAt.UTC()}
}

func wireMessages(ms []*cstype.Message) []*Message {
	out := make([]*Message, len(ms))
	for i, m := range ms {
		out[i] = wireMessage(m)
	}
	return out
}

func wireMessage(m *cstype.Message) *Message {
	if m == nil {
		return nil
	}
	w := &Message{ID: m.ID, Role: m.Role, Text: m.Text, Sender: m.Sender, RunID: m.RunID, ToolCallID: m.ToolCallID,
		Outcome: wireOutcome(m.Outcome), CreatedAt: m.CreatedAt.UTC()}
	if len(m.Result) > 0 && json.Valid(m.Result) {
		w.Result = m.Result
	}
	for _, c := range m.ToolCalls {
		in := json.RawMessage(c.Input)
		if !json.Valid(in) {
			in = json.RawMessage("{}")
		}
		w.ToolCalls = append(w.ToolCalls, ToolCall{ID: c.ID, Action: c.Action, Input: in})
	}
	return w
}

func wireGrant(g *cstype.Grant) *Grant {
	return &Grant{
		ID: g.ID, Tenant: g.Tenant, Requester: g.Requester, Scope: string(g.Scope),
		ThreadID: g.ThreadID, RunID: g.RunID, Action: g.Action, ActionVersion: g.ActionVersion,
		InputDigest: g.InputDigest, OriginProposalID: g.OriginProposalID, GrantedBy: g.GrantedBy,
		CreatedAt:   g.CreatedAt.UTC(),
		ActivatedAt: utcPtr(g.ActivatedAt), ExpiresAt: utcPtr(g.ExpiresAt), RevokedAt: utcPtr(g.RevokedAt),
		RevokedBy: g.RevokedBy,
	}
}

func wireEvents(es []*cstype.Event) []*Event {
	out := make([]*Event, len(es))
	for i, e := range es {
		out[i] = &Event{ID: e.ID, ProposalID: e.ProposalID, Type: string(e.Type), Actor: e.Actor, ActorKind: e.ActorKind,
			Via: e.Via, Status: string(e.Status), Detail: e.Detail, At: e.At.UTC()}
	}
	return out
}
