package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/canonjson"
	"github.com/countersign/countersign/internal/plaintext"
	"github.com/countersign/countersign/internal/redact"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is the state of a thread the gateway serves (one MCP session's
// before 2026-07-28; one credential's, or a _meta thread, after): the calls
// whose proposals a repeated identical call continues.
type session struct {
	thread string
	// shared: the thread is shared by the requests of every session
	// (2026-07-28): a new repeat looks for the proposal it continues in
	// the store, which another process may have made. users counts the
	// calls using it (guarded by the gateway's mu).
	shared bool
	users  int

	mu    sync.Mutex
	calls map[string]*repeat // by action and canonical input
}

// repeat is one call (tool and input) of a session whose proposal is not
// known to be settled: identical calls share its tool-call id, so the
// engine treats them as one call (one proposal, one execution).
type repeat struct {
	// toolCallID is set before ready is closed: the first call of a
	// repeat finds it (continued) while the others wait. Empty when it
	// could not be found: the calls answer an error.
	toolCallID string
	ready      chan struct{}
	inflight   int  // calls using it now
	settled    bool // a call got a settled answer: the next one is new
	// until is the expiry of the repeat's proposal, once a call learned
	// it: after it, nothing of the proposal is left to collect.
	until time.Time
	// collectOnce records, once for all the calls of the repeat, whether
	// they are the first to be given its proposal's settled answer
	// (collectFirst; see Gateway.collect).
	collectOnce  sync.Once
	collectFirst bool
	// asking is when a call asked the client's user (zero: none is
	// asking); meanwhile the others hold instead of asking again.
	asking time.Time
}

// session returns the state of ss, made on its first call and dropped when
// the session ends.
func (g *Gateway) session(ss *mcp.ServerSession) *session {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.sessions[ss]; s != nil {
		return s
	}
	// A streamable HTTP session has an id (Mcp-Session-Id); stdio and
	// in-memory connections have none and get a random one.
	id := ss.ID()
	if id == "" {
		id = randomID()
	}
	s := &session{thread: "mcp_" + id, calls: map[string]*repeat{}}
	g.sessions[ss] = s
	go func() {
		_ = ss.Wait()
		g.mu.Lock()
		delete(g.sessions, ss)
		g.mu.Unlock()
	}()
	return s
}

// begin returns the repeat of key, or a new one when none is unsettled or
// renew asks for one; fresh says the caller made it and must set its
// tool-call id (ready).
func (s *session) begin(key string, renew bool) (r *repeat, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r = s.calls[key]
	if r == nil || r.settled || renew {
		r = &repeat{ready: make(chan struct{})}
		s.calls[key] = r
		fresh = true
	}
	r.inflight++
	return r, fresh
}

// setReady sets a fresh repeat's tool-call id, which the calls that joined it
// wait for.
func (r *repeat) setReady(toolCallID string) {
	r.toolCallID = toolCallID
	close(r.ready)
}

// end records a call's end; settled says it got a settled answer, so that
// the next identical call is a new one.
func (s *session) end(key string, r *repeat, settled bool, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.inflight--
	r.settled = r.settled || settled
	if until.After(r.until) {
		r.until = until
	}
	if r.inflight > 0 || s.calls[key] != r {
		return
	}
	// A shared thread outlives its sessions: a repeat nobody uses is kept
	// only while its proposal may still be collected (until its expiry);
	// past that, or without a proposal, the store answers (continued).
	if r.settled || (s.shared && !time.Now().Before(r.until)) {
		delete(s.calls, key)
	}
}

// prune drops the repeats of a shared thread that no call uses and whose
// proposals expired, and reports whether the thread holds none.
func (s *session) prune(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, r := range s.calls {
		if r.inflight == 0 && !now.Before(r.until) {
			delete(s.calls, key)
		}
	}
	return len(s.calls) == 0
}

// startEliciting reports whether this call is the one to ask the client.
// A question asked through a result whose answer never came back stops
// counting after stale, so that a later call may ask again.
func (s *session) startEliciting(r *repeat, stale time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.asking.IsZero() && time.Since(r.asking) < stale {
		return false
	}
	r.asking = time.Now()
	return true
}

func (s *session) stopEliciting(r *repeat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.asking = time.Time{}
}

// probe bounds the first engine call of a client that can be asked: long
// enough to read the proposal once, so the call answers pending at once
// instead of holding before the gateway asks.
const probe = time.Nanosecond

// multiRoundTripVersion is the first MCP protocol version in which a
// server asks its client's user through the tool's result (input requests,
// answered by calling the tool again) rather than with a request of its
// own while the call runs.
const multiRoundTripVersion = "2026-07-28"

// approvalInput names the gateway's input request: the approval form.
const approvalInput = "countersign.approval"

// callTool is a tools/call of the exported tool name: one Engine.Call in
// the session's thread. A client that supports elicitation, and whose
// caller may decide the proposal through mcp, is asked; otherwise, or when
// the question was dismissed, the call holds up to the gateway's hold for a
// decision from any channel.
//
// A client on a protocol with multi round-trip requests is asked through
// the result: the call answers with the approval form as an input request
// and a request state, signed by the gateway, that binds the form to the
// caller, its credential, the proposal, the tool and its input, with a
// single-use nonce and a deadline (see newState); the client calls again
// with the answer. Only the answer carrying such a state, about the
// proposal the repeat finds, from the caller and credential it was made
// for, never presented before, decides (see takeState); any other input
// response (unsolicited, made up, tampered, for another proposal, from
// another credential, expired or replayed) is ignored, and the call goes on
// as if it carried none. Older clients are asked with an
// elicitation request while the call runs, whose answer is the response to
// that request.
//
// The engine calls run under the gateway's life, not the request's
// context: once a call is approved it executes, and a client that gives up
// midway (a request time-out) must not interrupt the upstream call and
// leave its outcome unknown. A hold therefore lasts its full length even
// when the client went away.
func (g *Gateway) callTool(ctx context.Context, f *front, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	g.callStarted()
	defer g.callEnded()
	who, err := f.identify(req.Extra)
	if err != nil {
		return nil, err
	}
	input := json.RawMessage(req.Params.Arguments)
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	canon, err := canonjson.Canonicalize(input)
	if err != nil {
		return refused("invalid_input", "The arguments are not valid JSON: "+err.Error(), nil), nil
	}
	th, err := g.threadOf(who, req)
	if err != nil {
		return nil, err
	}
	defer th.release()
	key := name + "\x00" + string(canon)
	out, outErr, again := g.callIn(ctx, req, who, th, name, input, key, false)
	if again {
		// Another call collected the proposal this repeat continued: this
		// one is a new call.
		out, outErr, _ = g.callIn(ctx, req, who, th, name, input, key, true)
	}
	return out, outErr
}

// callIn makes the call in th's thread: it continues the repeat of key, or
// (renew) starts a new one. In a shared thread a settled answer is
// collected once, across processes: again reports that another call had
// collected it already, so that this call must be made anew.
func (g *Gateway) callIn(ctx context.Context, req *mcp.CallToolRequest, who caller, th *callThread, name string, input json.RawMessage, key string, renew bool) (_ *mcp.CallToolResult, _ error, again bool) {
	id := who.id
	s := th.s
	r, fresh := s.begin(key, renew)
	settled := false
	var until time.Time
	defer func() { s.end(key, r, settled, until) }()

	life, stop := detach(ctx, g.life)
	defer stop()
	if fresh {
		toolCallID := "mcp_" + randomID()
		if s.shared && !renew {
			// Another connection, or another process, may have proposed
			// this call already: it continues that proposal.
			found, err := g.continued(life, id, s.thread, name, input)
			switch {
			case err != nil:
				settled = true
				r.setReady("")
				return nil, g.threadError(name, err), false
			case found != "":
				toolCallID = found
			}
		}
		r.setReady(toolCallID)
	} else {
		<-r.ready
		if r.toolCallID == "" {
			settled = true
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "countersign could not complete the call; call again with the same arguments"}, false
		}
	}
	c := &countersign.Call{Identity: id, ThreadID: s.thread, ThreadOrigin: th.origin, ToolCallID: r.toolCallID, Action: name,
		Input: input, Mode: countersign.ModeWait, WaitTimeout: g.hold}
	tasks := g.wantsTask(req)
	if tasks {
		// A task is executed by the workers, whoever polls it: the
		// proposal is independent. (An allowed call still runs now.)
		c.Mode = countersign.ModeIndependent
	}
	answer := approvalAnswer(req.Params)
	elicits := canElicit(req)
	if answer != nil || elicits {
		c.WaitTimeout = probe
	}
	res, err := g.engine.Call(life, c)
	if err == nil && res.Status == countersign.ResultPending && c.WaitTimeout == probe {
		p := res.Proposal
		if p != nil && answer != nil {
			if g.takeState(life, req.Params.RequestState, who, name, g.inputDigest(name, input), p) {
				g.decide(life, id, p, answer)
				s.stopEliciting(r)
				p = nil // answered: hold for the outcome
			} else {
				g.log.Warn("mcp gateway: an input response the gateway did not ask for is ignored",
					"proposal", p.ID, "tenant", id.Tenant, "actor", id.Actor)
			}
		}
		// No elicitation for a step-up proposal: an MCP answer cannot carry
		// a passkey (the engine would refuse the approval anyway).
		if p != nil && elicits && g.offersApproval(life, id, p) && s.startEliciting(r, g.hold) {
			if req.ProtocolVersion() >= multiRoundTripVersion {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{approvalInput: approvalForm(p)}, RequestState: g.newState(who, name, p)}, nil, false
			}
			g.elicit(ctx, life, req.Session, id, p)
			s.stopEliciting(r)
		}
		c.WaitTimeout = g.hold
		res, err = g.engine.Call(life, c)
	}
	if tasks && err == nil {
		var p *cstype.Proposal
		if res, p, err = g.taskOrOutcome(life, c, res); p != nil {
			until = p.ExpiresAt
			return markTask(p), nil, false
		}
	}
	settled = answered(res, err)
	if res != nil && res.Proposal != nil {
		until = res.Proposal.ExpiresAt
	}
	if s.shared && err == nil && settled && res.Proposal != nil {
		// The calls that share this repeat share its answer; only a
		// repeat that another process answered first is made anew.
		r.collectOnce.Do(func() { r.collectFirst = g.collect(life, res.Proposal) })
		if !r.collectFirst && !renew {
			return nil, nil, true
		}
	}
	var refusal *countersign.ForbiddenError
	if th.origin == countersign.ThreadNamed && errors.As(err, &refusal) {
		// A thread the request's _meta named that is not the caller's: a
		// JSON-RPC error, and nothing was stored.
		return nil, forbidden("only the thread's owner may make calls in it"), false
	}
	out, outErr := g.render(name, res, err)
	return out, outErr, false
}

