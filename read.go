package countersign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// The engine's reads. Each checks who is asking: a surface renders what
// these return and never reads the store itself. A refusal is a
// *ForbiddenError (another tenant's record, or one the actor may not see);
// an unknown id is an error wrapping ErrNotFound. Neither reveals anything of
// the record.

// forbidden is the refusal of a read. It names nothing but the id asked for.
func forbidden(id Identity, proposalID, reason string) *ForbiddenError {
	return &ForbiddenError{ProposalID: proposalID, Actor: id.Actor, Reason: reason}
}

// validID rejects ids no record can have, before they reach a store.
func validID(s string) bool { return s != "" && len(s) <= cstype.MaxIDLen }

// Proposal returns a proposal id may see: the owner of its thread (its
// requester) and whoever may decide it. Another tenant's proposal, or one id
// may not see, is a *ForbiddenError; an unknown one wraps ErrNotFound.
func (e *Engine) Proposal(ctx context.Context, id Identity, proposalID string) (*cstype.Proposal, error) {
	p, err := e.proposalOfTenant(ctx, id, proposalID)
	if err != nil {
		return nil, err
	}
	if !canSee(id, p) {
		return nil, forbidden(id, proposalID, "you may not see this proposal")
	}
	return p, nil
}

// OwnProposal returns a proposal id requested (isRequester): an MCP task
// is its requester's alone. Any other proposal, of another requester or
// tenant or none at all, wraps ErrNotFound alike, so that an id tells the
// caller nothing of proposals that are not its own.
func (e *Engine) OwnProposal(ctx context.Context, id Identity, proposalID string) (*cstype.Proposal, error) {
	if !validID(proposalID) {
		return nil, fmt.Errorf("get proposal %q: %w", proposalID, ErrNotFound)
	}
	p, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: id.Tenant, ID: proposalID})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return nil, fmt.Errorf("get proposal %q: %w", proposalID, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("get proposal: %w", err)
	case !isRequester(id, p):
		return nil, fmt.Errorf("get proposal %q: %w", proposalID, ErrNotFound)
	}
	return p, nil
}

// proposalOfTenant reads a proposal of id's tenant, telling another
// tenant's (forbidden) from none at all (not found). It does not check
// visibility.
func (e *Engine) proposalOfTenant(ctx context.Context, id Identity, proposalID string) (*cstype.Proposal, error) {
	if !validID(proposalID) {
		return nil, fmt.Errorf("get proposal %q: %w", proposalID, ErrNotFound)
	}
	p, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: id.Tenant, ID: proposalID})
	if err == nil {
		return p, nil
	}
	if !errors.Is(err, cstype.ErrNotFound) {
		return nil, fmt.Errorf("get proposal: %w", err)
	}
	tenant, err := e.store.ProposalTenant(ctx, proposalID)
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return nil, fmt.Errorf("get proposal %q: %w", proposalID, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("get proposal: %w", err)
	case tenant != id.Tenant:
		return nil, forbidden(id, proposalID, "you may not see this proposal")
	}
	// Created between the two reads.
	p, err = e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: id.Tenant, ID: proposalID})
	if err != nil {
		return nil, fmt.Errorf("get proposal: %w", err)
	}
	return p, nil
}

// ThreadView is a thread and its conversation, oldest message first.
type ThreadView struct {
	Thread   *cstype.Thread
	Messages []*cstype.Message
	// Runs are the thread's runs, newest first, at most ThreadRuns.
	Runs []*cstype.Run
}

// ThreadRuns is how many runs a ThreadView lists.
const ThreadRuns = 20

