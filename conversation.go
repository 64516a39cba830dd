package countersign

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/textdecision"
)

// MaxMessageText bounds a posted message's text (docs/api.md: 1..32 KiB).
const MaxMessageText = 32 << 10

// maxDecisionCandidates bounds the thread's proposals a text decision
// looks through: the newest ones.
const maxDecisionCandidates = 200

// ErrThreadBusy matches a *ThreadBusyError.
var ErrThreadBusy = errors.New("thread busy")

// ThreadBusyError refuses a message while a run holds the thread (docs/api.md:
// 409 THREAD_BUSY). A text decision is never refused for it.
type ThreadBusyError struct {
	ThreadID string
	RunID    string
}

func (e *ThreadBusyError) Error() string {
	return fmt.Sprintf("thread %s is busy: run %s holds it", e.ThreadID, e.RunID)
}

// Is makes errors.Is(err, ErrThreadBusy) hold.
func (e *ThreadBusyError) Is(target error) bool { return target == ErrThreadBusy }

// ErrMessageIDTaken matches a *MessageIDTakenError.
var ErrMessageIDTaken = errors.New("message id taken")

// MessageIDTakenError refuses a message whose id its thread already holds
// (docs/api.md Part 3: 409 MESSAGE_ID_TAKEN). Message ids are keyed by tenant,
// thread and id, so it says nothing of any other thread: the same id there
// is simply another message. Nothing was stored or decided.
type MessageIDTakenError struct {
	ThreadID  string
	MessageID string
}

func (e *MessageIDTakenError) Error() string {
	return fmt.Sprintf("thread %s already holds a message with id %s", e.ThreadID, e.MessageID)
}

// Is makes errors.Is(err, ErrMessageIDTaken) hold.
func (e *MessageIDTakenError) Is(target error) bool { return target == ErrMessageIDTaken }

// MaxMessageIDLen bounds the id a client chooses for its message, in
// characters (docs/api.md Part 3: 1..128).
const MaxMessageIDLen = 128