// taskOrOutcome answers a call made as a task (independent mode) that is
// not settled: a proposal still waiting for a decision is answered with its
// task (p), and one that is approved, which the workers execute, with its
// outcome if it settles within the hold, else with its task too. Any other
// answer passes through.
func (g *Gateway) taskOrOutcome(life context.Context, c *countersign.Call, res *countersign.Result) (_ *countersign.Result, p *cstype.Proposal, _ error) {
	if res.Status != countersign.ResultPending || res.Proposal == nil || res.Proposal.Mode != countersign.ModeIndependent {
		return res, nil, nil
	}
	p = res.Proposal
	if p.Status == cstype.StatusPending {
		return res, p, nil
	}
	wctx, cancel := context.WithTimeout(life, g.hold)
	q, err := g.engine.Wait(wctx, c.Identity, p.ID)
	cancel()
	switch {
	case q != nil && (err != nil || q.Status == cstype.StatusReconciling):
		// Not settled within the hold, or being reconciled: the task
		// follows it.
		return res, q, nil
	case err != nil:
		return res, p, nil
	}
	// Settled: the repeated call answers its outcome, as any replay does.
	out, err := g.engine.Call(life, c)
	if err == nil && out.Status == countersign.ResultPending {
		return out, q, nil
	}
	return out, nil, err
}