// Thread returns a thread of id's tenant and its messages. Only the
// thread's owner may read it (*ForbiddenError otherwise); thread ids are
// namespaced by tenant, so another tenant's thread of the same id is simply
// not this tenant's (ErrNotFound).
func (e *Engine) Thread(ctx context.Context, id Identity, threadID string) (*ThreadView, error) {
	t, err := e.thread(ctx, id, threadID)
	if err != nil {
		return nil, err
	}
	if !mayReadThread(id, t) {
		return nil, &ForbiddenError{Actor: id.Actor, Reason: "only the thread's owner may read it"}
	}
	msgs, err := e.store.ListMessages(ctx, &store.ListMessagesParams{Tenant: id.Tenant, ThreadID: t.ID})
	if errors.Is(err, cstype.ErrNotFound) { // deleted meanwhile
		return nil, fmt.Errorf("thread %q: %w", threadID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	runs, err := e.store.ListRuns(ctx, &store.ListRunsParams{Tenant: id.Tenant, ThreadID: t.ID})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	v := &ThreadView{Thread: t, Messages: heldOutcomes(msgs, runs), Runs: runs}
	if len(v.Runs) > ThreadRuns {
		v.Runs = v.Runs[:ThreadRuns]
	}
	return v, nil
}

// thread reads a thread of id's tenant without checking who asks.
func (e *Engine) thread(ctx context.Context, id Identity, threadID string) (*cstype.Thread, error) {
	if !validID(threadID) {
		return nil, fmt.Errorf("thread %q: %w", threadID, ErrNotFound)
	}
	t, err := e.store.GetThread(ctx, &store.GetThreadParams{Tenant: id.Tenant, ID: threadID})
	if errors.Is(err, cstype.ErrNotFound) {
		return nil, fmt.Errorf("thread %q: %w", threadID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get thread: %w", err)
	}
	return t, nil
}

// ProposalEvents returns the audit trail of a proposal id may see, oldest
// first.
func (e *Engine) ProposalEvents(ctx context.Context, id Identity, proposalID string) ([]*cstype.Event, error) {
	p, err := e.Proposal(ctx, id, proposalID)
	if err != nil {
		return nil, err
	}
	var all []*cstype.Event
	const page = 1000
	for after := int64(0); ; {
		evs, err := e.store.ListEvents(ctx, &store.ListEventsParams{Tenant: id.Tenant, ProposalID: p.ID, AfterID: after, Limit: page})
		if err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		all = append(all, evs...)
		if len(evs) < page {
			return all, nil
		}
		after = evs[len(evs)-1].ID
	}
}

// ListParams selects a page of proposals for List and ThreadProposals.
// The tenant and what the caller may see come from its Identity.
type ListParams struct {
	Statuses []cstype.Status // empty: any
	Action   string          // empty: any
	ThreadID string          // empty: any; ThreadProposals sets it
	After    string          // an opaque cursor from a previous page's Next
	Limit    int             // 1..cstype.MaxPageSize; 0 means cstype.MaxPageSize
}

// List returns a page of the proposals id may see, newest first: every
// proposal of the threads it owns, and those it may decide.
func (e *Engine) List(ctx context.Context, id Identity, params ListParams) (*cstype.ProposalPage, error) {
	page, err := e.store.ListProposals(ctx, &store.ListProposalsParams{
		Tenant: id.Tenant, Visible: visibilityOf(id),
		Statuses: params.Statuses, Action: params.Action, ThreadID: params.ThreadID,
		After: params.After, Limit: params.Limit,
	})
	if err != nil {
		return nil, fmt.Errorf("list proposals: %w", err)
	}
	return page, nil
}

// ThreadProposals is List of one thread: an unknown thread is ErrNotFound
// (where List would answer an empty page). An approver who does not own the
// thread sees the proposals it may decide; any other actor is refused with
// a *ForbiddenError, as every read of another actor's thread is.
func (e *Engine) ThreadProposals(ctx context.Context, id Identity, threadID string, params ListParams) (*cstype.ProposalPage, error) {
	t, err := e.thread(ctx, id, threadID)
	if err != nil {
		return nil, err
	}
	params.ThreadID = threadID
	page, err := e.List(ctx, id, params)
	if err != nil {
		return nil, err
	}
	// Whether a bystander may see anything of the thread shows only on its
	// first page: a later one (a cursor) was reached by seeing the first.
	if !mayReadThread(id, t) && params.After == "" && len(page.Proposals) == 0 && page.Next == "" {
		return nil, &ForbiddenError{Actor: id.Actor, Reason: "only the thread's owner and its approvers may list it"}
	}
	return page, nil
}

// Grants lists the grants id may see and revoke (its own, those it granted,
// and, for operators, the tenant's), newest first, optionally of one thread.
func (e *Engine) Grants(ctx context.Context, id Identity, threadID string) ([]*cstype.Grant, error) {
	gs, err := e.store.ListGrants(ctx, &store.ListGrantsParams{Tenant: id.Tenant, ThreadID: threadID})
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	out := gs[:0]
	for _, g := range gs {
		if mayManageGrant(id, g) {
			out = append(out, g)
		}
	}
	return out, nil
}

// RevokeGrant revokes a grant id may manage (see Grants); later calls need a
// decision again. Revoking twice is not an error. An unknown grant, or
// another tenant's, wraps ErrNotFound; one id may not manage is a
// *ForbiddenError.
func (e *Engine) RevokeGrant(ctx context.Context, id Identity, grantID string) (*cstype.Grant, error) {
	if err := mayAct(id, ActRevokeGrant); err != nil {
		return nil, err
	}
	if !validID(grantID) {
		return nil, fmt.Errorf("revoke grant %q: %w", grantID, ErrNotFound)
	}
	// The store has no lookup by id alone; a tenant's grants are few.
	gs, err := e.store.ListGrants(ctx, &store.ListGrantsParams{Tenant: id.Tenant})
	if err != nil {
		return nil, fmt.Errorf("revoke grant: %w", err)
	}
	var g *cstype.Grant
	for _, x := range gs {
		if x.ID == grantID {
			g = x
		}
	}
	switch {
	case g == nil:
		return nil, fmt.Errorf("revoke grant %q: %w", grantID, ErrNotFound)
	case !mayManageGrant(id, g):
		return nil, &ForbiddenError{Actor: id.Actor, Reason: "only the grant's requester, its approver or an operator may revoke it"}
	}
	g, err = e.store.RevokeGrant(ctx, &store.RevokeGrantParams{Tenant: id.Tenant, ID: grantID, Actor: id.Actor})
	if err != nil {
		return nil, fmt.Errorf("revoke grant: %w", err)
	}
	return g, nil
}

// Permissions is what an identity may do with a proposal as it stands, for
// a surface to offer only the actions that would be taken. Each action is
// still checked when it is asked for.
type Permissions struct {
	// Approve and Reject: the proposal is pending and id may decide it
	// this way through the channel asked about.
	Approve, Reject bool
	// Remember lists the scopes an approval by id may remember (only when
	// Approve): the rule's, less run for a call made outside a run.
	Remember []Scope
	// Cancel: the proposal is pending and id requested it.
	Cancel bool
	// Resolve: the outcome is uncertain and id is an operator.
	Resolve bool
	// StepUp: an approval needs a fresh passkey assertion (the rule's
	// step_up). A surface that cannot carry one (an MCP elicitation, a
	// chat button) offers no approval and links to ProposalURL instead.
	StepUp bool
}

// Permissions says what id may do with p through channel via ("web",
// "api", …). p is a proposal id may see, as the engine returned it.
func (e *Engine) Permissions(ctx context.Context, id Identity, p *cstype.Proposal, via string) Permissions {
	var out Permissions
	if !canSee(id, p) {
		return out
	}
	if p.Status == cstype.StatusPending {
		hook := e.canDecideHook(p)
		out.Approve = mayDecide(ctx, p, id, Approve, via, hook) == nil
		if out.Approve {
			out.Remember = rememberScopes(p)
			out.StepUp = needsStepUp(p, Approve)
		}
		out.Reject = mayDecide(ctx, p, id, Reject, via, hook) == nil
		out.Cancel = p.Requester == id.Actor
	}
	out.Resolve = (p.Status == cstype.StatusReconciling || p.Status == cstype.StatusUnknown) &&
		isOperator(id)
	return out
}

// canDecideHook is the CanDecide hook of the rule p was made under (its
// match and when) as the policy stands today, or else of the most specific
// rule for its action, if it has one.
func (e *Engine) canDecideHook(p *cstype.Proposal) func(context.Context, Identity, *cstype.Proposal) bool {
	if r := e.policy.ruleFor(p.Action, p.RuleMatch, p.RuleWhen); r != nil {
		return r.CanDecide
	}
	return nil
}

// ProposalConversation is the part of a proposal's thread that led to its
// call, as one reader may read it (mayReadProposalConversation).
type ProposalConversation struct {
	// Messages are the thread's messages up to and including the call,
	// oldest first: the last of them, as many as were asked for.
	Messages []ConversationMessage
	// Earlier is how many messages before these were left out.
	Earlier int
	// Call reports whether one of Messages made the proposal's call (a
	// built-in run's assistant message). An external agent's call has no
	// message of its own: the conversation ends with what came before it.
	Call bool
}

// ConversationMessage is one message of a proposal's conversation.
type ConversationMessage struct {
	ID string
	// Role is "user", "assistant" or "tool" (docs/api.md, Messages and
	// runs).
	Role string
	// Sender is the person who wrote a user message.
	Sender string
	// Text is the message's text as it was written: a surface shows it as
	// plain text. "" when Withheld.
	Text string
	// Calls names the actions (or client tools) an assistant message
	// called. Their inputs are left out: each call's input is its own
	// proposal's, for whoever may see that one.
	Calls []string
	// Call marks the message that made the proposal's call.
	Call bool
	// Withheld marks a message about another proposal of the thread (a
	// call's result, an outcome) that the reader may not see: its text is
	// left out.
	Withheld bool
	At       time.Time
}

// ProposalConversation returns the conversation that led to a proposal's
// call: its thread's messages up to and including the call, oldest first,
// at most the last last of them (last <= 0: all). Whoever may see the
// proposal may read it; nothing after the call and nothing of another
// thread is in it, and a message about another proposal the reader may not
// see is withheld (authority.go). Another tenant's proposal, or one id may
// not see, is a *ForbiddenError; an unknown one wraps ErrNotFound. A thread
// deleted since, or started again after the call, leaves it empty.
func (e *Engine) ProposalConversation(ctx context.Context, id Identity, proposalID string, last int) (*ProposalConversation, error) {
	p, err := e.proposalOfTenant(ctx, id, proposalID)
	if err != nil {
		return nil, err
	}
	if !mayReadProposalConversation(id, p) {
		return nil, forbidden(id, proposalID, "you may not see this proposal")
	}
	out := &ProposalConversation{}
	t, err := e.thread(ctx, id, p.ThreadID)
	switch {
	case errors.Is(err, ErrNotFound):
		return out, nil
	case err != nil:
		return nil, err
	case t.CreatedAt.After(p.CreatedAt):
		// The thread of that id was deleted and started again since: none
		// of this one led to the call.
		return out, nil
	}
	msgs, err := e.store.ListMessages(ctx, &store.ListMessagesParams{Tenant: id.Tenant, ThreadID: t.ID})
	switch {
	case errors.Is(err, cstype.ErrNotFound): // deleted meanwhile
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("list messages: %w", err)
	}
	runs, err := e.store.ListRuns(ctx, &store.ListRunsParams{Tenant: id.Tenant, ThreadID: t.ID})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	msgs, call := upToCall(heldOutcomes(msgs, runs), p)
	if last > 0 && len(msgs) > last {
		out.Earlier = len(msgs) - last
		msgs = msgs[out.Earlier:]
		call -= out.Earlier
	}
	readable := map[string]bool{} // other proposal id → whether id may read about it
	for i, m := range msgs {
		cm := ConversationMessage{ID: m.ID, Role: m.Role, Sender: m.Sender, Text: m.Text, Call: i == call, At: m.CreatedAt}
		for _, c := range m.ToolCalls {
			cm.Calls = append(cm.Calls, c.Action)
		}
		if other := m.ProposalID; other != "" && other != p.ID {
			ok, known := readable[other]
			if !known {
				ok, err = e.readableAbout(ctx, id, t, other)
				if err != nil {
					return nil, err
				}
				readable[other] = ok
			}
			if !ok {
				cm.Text, cm.Withheld = "", true
			}
		}
		out.Call = out.Call || cm.Call
		out.Messages = append(out.Messages, cm)
	}
	return out, nil
}

// readableAbout reads the proposal a message of t is about and asks
// mayReadAbout; a proposal no longer there is read as none.
func (e *Engine) readableAbout(ctx context.Context, id Identity, t *cstype.Thread, proposalID string) (bool, error) {
	if mayReadThread(id, t) {
		return true, nil
	}
	other, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: id.Tenant, ID: proposalID})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		other = nil
	case err != nil:
		return false, fmt.Errorf("get proposal: %w", err)
	}
	return mayReadAbout(id, t, other), nil
}

