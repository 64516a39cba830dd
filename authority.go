package countersign

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Who may do what, by the kind of credential that asks (docs/api.md Part 3,
// "Credentials: humans and agents"; docs/design.md §18).
//
// A credential is a person's or an agent's, fixed by the credential like its
// tenant and roles. An agent credential acts for its actor: it calls
// actions, reads the threads its actor owns and the proposals in them, and
// takes, renews and settles caller-executed leases. It never does anything
// shaped like a decision (the Acts below), on any channel, and never sees
// what its actor sees as an approver or an operator. Every surface asks the
// engine, which asks mayAct before it looks anything up, so that an agent
// learns nothing from a refusal and nothing is stored.

// CredentialKind is the kind of credential an Identity comes from.
type CredentialKind string

// The kinds of credential. The zero value is a person's: a configured key
// without a kind is human (serve warns of each), as is an Identity built
// without one in Go.
const (
	KindHuman CredentialKind = "human"
	KindAgent CredentialKind = "agent"
)

// Valid reports whether k is a kind a credential may carry: human, agent,
// or empty (human).
func (k CredentialKind) Valid() bool { return k == "" || k == KindHuman || k == KindAgent }

// ParseCredentialKind reads a configured or claimed kind, exactly "human" or
// "agent".
func ParseCredentialKind(s string) (CredentialKind, error) {
	switch k := CredentialKind(s); k {
	case KindHuman, KindAgent:
		return k, nil
	}
	return "", fmt.Errorf("credential kind %q: want human or agent", s)
}

// IsHuman reports whether id is a person's credential. Anything but human
// or empty (human) is refused what only a person may do: the rule fails
// closed on a kind it does not know.
func (id Identity) IsHuman() bool { return id.Kind == "" || id.Kind == KindHuman }

// KindOrHuman is id's kind with the empty kind read as human: what
// proposals, decisions and audit events record.
func (id Identity) KindOrHuman() CredentialKind {
	if id.Kind == "" {
		return KindHuman
	}
	return id.Kind
}

// Act is something only a person may do.
type Act string

// The decision-shaped acts (docs/api.md Part 3): an agent credential gets an
// *AgentCannotDecideError for each, before anything is looked up.
const (
	ActDecide            Act = "decide a proposal"
	ActPostMessage       Act = "post a user message"
	ActResume            Act = "resume an interrupt"
	ActAnswerElicitation Act = "answer an elicitation"
	ActSignIn            Act = "sign in to the inbox"
	ActRegisterPasskey   Act = "register a passkey"
	ActRevokeGrant       Act = "revoke a grant"
	ActOperate           Act = "act as an operator"
)

// ErrAgentCannotDecide: an agent credential asked for something only a
// person may do (*AgentCannotDecideError). It also matches ErrForbidden.
var ErrAgentCannotDecide = errors.New("an agent credential cannot decide")

// AgentCannotDecideError refuses a decision-shaped act to an agent
// credential (docs/api.md: 403 AGENT_CANNOT_DECIDE). It names only what the
// caller sent.
type AgentCannotDecideError struct {
	Actor string
	Act   Act
}

func (e *AgentCannotDecideError) Error() string {
	return fmt.Sprintf("an agent credential (acting for %s) may not %s: only a person decides", e.Actor, e.Act)
}

// Is matches ErrAgentCannotDecide and ErrForbidden.
func (e *AgentCannotDecideError) Is(target error) bool {
	return target == ErrAgentCannotDecide || target == ErrForbidden
}

// mayAct is the one rule on credential kinds: only a person does act.
func mayAct(id Identity, act Act) error {
	if id.IsHuman() {
		return nil
	}
	return &AgentCannotDecideError{Actor: id.Actor, Act: act}
}

// MayAct tells a surface, before it does anything else, whether id may do
// act: nil, or an *AgentCannotDecideError. The engine's own methods check
// it too; a surface asks first where it would otherwise look something up
// or offer a choice (an AG-UI resume, an MCP elicitation, an inbox
// sign-in).
func (e *Engine) MayAct(id Identity, act Act) error { return mayAct(id, act) }

// isOperator reports whether id holds the operator role as a person: an
// agent credential never acts as an operator, whatever its actor's roles.
func isOperator(id Identity) bool {
	return id.IsHuman() && slices.Contains(id.Roles, RoleOperator)
}

// requireOperator refuses anyone but a person with the operator role:
// an agent credential with *AgentCannotDecideError, anyone else with a
// *ForbiddenError giving why.
func requireOperator(id Identity, proposalID, why string) error {
	if err := mayAct(id, ActOperate); err != nil {
		return err
	}
	if !slices.Contains(id.Roles, RoleOperator) {
		return &ForbiddenError{ProposalID: proposalID, Actor: id.Actor, Reason: why}
	}
	return nil
}

// ErrInvalidRemember: an approval asked to remember a scope its proposal
// cannot have (*InvalidRememberError).
var ErrInvalidRemember = errors.New("invalid remember")

// InvalidRememberError refuses a remember scope the rule does not allow, or
// "run" on a proposal made outside a run (a run grant would then cover every
// call of the thread made outside a run). Nothing is decided.
type InvalidRememberError struct {
	ProposalID string
	Scope      Scope
	Reason     string
}

func (e *InvalidRememberError) Error() string {
	return fmt.Sprintf("remember %q on proposal %s: %s", e.Scope, e.ProposalID, e.Reason)
}

// Is matches ErrInvalidRemember.
func (e *InvalidRememberError) Is(target error) bool { return target == ErrInvalidRemember }

// rememberScopes are the scopes an approval of p may remember: the rule's,
// less "run" when p was made outside a run.
func rememberScopes(p *cstype.Proposal) []Scope {
	if p.StepUp != "" {
		return nil
	}
	var out []Scope
	for _, sc := range p.RememberScopes {
		if sc == ScopeRun && p.RunID == "" {
			continue
		}
		out = append(out, sc)
	}
	return out
}

// mayRemember reports whether an approval of p may remember scope.
func mayRemember(p *cstype.Proposal, scope Scope) error {
	switch {
	case p.StepUp != "":
		return &InvalidRememberError{ProposalID: p.ID, Scope: scope, Reason: "the rule asks for step-up: every approval needs its own passkey, so none is remembered"}
	case !slices.Contains(p.RememberScopes, scope):
		return &InvalidRememberError{ProposalID: p.ID, Scope: scope, Reason: "the rule does not allow remembering for a " + string(scope)}
	case scope == ScopeRun && p.RunID == "":
		return &InvalidRememberError{ProposalID: p.ID, Scope: scope, Reason: "the call was made outside a run: there is no run to remember it for"}
	}
	return nil
}

// requesterIdentity is who made p's call, as its execution acts: the
// requester with the roles and kind recorded on the proposal.
func requesterIdentity(p *cstype.Proposal) Identity {
	return Identity{Tenant: p.Tenant, Actor: p.Requester, Roles: p.RequesterRoles, Kind: CredentialKind(p.RequesterKind)}
}

// The conversation that led to a proposal's call (Engine.ProposalConversation).
//
// Whoever may see a proposal may read its thread up to the call: what the
// person asked and what the agent said before it called, so that an
// approver decides knowing why. Nothing after the call (the call's own
// result, later messages), and nothing of another thread. Messages about
// another proposal of the thread (a call's result, an outcome) are the
// thread's owner's to read: another reader gets them withheld, unless it
// may see that proposal too.

// mayReadProposalConversation reports whether id may read the conversation
// that led to p's call: whoever may see p (canSee).
func mayReadProposalConversation(id Identity, p *cstype.Proposal) bool { return canSee(id, p) }

// Where a proposal was announced (Engine.Announcements): whoever may see
// the proposal may see where it was announced (which channel, to whom,
// when, how far it got); the announcements carry nothing a reader of the
// proposal could not learn from its approvers and decisions, and never a
// nonce, Slack id or link.

// mayReadAnnouncements reports whether id may read where p was announced:
// whoever may see p (canSee).
func mayReadAnnouncements(id Identity, p *cstype.Proposal) bool { return canSee(id, p) }

// mayReadAbout reports whether a reader of p's conversation in thread t may
// read a message about other, another proposal of the thread (nil: none
// is left): the thread's owner, and whoever may see other.
func mayReadAbout(id Identity, t *cstype.Thread, other *cstype.Proposal) bool {
	return mayReadThread(id, t) || (other != nil && canSee(id, other))
}

// upToCall is the part of msgs (a thread's messages as a reader sees them,
// oldest first) that led to p's call, and the index in it of the message
// that made the call (-1 when none did: an external agent's call has no
// message of its own). A built-in run's call is the assistant message that
// holds its tool call: everything up to and including it. Any other call
// takes what was written up to the proposal's creation, less the call's
// own result.
func upToCall(msgs []*cstype.Message, p *cstype.Proposal) ([]*cstype.Message, int) {
	if p.RunID != "" {
		for i, m := range msgs {
			if m.Role == cstype.RoleAssistant && m.RunID == p.RunID && slices.ContainsFunc(m.ToolCalls, func(c cstype.ToolCall) bool {
				// A run parked before tool call ids were the model's own
				// recorded its call as "RUN_ID/MODEL_ID".
				return c.ID == p.ToolCallID || p.RunID+"/"+c.ID == p.ToolCallID
			}) {
				return msgs[:i+1], i
			}
		}
	}
	var out []*cstype.Message
	for _, m := range msgs {
		if !m.CreatedAt.After(p.CreatedAt) && m.ProposalID != p.ID {
			out = append(out, m)
		}
	}
	return out, -1
}

// What waits for whom (Engine.Turn, Engine.WaitingFor).

// decisionOf is id's own latest decision on p, nil when it has none.
func decisionOf(p *cstype.Proposal, id Identity) *cstype.Decision {
	for i := len(p.Decisions) - 1; i >= 0; i-- {
		if d := p.Decisions[i]; d.Actor == id.Actor {
			return &d
		}
	}
	return nil
}

// waitsFor reports whether p waits for id's decision: p is pending and not
// past its deadline, id may approve it through via (mayDecide, the rule's
// CanDecide hook included), and id has not decided it yet. A proposal id
// may only reject (its own, when the rule forbids self-approval) does not
// wait for id: no decision of id's can approve it.
func waitsFor(ctx context.Context, p *cstype.Proposal, id Identity, via string, now time.Time,
	hook func(context.Context, Identity, *cstype.Proposal) bool) bool {
	if p.Status != cstype.StatusPending || store.Due(p, now) || decisionOf(p, id) != nil {
		return false
	}
	return mayDecide(ctx, p, id, Approve, via, hook) == nil
}

// Announcees returns the candidates p may be announced to through the
// approver channel via ("slack", "email"): those whose decision it waits
// for there now (waitsFor: pending, not past its deadline, an approver the
// rule accepts through via, undecided), each of p's tenant, a person's
// credential, and never p's requester: an agent acting for the requester
// may read their mail and chat, so a button or link in reach of the
// requester is in reach of the agent. The channels call this and send to
// no one else; the order of candidates is kept.
func (e *Engine) Announcees(ctx context.Context, p *cstype.Proposal, via string, candidates []Identity) []Identity {
	if p == nil {
		return nil
	}
	now, hook := e.clock(), e.canDecideHook(p)
	var out []Identity
	for _, c := range candidates {
		if c.Kind != KindHuman || c.Tenant != p.Tenant || c.Actor == p.Requester {
			continue
		}
		if waitsFor(ctx, p, c, via, now, hook) {
			out = append(out, c)
		}
	}
	return out
}

// emailLinkVerdicts lists the verdicts id is mailed a link for about p:
// none unless p may be announced to id by email (Announcees), then an
// approval while p waits for id's decision and a rejection while id may
// reject it. A link is minted for nothing the engine would refuse id now.
func emailLinkVerdicts(ctx context.Context, e *Engine, p *cstype.Proposal, id Identity, now time.Time) []Verdict {
	if len(e.Announcees(ctx, p, ViaEmail, []Identity{id})) == 0 {
		return nil
	}
	hook := e.canDecideHook(p)
	var out []Verdict
	if waitsFor(ctx, p, id, ViaEmail, now, hook) {
		out = append(out, Approve)
	}
	if mayReject(ctx, p, id, ViaEmail, now, hook) {
		out = append(out, Reject)
	}
	return out
}

// mayDecideByEmailLink is mayDecide through email, checked before a link
// is spent: an approval of a proposal whose rule needs a passkey step-up
// is refused too, since no assertion travels by email (the page sends the
// approver to the inbox). Rejections need none.
func mayDecideByEmailLink(ctx context.Context, p *cstype.Proposal, id Identity, verdict Verdict,
	hook func(context.Context, Identity, *cstype.Proposal) bool) error {
	if err := mayDecide(ctx, p, id, verdict, ViaEmail, hook); err != nil {
		return err
	}
	if verdict == Approve && p.StepUp != "" {
		return forbidden(id, p.ID, "approving this proposal needs a passkey: approve it in the inbox")
	}
	return nil
}

// mayReject reports whether a surface offers id the rejection of p: p is
// pending and not past its deadline, id may reject it through via, and has
// not decided it yet.
func mayReject(ctx context.Context, p *cstype.Proposal, id Identity, via string, now time.Time,
	hook func(context.Context, Identity, *cstype.Proposal) bool) bool {
	if p.Status != cstype.StatusPending || store.Due(p, now) || decisionOf(p, id) != nil {
		return false
	}
	return mayDecide(ctx, p, id, Reject, via, hook) == nil
}

// stillApproving lists who may still give pending p an approval that counts
// toward its quorum, in p's approvers' own forms (role:NAME, actor:NAME,
// requester): each of them but an actor who approved already, and the
// requester where the rule forbids self-approval. A role stays: another
// holder of it may approve.
func stillApproving(p *cstype.Proposal) []string {
	approved := map[string]bool{}
	for _, d := range p.Decisions {
		if d.Decision == cstype.VerdictApproved {
			approved[d.Actor] = true
		}
	}
	var out []string
	for _, a := range p.Approvers {
		actor := ""
		switch {
		case a == ApproverRequester:
			actor = p.Requester
		case strings.HasPrefix(a, approverActor):
			actor = a[len(approverActor):]
		}
		if actor != "" && (approved[actor] || (p.ForbidSelfApproval && actor == p.Requester)) {
			continue
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Runs, resumes and cancels (issue 31): who may follow a run, resume an
// interrupt, and cancel a proposal. Surfaces used to restate these; they
// are the engine's now, answered by ThreadRunState and WatchThreadRun
// (runhost.go), Resume (resume.go) and Cancel (decide.go).

// mayFollowRun: a run's state, its messages as they are written and its
// changes are its thread's, and only the thread's owner reads a thread
// (mayReadThread), of either kind of credential: an agent credential that
// delivered client-tool results follows the run they start. Anyone else
// is refused, however they stand to the run's proposals.
func mayFollowRun(id Identity, t *cstype.Thread) error {
	if !mayReadThread(id, t) {
		return &ForbiddenError{Actor: id.Actor, Reason: "only the thread's owner may follow its runs"}
	}
	return nil
}

// mayCancel: only a proposal's requester withdraws it (docs/api.md,
// Decisions), of either kind of credential; cancelling is not a decision.
func mayCancel(id Identity, p *cstype.Proposal) error {
	if !isRequester(id, p) {
		return &ForbiddenError{ProposalID: p.ID, Actor: id.Actor, Reason: "only the requester may cancel"}
	}
	return nil
}

// isRequester reports whether id made p's call: p is of id's tenant and
// id's actor is its requester, whichever kind of credential id is. What a
// requester follows of its own calls only (an MCP task, Engine.OwnProposal)
// is shown to nobody else, approvers and operators included.
func isRequester(id Identity, p *cstype.Proposal) bool {
	return p.Tenant == id.Tenant && p.Requester == id.Actor
}

// cancelStatus is a permitted cancel's answer: applied when it withdrew
// the proposal, unchanged when the proposal was cancelled already (the
// requester asking again is told nothing changed, not refused).
func cancelStatus(tr *store.TransitionResult) DecideStatus {
	if !tr.Changed && tr.Proposal.Status == cstype.StatusCancelled {
		return DecideUnchanged
	}
	return DecideApplied
}

// mayResume: an interrupt is a proposal a run of a thread waits on, and
// only the thread's owner resumes it (docs/api.md, AG-UI: "Only the
// thread's owner runs on it, resumes included"), as a person (ActResume,
// asked before anything is looked up). Whether the resume decides is then
// Decide's rule (mayDecide), or resumeStands.
func mayResume(id Identity, t *cstype.Thread, p *cstype.Proposal) error {
	if p.RunID == "" {
		return fmt.Errorf("%w: proposal %s was made outside a run: it is no interrupt to resume", ErrInvalidCall, p.ID)
	}
	if !mayReadThread(id, t) {
		return &ForbiddenError{ProposalID: p.ID, Actor: id.Actor, Reason: "only the thread's owner may resume its runs"}
	}
	return nil
}

// resumeStands: a thread's owner who may not decide an interrupt's
// proposal (decideErr is Decide's *ForbiddenError) and resumes it once it
// is past pending — decided by someone who may, or expired — takes the
// outcome that stands: nothing is decided, and the owner follows the run
// from the interrupt on (docs/api.md, AG-UI: "A proposal decided elsewhere
// meanwhile: the resume takes the decision that stands"). While it is
// pending the refusal stands instead.
func resumeStands(decideErr error, p *cstype.Proposal) bool {
	var forbidden *ForbiddenError
	return errors.As(decideErr, &forbidden) && p.Status != cstype.StatusPending
}

// ---------------------------------------------------------------------------
// Step-up (issue 34: docs/api.md Part 3, "Step-up for high-risk rules";
// stepup.go does the ceremonies, these decide who may).

// needsStepUp reports whether a decision of p by verdict must carry a fresh
// passkey assertion: an approval of a pending proposal whose rule asks for
// step-up. Rejections need none, and an approval of a proposal past pending
// approves nothing (the store answers it unchanged or conflict).
func needsStepUp(p *cstype.Proposal, verdict cstype.Verdict) bool {
	return p.StepUp != "" && verdict == cstype.VerdictApproved && p.Status == cstype.StatusPending
}

// mayStepUp: a step-up challenge is made only for a proposal that needs
// one, pending, to someone who may approve it now through via and has not
// decided it yet (waitsFor): nobody else has anything to sign.
func mayStepUp(ctx context.Context, p *cstype.Proposal, id Identity, via string, now time.Time,
	hook func(context.Context, Identity, *cstype.Proposal) bool) error {
	// Who may approve first: nobody else learns what the rule asks.
	if err := mayDecide(ctx, p, id, Approve, via, hook); err != nil {
		return err
	}
	if p.StepUp == "" {
		return fmt.Errorf("%w: proposal %s needs no step-up", ErrInvalidCall, p.ID)
	}
	if !waitsFor(ctx, p, id, via, now, hook) {
		return &ForbiddenError{ProposalID: p.ID, Actor: id.Actor, Reason: "the proposal does not wait for your approval"}
	}
	return nil
}

// grantMayApprove: a step-up rule neither makes nor honours grants: a
// remembered approval carries no assertion.
func grantMayApprove(r *Rule) bool { return r == nil || r.StepUp == "" }

// mayEnroll: only an operator, as a person, makes an enrollment link, for
// an actor of the operator's own tenant.
func mayEnroll(id Identity) error {
	return requireOperator(id, "", "making a passkey enrollment link needs the operator role")
}

// mayUseEnrollment: an enrollment link enrols a passkey only for the
// person it was made for, signed in as themselves, before it expires and
// once. The link alone is not enough: whoever reads a person's mail (their
// agent among them) must not enrol a passkey in their name.
func mayUseEnrollment(id Identity, en *store.PasskeyEnrollment, now time.Time) error {
	switch {
	case en.Tenant != id.Tenant || en.Actor != id.Actor:
		return &PasskeyLinkError{Reason: "this link was made for someone else: sign in as the person it names"}
	case en.SpentAt != nil:
		return &PasskeyLinkError{Reason: "this link was used already: ask an operator for a new one"}
	case !now.Before(en.ExpiresAt):
		return &PasskeyLinkError{Reason: "this link has expired: ask an operator for a new one"}
	}
	return nil
}

// ThreadOrigin says who named a call's thread. Thread ids beginning with a
// reserved prefix (ReservedThread) are the MCP gateway's: it derives them
// from a session or a credential, so that whoever holds those calls'
// proposals is the credential that made them. Anything a client names
// itself (POST /v1/calls, a message, an AG-UI input, an MCP _meta thread)
// is ThreadNamed.
type ThreadOrigin int

const (
	// ThreadNamed: the client named the thread (the zero value).
	ThreadNamed ThreadOrigin = iota
	// ThreadMCPGateway: the MCP gateway derived the thread from the
	// caller's session (mcp_<session id>) or credential (mcp:<fingerprint>).
	ThreadMCPGateway
)

// reservedThreadPrefixes begin the thread ids only the MCP gateway makes
// (docs/api.md Part 3, "MCP 2026-07-28").
var reservedThreadPrefixes = []string{"mcp:", "mcp_"}

// ReservedThread reports whether threadID begins with a prefix reserved for
// the MCP gateway's threads.
func ReservedThread(threadID string) bool {
	for _, p := range reservedThreadPrefixes {
		if strings.HasPrefix(threadID, p) {
			return true
		}
	}
	return false
}

// mayNameThread is the rule on reserved thread ids: only the gateway, which
// derives them, uses them; a thread a client names with a reserved prefix
// is refused, before anything is looked up or stored, so that nobody can
// make calls in (or squat) a thread another credential's MCP calls will
// use. Any other id is left to the owner check.
func mayNameThread(id Identity, threadID string, origin ThreadOrigin) error {
	if origin == ThreadMCPGateway || !ReservedThread(threadID) {
		return nil
	}
	return &ForbiddenError{Actor: id.Actor, Reason: "thread ids beginning mcp: or mcp_ are reserved for the MCP gateway"}
}

// MayNameThread tells a surface whether id may name threadID, coming from
// origin: nil, or a *ForbiddenError. Call and PostMessage check it too; the
// MCP gateway asks first about a thread a request's _meta names, so that
// the refusal is a JSON-RPC error and nothing is stored.
func (e *Engine) MayNameThread(id Identity, threadID string, origin ThreadOrigin) error {
	return mayNameThread(id, threadID, origin)
}