// collectedPrefix marks, among the store's MCP nonces, that a proposal's
// settled answer was given to a call of a shared thread.
const collectedPrefix = "collected:"

// collect records that a call of a shared thread is given p's settled
// answer, and reports whether it is the first: a later repeat that finds p
// through a repeat another process kept is a new call, not p replayed.
// The mark is kept until p's expiry, past which no repeat continues p, and
// a sweep longer. A store that cannot record it lets the answer be given.
func (g *Gateway) collect(ctx context.Context, p *cstype.Proposal) bool {
	until := p.ExpiresAt
	if now := time.Now(); until.Before(now) {
		until = now
	}
	first, err := g.engine.SpendMCPNonce(ctx, p.Tenant, collectedPrefix+p.ID, until.Add(2*threadSweep))
	if err != nil {
		g.log.Warn("mcp gateway: a collected answer could not be recorded", "proposal", p.ID, "err", err)
		return true
	}
	return first
}

// threadError answers a call whose thread could not be read: the caller
// may not (a _meta thread that is not its own), or the store failed.
func (g *Gateway) threadError(name string, err error) error {
	if errors.Is(err, countersign.ErrForbidden) {
		return forbidden("only the thread's owner may make calls in it")
	}
	if _, rerr := g.renderError(name, err); rerr != nil {
		return rerr
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "countersign could not complete the call; call again with the same arguments"}
}