// Turn is where a proposal stands for one identity: whether it waits for
// that identity's decision, the decision it gave, and what the proposal
// still needs. A surface offers an approval only when Yours and a
// rejection only when Reject: once id decided, nothing more is offered
// (Decide still answers a second decision as it always does).
type Turn struct {
	// Yours: the proposal is pending and not past its deadline, id may
	// approve it through the channel asked about, and has not decided it
	// yet (waitsFor in authority.go). It waits for id.
	Yours bool
	// Reject: likewise, id may reject it (mayReject in authority.go),
	// also where it may not approve it (its own request, when the rule
	// forbids self-approval).
	Reject bool
	// Decision is id's own latest decision on the proposal, nil when it
	// has none.
	Decision *RecordedDecision
	// Needed is how many more approvals the proposal needs: 0 unless it is
	// pending.
	Needed int
	// From names who may still give them, as the proposal's approvers do
	// (role:finance, actor:bob, requester): each approver but an actor who
	// approved already (stillApproving in authority.go). Empty unless it
	// is pending.
	From []string
}

// RecordedDecision is one decision a proposal holds: who, which verdict,
// via which channel, when, why.
type RecordedDecision = cstype.Decision

// Turn says where p stands for id through channel via ("web", "api", …).
// p is a proposal id may see, as the engine returned it; for any other the
// answer is the zero Turn.
func (e *Engine) Turn(ctx context.Context, id Identity, p *cstype.Proposal, via string) Turn {
	var out Turn
	if !canSee(id, p) {
		return out
	}
	out.Decision = decisionOf(p, id)
	if p.Status == cstype.StatusPending {
		now, hook := e.clock(), e.canDecideHook(p)
		out.Yours = waitsFor(ctx, p, id, via, now, hook)
		out.Reject = mayReject(ctx, p, id, via, now, hook)
		out.Needed = max(max(p.Quorum, 1)-p.Approvals(), 0)
		out.From = stillApproving(p)
	}
	return out
}

// WaitingScan bounds how many pending proposals one WaitingFor looks
// through.
const WaitingScan = 1000

// WaitingFor counts the pending proposals that wait for id's decision
// through channel via (Turn.Yours), up to limit. more reports that there
// may be others: more than limit wait, or id may see more pending proposals
// than WaitingScan and those beyond were not looked at. An agent
// credential decides nothing: nothing waits for it.
func (e *Engine) WaitingFor(ctx context.Context, id Identity, via string, limit int) (n int, more bool, err error) {
	if mayAct(id, ActDecide) != nil {
		return 0, false, nil
	}
	now := e.clock()
	params := ListParams{Statuses: []cstype.Status{cstype.StatusPending}, Limit: 200}
	for seen := 0; ; {
		page, err := e.List(ctx, id, params)
		if err != nil {
			return 0, false, err
		}
		for _, p := range page.Proposals {
			if waitsFor(ctx, p, id, via, now, e.canDecideHook(p)) {
				if n == limit {
					return n, true, nil
				}
				n++
			}
		}
		seen += len(page.Proposals)
		switch {
		case page.Next == "":
			return n, false, nil
		case seen >= WaitingScan:
			return n, true, nil
		}
		params.After = page.Next
	}
}