// validMessageID reports whether s may be a client's message id: 1 to
// MaxMessageIDLen characters of UTF-8, none of them a control character
// (an id is echoed in JSON, event streams and logs, and PostgreSQL cannot
// store a NUL).
func validMessageID(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxMessageIDLen {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// Message is a human's message to a thread.
type Message struct {
	Identity Identity
	ThreadID string
	// ID, when set, is the message's id (a front end's own, as AG-UI
	// sends them): 1 to MaxMessageIDLen characters, no control character.
	// By default the engine makes one. An id the thread holds already is
	// a *MessageIDTakenError, and nothing is stored or decided.
	ID   string
	Text string
	// Agent, when set, starts a run of that agent on the message (unless
	// the message is a text decision). Empty: the message is stored for an
	// external agent to read.
	Agent string
	// ClientTools are tools the caller executes (clienttools.go), offered
	// to the run's model besides the agent's actions. They need Agent.
	ClientTools []cstype.ClientTool
	// ToolResults answer the client tool calls the thread's latest run left
	// pending; they are stored before Text, in the same write, and Text may
	// then be empty. A message with results is never a text decision.
	ToolResults []ToolResult
}

// MessageAnswer is what a message came to: a text decision (Decision, or
// Pending when it could mean several proposals), or a stored message and
// the run it started.
type MessageAnswer struct {
	Thread *cstype.Thread
	// Decision is the decision a text decision made.
	Decision *DecideResult
	// Pending lists the proposals an ambiguous text decision could mean;
	// nothing was decided.
	Pending []string
	// Reply is the answer to a text decision, in the configured language.
	Reply string
	// Message is the stored message (nil for an ambiguous decision, and
	// when only tool results were posted).
	Message *cstype.Message
	// Results are the stored tool results, in order.
	Results []*cstype.Message
	// Run is the run the message started, if any.
	Run *cstype.Run
}

// IsDecision reports whether the message was read as a text decision.
func (a *MessageAnswer) IsDecision() bool { return a.Decision != nil || a.Pending != nil }

// PostMessage takes a human's message to a thread (docs/api.md, Messages and
// runs). A message that is exactly a decision command (textdecision) is a
// decision by its sender, via "text", checked like any other: it may come
// from someone other than the thread's owner (an approver answering in the
// conversation) and is taken while a run holds the thread. Anything else
// is the owner's only (*ForbiddenError otherwise), is refused while a run
// holds the thread (*ThreadBusyError), and with Agent starts a run.
func (e *Engine) PostMessage(ctx context.Context, m *Message) (*MessageAnswer, error) {
	switch {
	case m.Identity.Tenant == "" || m.Identity.Actor == "":
		return nil, fmt.Errorf("%w: identity needs a tenant and an actor", ErrInvalidCall)
	case (m.Text == "" && len(m.ToolResults) == 0) || len(m.Text) > MaxMessageText:
		return nil, fmt.Errorf("%w: text: must be 1 to %d bytes", ErrInvalidCall, MaxMessageText)
	case len(m.ClientTools) > 0 && m.Agent == "":
		return nil, fmt.Errorf("%w: client tools are offered to a run: name its agent", ErrInvalidCall)
	case !utf8.ValidString(m.Text):
		return nil, fmt.Errorf("%w: text: must be UTF-8", ErrInvalidCall)
	case strings.ContainsRune(m.Text, 0):
		// Every store would not keep it alike (PostgreSQL's text refuses
		// it): refused here, for all of them.
		return nil, fmt.Errorf("%w: text: must not contain NUL", ErrInvalidCall)
	case m.ID != "" && !validMessageID(m.ID):
		return nil, fmt.Errorf("%w: id: must be 1 to %d characters of UTF-8, no control characters", ErrInvalidCall, MaxMessageIDLen)
	}
	// A thread id reserved for the MCP gateway is never a client's to
	// name, in a message either.
	if err := mayNameThread(m.Identity, m.ThreadID, ThreadNamed); err != nil {
		return nil, err
	}
	// A user message (or a text decision) is a person's; an agent
	// credential may only deliver client-tool results. Refused before the
	// thread is looked up.
	if m.Text != "" {
		if err := mayAct(m.Identity, ActPostMessage); err != nil {
			return nil, err
		}
	}
	t, err := e.thread(ctx, m.Identity, m.ThreadID)
	switch {
	case errors.Is(err, ErrNotFound) && validID(m.ThreadID):
		t = nil // a new thread: nothing in it to decide
	case err != nil:
		return nil, err
	}
	if err := e.checkClientTools(m.ClientTools); err != nil {
		return nil, err
	}
	if t != nil && len(m.ToolResults) == 0 {
		ans, err := e.textDecision(ctx, m, t)
		if ans != nil || err != nil {
			return ans, err
		}
	}
	if t != nil && !mayReadThread(m.Identity, t) {
		return nil, &ForbiddenError{Actor: m.Identity.Actor, Reason: e.notOwnersMessage()}
	}
	results, err := e.toolResultMessages(ctx, m, t)
	if err != nil {
		return nil, err
	}
	params := &store.PostMessageParams{Owner: m.Identity.Actor, Results: results}
	if m.Text != "" {
		params.Message = e.userMessage(m)
	}
	if m.Agent != "" {
		params.Run = &cstype.Run{ID: "run_" + newID(), Agent: m.Agent, Roles: m.Identity.Roles, ClientTools: m.ClientTools}
		params.LeaseOwner, params.LeaseDuration = e.owner, e.lease
	}
	res, err := e.store.PostMessage(ctx, params)
	if err != nil {
		return nil, e.conversationError(m.ThreadID, err)
	}
	return &MessageAnswer{Thread: res.Thread, Message: res.Message, Results: res.Results, Run: res.Run}, nil
}

// messageIDFree refuses an id the thread already holds.
func (e *Engine) messageIDFree(ctx context.Context, tenant, threadID, id string) error {
	msgs, err := e.store.ListMessages(ctx, &store.ListMessagesParams{Tenant: tenant, ThreadID: threadID})
	if err != nil && !errors.Is(err, cstype.ErrNotFound) {
		return fmt.Errorf("list messages: %w", err)
	}
	for _, held := range msgs {
		if held.ID == id {
			return &MessageIDTakenError{ThreadID: threadID, MessageID: id}
		}
	}
	return nil
}

func (e *Engine) userMessage(m *Message) *cstype.Message {
	id := m.ID
	if id == "" {
		id = "msg_" + newID()
	}
	return &cstype.Message{ID: id, Tenant: m.Identity.Tenant, ThreadID: m.ThreadID,
		Role: cstype.RoleUser, Text: m.Text, Sender: m.Identity.Actor}
}

// notOwnersMessage is the refusal of an ordinary message from someone
// other than the thread's owner. An approver who answered in their own
// words ("ok") learns which words decide, rather than only that they may
// not post: the words are the configuration's, and say nothing of the
// thread.
func (e *Engine) notOwnersMessage() string {
	w := e.vocab.Words()
	return fmt.Sprintf("only the thread's owner posts in it; an approver answers with a decision alone: %s to approve, %s to reject (add #<proposal id> when several are pending)",
		quotedList(w.Approve), quotedList(w.Reject))
}

// quotedList writes words as "a", "b" or "c".
func quotedList(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// conversationError turns a store error of a conversation write into the
// engine's.
func (e *Engine) conversationError(threadID string, err error) error {
	var busy *cstype.ThreadBusyError
	var taken *cstype.MessageIDTakenError
	switch {
	case errors.As(err, &busy):
		return &ThreadBusyError{ThreadID: busy.ThreadID, RunID: busy.RunID}
	case errors.As(err, &taken):
		return &MessageIDTakenError{ThreadID: threadID, MessageID: taken.ID}
	case errors.Is(err, cstype.ErrNotThreadOwner):
		return &ForbiddenError{Reason: e.notOwnersMessage()}
	case errors.Is(err, cstype.ErrNotFound):
		return fmt.Errorf("thread %q: %w", threadID, ErrNotFound)
	case errors.Is(err, cstype.ErrInvalidParams):
		// Both stay in the chain: the store's words may be a driver's,
		// which a surface does not show its caller.
		return fmt.Errorf("%w: post message: %w", ErrInvalidCall, err)
	}
	return fmt.Errorf("post message: %w", err)
}

// textDecision reads m as a text decision in t and, when it is one, makes
// it. It returns nil, nil for an ordinary message.
func (e *Engine) textDecision(ctx context.Context, m *Message, t *cstype.Thread) (*MessageAnswer, error) {
	page, err := e.store.ListProposals(ctx, &store.ListProposalsParams{Tenant: m.Identity.Tenant, ThreadID: t.ID, Limit: maxDecisionCandidates})
	if err != nil {
		return nil, fmt.Errorf("list thread proposals: %w", err)
	}
	// Oldest first, so that an ambiguous answer lists them in the order
	// they were asked.
	var th textdecision.Thread
	for i := len(page.Proposals) - 1; i >= 0; i-- {
		p := page.Proposals[i]
		if canSee(m.Identity, p) {
			th.Proposals = append(th.Proposals, textdecision.Proposal{ID: p.ID, Pending: p.Status == cstype.StatusPending})
		}
	}
	res := e.vocab.Parse(textdecision.Message{Role: textdecision.RoleUser, Text: m.Text}, th)
	switch res.Kind {
	case textdecision.Ambiguous:
		return &MessageAnswer{Thread: t, Pending: res.Pending, Reply: e.vocab.Reply(textdecision.ReplyAmbiguous, res.Pending)}, nil
	case textdecision.Decide:
	default:
		return nil, nil
	}
	d := &Decision{Identity: m.Identity, ProposalID: res.ProposalID, Verdict: Approve, Via: ViaText}
	if res.Verdict == textdecision.Reject {
		d.Verdict = Reject
	}
	if res.Remember {
		d.Remember = ScopeThread
	}
	// A client's id the thread holds refuses the decision before it is
	// made, and only once the sender is known to be allowed to make it:
	// whoever may not decide learns nothing of the thread's ids.
	var free func(context.Context) error
	if m.ID != "" {
		free = func(ctx context.Context) error { return e.messageIDFree(ctx, m.Identity.Tenant, t.ID, m.ID) }
	}
	dr, err := e.decide(ctx, d, free)
	if err != nil {
		return nil, err
	}
	msg := e.userMessage(m)
	stored, err := e.store.PostMessage(ctx, &store.PostMessageParams{Message: msg, Decision: true})
	if errors.Is(err, cstype.ErrMessageIDTaken) {
		// Taken between the check and now, by a post racing this one: the
		// decision stands, so its record keeps the words under an id of
		// the engine's rather than being lost.
		msg.ID = "msg_" + newID()
		stored, err = e.store.PostMessage(ctx, &store.PostMessageParams{Message: msg, Decision: true})
	}
	if err != nil {
		return nil, e.conversationError(m.ThreadID, err)
	}
	return &MessageAnswer{Thread: stored.Thread, Decision: dr, Message: stored.Message, Reply: e.vocab.Reply(decisionReply(dr), nil)}, nil
}

// ViaText is the channel of a decision made by answering in the
// conversation.
const ViaText = "text"

// ViaAGUI is the channel of a decision made by resuming an AG-UI interrupt.
const ViaAGUI = "agui"

// ViaMCP is the channel of a decision made by answering an MCP client's
// elicitation (the MCP gateway's approval request).
const ViaMCP = "mcp"

// ViaSlack and ViaEmail are the channels of decisions made from an approver
// channel's announcement: a Slack button, an email link's page.
const (
	ViaSlack = "slack"
	ViaEmail = "email"
)

// decisionReply picks the reply to a text decision from its result.
func decisionReply(dr *DecideResult) textdecision.ReplyKey {
	switch dr.Status {
	case DecideUnchanged:
		return textdecision.ReplyUnchanged
	case DecideConflict:
		return textdecision.ReplyConflict
	case DecideExpired:
		return textdecision.ReplyExpired
	}
	switch p := dr.Proposal; {
	case p.Status == cstype.StatusRejected:
		return textdecision.ReplyRejected
	case p.Status == cstype.StatusApproved && p.Mode == cstype.ModeIndependent:
		return textdecision.ReplyApprovedQueued
	}
	return textdecision.ReplyApproved
}

// Run returns a run of a thread id owns.
func (e *Engine) Run(ctx context.Context, id Identity, threadID, runID string) (*cstype.Run, error) {
	if _, err := e.ownThread(ctx, id, threadID); err != nil {
		return nil, err
	}
	return e.runOf(ctx, id.Tenant, threadID, runID)
}

func (e *Engine) runOf(ctx context.Context, tenant, threadID, runID string) (*cstype.Run, error) {
	if !validID(runID) {
		return nil, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	r, err := e.store.GetRun(ctx, &store.GetRunParams{Tenant: tenant, ID: runID})
	switch {
	case errors.Is(err, cstype.ErrNotFound) || (err == nil && r.ThreadID != threadID):
		return nil, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("get run: %w", err)
	}
	return r, nil
}

// CancelRun cancels a run of a thread id owns; a run that ended is
// returned as it is.
func (e *Engine) CancelRun(ctx context.Context, id Identity, threadID, runID string) (*cstype.Run, error) {
	if _, err := e.ownThread(ctx, id, threadID); err != nil {
		return nil, err
	}
	if _, err := e.runOf(ctx, id.Tenant, threadID, runID); err != nil {
		return nil, err
	}
	r, err := e.store.CancelRun(ctx, &store.CancelRunParams{Tenant: id.Tenant, ID: runID})
	if err != nil {
		return nil, fmt.Errorf("cancel run: %w", err)
	}
	e.hub.Publish(runKey(r))
	return r, nil
}

// ownThread reads a thread only its owner may act in.
func (e *Engine) ownThread(ctx context.Context, id Identity, threadID string) (*cstype.Thread, error) {
	t, err := e.thread(ctx, id, threadID)
	if err != nil {
		return nil, err
	}
	if !mayReadThread(id, t) {
		return nil, &ForbiddenError{Actor: id.Actor, Reason: "only the thread's owner may act in it"}
	}
	return t, nil
}

// Offered reports whether the policy lets a model be offered the action
// named name: it does unless the policy denies it whatever the input (a
// rule that denies only under a condition leaves it offered).
func (e *Engine) Offered(name string) bool { return !e.policy.alwaysDenied(name) }