// offersApproval reports whether the approval form is offered to id for p:
// id may approve it through MCP and its rule asks no step-up.
func (g *Gateway) offersApproval(ctx context.Context, id countersign.Identity, p *cstype.Proposal) bool {
	if g.engine.MayAct(id, countersign.ActAnswerElicitation) != nil {
		return false // an agent credential is never asked
	}
	perm := g.engine.Permissions(ctx, id, p, countersign.ViaMCP)
	return perm.Approve && !perm.StepUp
}

// inputDigest is the digest of a call's input as its proposal records it,
// or "" when the action is gone or refuses the input.
func (g *Gateway) inputDigest(name string, input json.RawMessage) string {
	a, ok := g.engine.Action(name)
	if !ok {
		return ""
	}
	digest, err := a.InputDigest(input)
	if err != nil {
		return ""
	}
	return digest
}

// approvalAnswer is the client's answer to the approval form, when the
// call repeats one that asked.
func approvalAnswer(p *mcp.CallToolParamsRaw) *mcp.ElicitResult {
	if p == nil {
		return nil
	}
	ans, _ := p.InputResponses[approvalInput].(*mcp.ElicitResult)
	return ans
}

// detach returns a context with ctx's values that ends only with life.
func detach(ctx, life context.Context) (context.Context, func()) {
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(life, cancel)
	return out, func() {
		stop()
		cancel()
	}
}

// answered reports whether a call's answer settles it for the session: a
// settled outcome, or a refusal that stored nothing. A pending answer, and
// an error that may have left a record, keep the call to be continued.
func answered(res *countersign.Result, err error) bool {
	var denied *countersign.DeniedError
	var invalid *countersign.InvalidInputError
	var forbidden *countersign.ForbiddenError
	var mismatch *countersign.MismatchError
	switch {
	case errors.As(err, &denied), errors.As(err, &invalid), errors.As(err, &forbidden), errors.As(err, &mismatch),
		errors.Is(err, countersign.ErrActionNotFound):
		return true
	case err != nil:
		return false
	}
	return res.Status != countersign.ResultPending
}

// canElicit reports whether the client answers form elicitations, by the
// capabilities the request carries (protocol 2026-07-28) or the session
// declared at initialization. A client that declares elicitation without
// naming a mode supports forms.
func canElicit(req *mcp.CallToolRequest) bool {
	c := req.ClientCapabilities()
	if c == nil || c.Elicitation == nil {
		return false
	}
	return c.Elicitation.Form != nil || c.Elicitation.URL == nil
}

// elicit asks the client's user to decide p with an elicitation request,
// for clients before multi round-trip requests. An error, or no answer
// before the proposal expires, decides nothing.
func (g *Gateway) elicit(ctx, life context.Context, ss *mcp.ServerSession, id countersign.Identity, p *cstype.Proposal) {
	ectx, cancel := context.WithDeadline(ctx, p.ExpiresAt)
	defer cancel()
	ans, err := ss.Elicit(ectx, approvalForm(p))
	if err != nil {
		g.log.Debug("mcp elicitation: no answer", "proposal", p.ID, "err", err)
		return
	}
	g.decide(life, id, p, ans)
}

