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

// session is one MCP session's state: its thread, the calls whose
// proposals a repeated identical call continues, and the questions the
// gateway asked through results.
type session struct {
	thread string

	mu    sync.Mutex
	calls map[string]*repeat // by action and canonical input
	asks  map[string]ask     // by request state
}

// ask is an approval form the gateway sent in a tool's result (an input
// request). Its request state names it; an answer decides only when it
// carries that state, on a repeat that finds the same proposal, from the
// caller and credential the form was sent to.
type ask struct {
	proposalID string
	asked      caller
	until      time.Time // the proposal's expiry: no answer decides later
}

// repeat is one call (tool and input) of a session whose proposal is not
// known to be settled: identical calls share its tool-call id, so the
// engine treats them as one call (one proposal, one execution).
type repeat struct {
	toolCallID string
	inflight   int  // calls using it now
	settled    bool // a call got a settled answer: the next one is new
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
	s := &session{thread: "mcp_" + id, calls: map[string]*repeat{}, asks: map[string]ask{}}
	g.sessions[ss] = s
	go func() {
		_ = ss.Wait()
		g.mu.Lock()
		delete(g.sessions, ss)
		g.mu.Unlock()
	}()
	return s
}

// begin returns the repeat of key, or a new one when none is unsettled.
func (s *session) begin(key string) *repeat {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.calls[key]
	if r == nil || r.settled {
		r = &repeat{toolCallID: "mcp_" + randomID()}
		s.calls[key] = r
	}
	r.inflight++
	return r
}

// end records a call's end; settled says it got a settled answer, so that
// the next identical call is a new one.
func (s *session) end(key string, r *repeat, settled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.inflight--
	r.settled = r.settled || settled
	if r.settled && r.inflight == 0 && s.calls[key] == r {
		delete(s.calls, key)
	}
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

// newAsk records a form sent to who about p and returns its request state:
// 128 random bits, which nothing but this session's record makes mean
// anything. Forms past their proposal's expiry are forgotten.
func (s *session) newAsk(p *cstype.Proposal, who caller) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for state, a := range s.asks {
		if !now.Before(a.until) {
			delete(s.asks, state)
		}
	}
	state := randomID()
	s.asks[state] = ask{proposalID: p.ID, asked: who, until: p.ExpiresAt}
	return state
}

// takeAsk reports whether state names a form this session sent to who about
// p, still open; such a form is answered once. Anything else (no state, a
// made-up one, one sent about another proposal or to another credential) is
// no answer, and leaves the form to the one it was sent to.
func (s *session) takeAsk(state string, p *cstype.Proposal, who caller) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.asks[state]
	if !ok || a.proposalID != p.ID || !sameCaller(a.asked, who) || !time.Now().Before(a.until) {
		return false
	}
	delete(s.asks, state)
	return true
}

// sameCaller reports whether two callers are one credential of one identity.
func sameCaller(a, b caller) bool {
	return a.credential == b.credential && a.id.Tenant == b.id.Tenant && a.id.Actor == b.id.Actor
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
// and a request state that names the form (see newAsk), and the client
// calls again with the answer. Only the answer to a form the gateway sent,
// in this session, about the proposal the repeat finds, to this caller's
// credential, decides; any other input response (unsolicited, made up, for
// another proposal or from another credential) is ignored, and the call
// goes on as if it carried none. Older clients are asked with an
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
	who, err := f.identify(req)
	if err != nil {
		return nil, err
	}
	id := who.id
	input := json.RawMessage(req.Params.Arguments)
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	canon, err := canonjson.Canonicalize(input)
	if err != nil {
		return refused("invalid_input", "The arguments are not valid JSON: "+err.Error(), nil), nil
	}
	s := g.session(req.Session)
	key := name + "\x00" + string(canon)
	r := s.begin(key)
	settled := false
	defer func() { s.end(key, r, settled) }()

	life, stop := detach(ctx, g.life)
	defer stop()
	c := &countersign.Call{Identity: id, ThreadID: s.thread, ToolCallID: r.toolCallID, Action: name,
		Input: input, Mode: countersign.ModeWait, WaitTimeout: g.hold}
	answer := approvalAnswer(req.Params)
	elicits := canElicit(req)
	if answer != nil || elicits {
		c.WaitTimeout = probe
	}
	res, err := g.engine.Call(life, c)
	if err == nil && res.Status == countersign.ResultPending && c.WaitTimeout == probe {
		p := res.Proposal
		if p != nil && answer != nil {
			if s.takeAsk(req.Params.RequestState, p, who) {
				g.decide(life, id, p, answer)
				s.stopEliciting(r)
				p = nil // answered: hold for the outcome
			} else {
				g.log.Warn("mcp gateway: an input response the gateway did not ask for is ignored",
					"proposal", p.ID, "tenant", id.Tenant, "actor", id.Actor)
			}
		}
		if p != nil && elicits && g.engine.Permissions(life, id, p, countersign.ViaMCP).Approve && s.startEliciting(r, g.hold) {
			if req.ProtocolVersion() >= multiRoundTripVersion {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{approvalInput: approvalForm(p)}, RequestState: s.newAsk(p, who)}, nil
			}
			g.elicit(ctx, life, req.Session, id, p)
			s.stopEliciting(r)
		}
		c.WaitTimeout = g.hold
		res, err = g.engine.Call(life, c)
	}
	settled = answered(res, err)
	return g.render(name, res, err)
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
		if len(res.Result) > 0 {
			var out mcp.CallToolResult
			if json.Unmarshal(res.Result, &out) == nil {
				return &out, nil
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: cmpOr(res.Summary, "Done.")}}}, nil
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