// decide applies the user's answer to the approval form: accept with
// approve decides (true approves, false rejects), decline rejects, and
// cancel (dismissed) decides nothing. The decision is made under life, so
// that it lands even if the client leaves right after answering.
func (g *Gateway) decide(life context.Context, id countersign.Identity, p *cstype.Proposal, ans *mcp.ElicitResult) {
	d := &countersign.Decision{Identity: id, ProposalID: p.ID, Via: countersign.ViaMCP}
	switch ans.Action {
	case "accept":
		approve, ok := ans.Content["approve"].(bool)
		if !ok {
			return
		}
		d.Verdict = countersign.Reject
		if approve {
			d.Verdict = countersign.Approve
			if scope, ok := ans.Content["remember"].(string); ok && scope != "" {
				d.Remember = countersign.Scope(scope)
			}
		}
		d.Reason, _ = ans.Content["reason"].(string)
	case "decline":
		d.Verdict, d.Reason = countersign.Reject, "declined in the MCP client"
	default: // "cancel": dismissed, nothing decided
		return
	}
	if _, err := g.engine.Decide(life, d); err != nil {
		g.log.Warn("mcp elicitation: decision refused", "proposal", p.ID, "err", err)
	}
}

// approvalForm is the elicitation that asks to decide p.
func approvalForm(p *cstype.Proposal) *mcp.ElicitParams {
	return &mcp.ElicitParams{Mode: "form", Message: question(p), RequestedSchema: decisionSchema(p)}
}

// question is the elicitation's message: what the approver decides. The
// agent's words in it are plain text (internal/plaintext): its invisible
// and control characters as \u{XXXX}, line breaks only in the preview.
func question(p *cstype.Proposal) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Approve %s?\n\n%s", plaintext.Line(p.Action), plaintext.Line(p.Confirmation.Title))
	if p.Preview != "" && p.Preview != p.Confirmation.Title {
		fmt.Fprintf(&b, "\n\n%s", plaintext.Multiline(p.Preview))
	}
	if len(p.Input) > 0 {
		fmt.Fprintf(&b, "\n\nArguments: %s", plaintext.Line(string(p.Input)))
	}
	fmt.Fprintf(&b, "\n\nProposal %s, open until %s.", p.ID, p.ExpiresAt.UTC().Format(time.RFC3339))
	return b.String()
}

// decisionSchema is the form an approver fills in: approve, a reason, and
// the remember scopes the rule allows.
func decisionSchema(p *cstype.Proposal) map[string]any {
	props := map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "Approve this call (unchecked: reject it)"},
		"reason":  map[string]any{"type": "string", "title": "Reason", "maxLength": 1000},
	}
	if len(p.RememberScopes) > 0 {
		scopes := make([]string, len(p.RememberScopes))
		for i, s := range p.RememberScopes {
			scopes[i] = string(s)
		}
		props["remember"] = map[string]any{"type": "string", "title": "Remember this approval", "enum": scopes}
	}
	return map[string]any{"type": "object", "properties": props, "required": []string{"approve"}}
}

// render turns the engine's answer into the tool's result. A successful
// upstream result is passed through as it came; everything else is an
// isError result in the gateway's own words, with structuredContent naming
// the proposal and its status.
func (g *Gateway) render(name string, res *countersign.Result, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		return g.renderError(name, err)
	}
	pid := res.ProposalID
	if pid == "" && res.Proposal != nil {
		pid = res.Proposal.ID
	}
	switch res.Status {
	case countersign.ResultSucceeded:
		return succeededResult(res.Result, res.Summary), nil
	case countersign.ResultPending:
		return proposalResult(pid, "pending", fmt.Sprintf(
			"Proposal %s awaits a human decision. Call %s again with the same arguments once it is decided.", pid, name)), nil
	case countersign.ResultRejected:
		msg := "A human rejected this call; it was not run."
		if reason := rejectReason(res.Proposal); reason != "" {
			msg += " Reason: " + reason
		}
		return proposalResult(pid, "rejected", msg), nil
	case countersign.ResultExpired:
		return proposalResult(pid, "expired", expiredText(res.Proposal)), nil
	case countersign.ResultSuperseded:
		return proposalResult(pid, "superseded", "A newer call replaced this one; it was not run."), nil
	case countersign.ResultCancelled:
		return proposalResult(pid, "cancelled", "This call was withdrawn; it was not run."), nil
	case countersign.ResultFailed:
		out := proposalResult(pid, "failed", "The call failed: "+cmpOr(res.Error, "no reason given"))
		if msg, ok := versionChanged(res); ok {
			out.StructuredContent.(map[string]any)["error"] = map[string]any{"code": countersign.CodeActionVersionChanged, "message": msg}
		}
		return out, nil
	case countersign.ResultUnknown, countersign.ResultReconciling:
		return proposalResult(pid, string(res.Status),
			"The outcome is unknown: the call may or may not have been applied. Do not retry automatically."), nil
	}
	return proposalResult(pid, string(res.Status), fmt.Sprintf("The call is %s.", res.Status)), nil
}

// succeededResult is the result of a call that ran: the upstream's own
// result as it came, or, where none was kept, the outcome's summary.
func succeededResult(result json.RawMessage, summary string) *mcp.CallToolResult {
	if len(result) > 0 {
		var out mcp.CallToolResult
		if json.Unmarshal(result, &out) == nil {
			return &out
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: cmpOr(summary, "Done.")}}}
}

func (g *Gateway) renderError(name string, err error) (*mcp.CallToolResult, error) {
	var denied *countersign.DeniedError
	var invalid *countersign.InvalidInputError
	var forbidden *countersign.ForbiddenError
	var mismatch *countersign.MismatchError
	switch {
	case errors.As(err, &denied):
		return refused("denied", "Denied: "+denied.Reason, map[string]any{"code": denied.Code}), nil
	case errors.As(err, &invalid):
		var b strings.Builder
		b.WriteString("The arguments do not match the tool's input schema:")
		for _, p := range invalid.Problems {
			fmt.Fprintf(&b, "\n- %s: %s", cmpOr(p.Path, "(the arguments)"), p.Message)
		}
		return refused("invalid_input", b.String(), map[string]any{"problems": invalid.Problems}), nil
	case errors.As(err, &forbidden):
		return refused("forbidden", "Forbidden: "+forbidden.Reason, nil), nil
	case errors.As(err, &mismatch):
		return refused("call_mismatch", err.Error(), nil), nil
	case errors.Is(err, countersign.ErrActionNotFound):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	// The cause may name the store's hosts: it goes to the log, not to the
	// client.
	g.log.Error("mcp gateway: call failed", "tool", name, "err", redact.Error(err))
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "countersign could not complete the call; call again with the same arguments"}
}

// versionChanged reports whether a failed call failed because its tool's
// version changed before it ran, and why. Only a failure without an
// execution counts: an upstream's own isError text, which may read
// anything, is a failure with one.
func versionChanged(res *countersign.Result) (string, bool) {
	if res.Executed == nil || *res.Executed {
		return "", false
	}
	return strings.CutPrefix(res.Error, countersign.CodeActionVersionChanged+": ")
}

// proposalResult is an isError result about a proposal.
func proposalResult(proposalID, status, text string) *mcp.CallToolResult {
	sc := map[string]any{"status": status}
	if proposalID != "" {
		sc["proposal_id"] = proposalID
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc}
}

// refused is an isError result for a call nothing was stored for.
func refused(status, text string, extra map[string]any) *mcp.CallToolResult {
	sc := map[string]any{"status": status}
	for k, v := range extra {
		sc[k] = v
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: sc}
}

// rejectReason is the reason of the rejection that settled p, if any.
func rejectReason(p *cstype.Proposal) string {
	if p == nil {
		return ""
	}
	for i := len(p.Decisions) - 1; i >= 0; i-- {
		if d := p.Decisions[i]; d.Decision == cstype.VerdictRejected {
			return d.Reason
		}
	}
	return ""
}

func cmpOr(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// expiredText says why an expired call never ran: nobody decided it in
// time, or it was approved and the agent did not call again before the
// deadline (not_collected), or it was approved and not run in time.
func expiredText(p *cstype.Proposal) string {
	switch {
	case p == nil:
	case p.Outcome != nil && p.Outcome.Reason == cstype.ReasonNotCollected:
		return "This call was approved, but the agent did not call again before " + p.ExpiresAt.UTC().Format(time.RFC3339) + "; it expired and was not run."
	case p.Quorum > 0 && p.Approvals() >= p.Quorum:
		return "This call was approved, but it was not run before " + p.ExpiresAt.UTC().Format(time.RFC3339) + "; it expired."
	}
	return "Nobody decided this call in time; it expired and was not run."
}
