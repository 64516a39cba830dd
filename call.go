package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/canonjson"
	"github.com/countersign/countersign/store"
)

// Call is one invocation of an action by an agent.
type Call struct {
	Identity   Identity
	ThreadID   string
	RunID      string
	ToolCallID string
	Action     string
	Input      json.RawMessage
	// Mode overrides the rule's mode when set.
	Mode Mode
	// Evidence is the confirmation id of a two-phase confirmation.
	Evidence string
	// WaitTimeout bounds a wait-mode call; when it passes, the call returns
	// status pending and can be resumed by repeating it. Zero: until ctx ends.
	WaitTimeout time.Duration
	// FreshToolCallID makes ToolCallID one that only RunID may repeat: a
	// record of it that another run of the thread made, or a call made
	// without a run, is not this call's to replay, and Call refuses it with
	// *ToolCallIDReusedError. The built-in agent runtime sets it, so that a
	// model's tool-call id, which is the proposal's tool_call_id as it is,
	// names one call of the thread, and a run that repeats its own call
	// after a crash still replays it. Without it a repeated id replays, as
	// POST /v1/calls does.
	FreshToolCallID bool
}

func (c *Call) validate() error {
	switch {
	case c.Identity.Tenant == "" || c.Identity.Actor == "":
		return fmt.Errorf("%w: identity needs a tenant and an actor", ErrInvalidCall)
	case c.ThreadID == "":
		return fmt.Errorf("%w: thread id is required", ErrInvalidCall)
	case c.ToolCallID == "":
		return fmt.Errorf("%w: tool call id is required", ErrInvalidCall)
	case len(c.ThreadID) > 256 || len(c.ToolCallID) > 256 || len(c.RunID) > 256:
		return fmt.Errorf("%w: ids are at most 256 bytes", ErrInvalidCall)
	case c.Mode != "" && !c.Mode.Valid():
		return fmt.Errorf("%w: mode %q: want wait, two_phase or independent", ErrInvalidCall, c.Mode)
	case c.WaitTimeout < 0:
		return fmt.Errorf("%w: negative wait timeout", ErrInvalidCall)
	}
	return nil
}

// Call runs one invocation through the call path. Denials return *DeniedError, bad
// two-phase evidence *EvidenceError, schema failures *InvalidInputError, a
// call in a thread another actor owns *ForbiddenError (nothing stored, run or
// revealed), a repeated tool call id with another action or input
// *MismatchError (nothing stored or run); every other answer, including a
// human's rejection, is a Result.
//
// In wait mode, when ctx ends before a decision, Call returns the pending
// Result together with ctx's error: the proposal is durable, and repeating the
// same call resumes waiting.
func (e *Engine) Call(ctx context.Context, c *Call) (*Result, error) {
	res, wait, err := e.call(ctx, c)
	if wait != nil {
		// Waiting happens here, right below Call's small frame rather than
		// call's large one: a blocked waiter's stack is what 10,000 waiters
		// pay 10,000 times, and the runtime shrinks it only to four times
		// what it uses.
		_, res, err = e.await(ctx, c, wait)
	}
	return res, err
}

// callRun is one call on its way through the pipeline: what each step
// established for the next. It holds no pointer to the Call, so that the
// Call, which a waiting call keeps, stays on its caller's stack: a field of
// callRun that reaches the heap (its input goes to the hooks) would take the
// Call with it.
type callRun struct {
	a *Action
	// rules are the rules that may govern a's calls; m is the one that
	// applies to this call (applyPolicy), with its effect.
	rules *actionRules
	m     ruleMatch
	// mode is the call's mode, or its rule's; a grant turns two_phase into
	// wait, since there is nothing left to confirm.
	mode Mode
	// fingerprint is the rule's (see Rule.fingerprint), for asked calls.
	fingerprint string
	// input is the validated, canonical snapshot, and digest its hash;
	// inputErr is the schema's refusal instead, which fails a new call
	// (after the owner check and the replay: a repeat of a recorded call
	// replays it, see sameCall).
	input    json.RawMessage
	digest   string
	inputErr error
	// approvedBy is the decision of a live grant that stands in for the
	// humans, and grantID that grant.
	approvedBy *cstype.Decision
	grantID    string
	conf       Confirmation
	prep       *Prepared
	// leaseAsked is when the creation of an allowed write's record, which
	// took its lease, was asked for: the lease is reckoned from then.
	leaseAsked time.Time
}

// recorded reports whether the call leaves a durable record before it runs:
// every call that asks for a decision, and every write the policy allows, so
// that a repeat replays its outcome and never executes again. A read the
// policy allows leaves none and may run again.
func (r *callRun) recorded() bool { return r.m.effect == EffectAsk || r.a.kind == KindWrite }

// asked reports whether the call needs a decision (a human's, or a grant's).
func (r *callRun) asked() bool { return r.m.effect == EffectAsk }

// call runs Call up to the wait: a wait-mode call whose proposal is not
// settled returns it as wait, for Call to wait on. Each step below either
// hands the call on or answers it.
func (e *Engine) call(ctx context.Context, c *Call) (res *Result, wait *cstype.Proposal, err error) {
	// r stays in this frame (resolve fills it in): a call that waits keeps
	// nothing of the pipeline on the heap.
	r := &callRun{}
	if err := e.resolve(c, r); err != nil {
		return nil, nil, err
	}
	// The input is prepared before the lookup, whose grant query needs its
	// digest; a refused input is kept for later (see callRun.inputErr).
	r.input, r.digest, r.inputErr = r.a.prepareInput(c.Input)
	// Rules may depend on the input: the policy applies once it is known.
	if err := e.applyPolicy(ctx, c, r); err != nil {
		return nil, nil, err
	}
	l, err := e.lookup(ctx, c, r)
	if err != nil {
		return nil, nil, err
	}
	if err := e.checkOwner(ctx, c, r, l.Thread); err != nil {
		return nil, nil, err
	}
	// Every call looks for its tool call's record, a read too: a read that
	// repeats a recorded call's id with another action is a mismatch.
	p, err := e.replay(c, r, l.Proposal)
	switch {
	case err != nil:
		return nil, nil, err
	case p != nil && r.recorded():
		// The repeat's input is the recorded one (replay checked): the
		// stored snapshot is what was approved.
		return e.resumeOrWait(ctx, c, p)
	case r.inputErr != nil:
		return nil, nil, r.inputErr
	}
	if r.asked() && c.Evidence != "" {
		if res, err, handled := e.spendEvidence(ctx, c, r); handled {
			return res, nil, err
		}
	}
	if err := e.authorize(ctx, r.a, c.Identity, PhasePropose, r.input, ""); err != nil {
		return nil, nil, err
	}
	if !r.recorded() {
		return withoutWait(e.executeDirect(ctx, c, r.a, r.input))
	}
	if r.asked() {
		e.findGrant(r, l.Grant)
	}
	if res, err := e.preflightCall(ctx, c, r); res != nil || err != nil {
		return res, nil, err
	}
	if err := e.prepare(ctx, c, r); err != nil {
		return nil, nil, err
	}
	p, created, err := e.record(ctx, c, r)
	switch {
	case err != nil:
		return nil, nil, err
	case !created:
		// A concurrent identical call created it first: resume that one.
		return e.resumeOrWait(ctx, c, p)
	case !r.asked() && r.a.callerExecuted:
		// The record holds the caller's lease: the answer is the claim.
		return withoutWait(e.handOver(ctx, p))
	case !r.asked():
		return withoutWait(e.executeAllowed(ctx, p, r.leaseAsked))
	case r.approvedBy != nil:
		return withoutWait(e.executeGranted(ctx, c, p))
	}
	return e.resumeOrWait(ctx, c, p)
}

// resolve validates the call and finds its action and the rules that may
// govern it.
func (e *Engine) resolve(c *Call, r *callRun) error {
	if err := c.validate(); err != nil {
		return err
	}
	e.mu.RLock()
	r.a, r.rules = e.actions[c.Action], e.rules[c.Action]
	e.mu.RUnlock()
	if r.a == nil {
		return fmt.Errorf("%w: %q", ErrActionNotFound, c.Action)
	}
	return nil
}

// lookup reads, in one store call (one round trip to a database server),
// what the steps before the record need: the call's thread for checkOwner,
// its tool call's record for replay and, for a call that asks and whose
// input is valid, the live grant that could approve it for findGrant. The
// record and the grant come back with the thread, but nothing of them is
// used before checkOwner has passed.
func (e *Engine) lookup(ctx context.Context, c *Call, r *callRun) (*store.CallLookup, error) {
	params := &store.LookupCallParams{Tenant: c.Identity.Tenant, ThreadID: c.ThreadID, ToolCallID: c.ToolCallID}
	if r.asked() && r.inputErr == nil {
		a := r.a
		params.Grant = &store.FindGrantParams{
			Tenant: c.Identity.Tenant, Requester: c.Identity.Actor, ThreadID: c.ThreadID, RunID: c.RunID,
			Action: a.name, ActionVersion: a.version, InputDigest: r.digest, RuleFingerprint: r.fingerprint,
		}
	}
	l, err := e.store.LookupCall(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("call %s: lookup: %w", r.a.name, err)
	}
	return l, nil
}

// checkOwner makes sure the caller owns the call's thread t (nil when it
// does not exist), before anything of the thread is used, stored or run: a
// thread belongs to its first caller, and only the owner makes calls in it.
// lookup read the thread, and in the same round trip the call's record and
// grant, which stay unused until the owner check has passed; a caller in
// another actor's thread learns nothing of them. A thread that does not
// exist yet is created, owned by the caller, with the call's record
// (CreateProposal refuses another actor's thread, for the caller who loses
// that race); for a call that leaves no record (a read) it is created here,
// in a write only the thread's first call pays.
func (e *Engine) checkOwner(ctx context.Context, c *Call, r *callRun, t *cstype.Thread) error {
	if t == nil && r.recorded() {
		return nil
	}
	if t == nil {
		var err error
		t, err = e.store.EnsureThread(ctx, &store.EnsureThreadParams{Tenant: c.Identity.Tenant, ID: c.ThreadID, Owner: c.Identity.Actor})
		if err != nil {
			return fmt.Errorf("call %s: thread: %w", r.a.name, err)
		}
	}
	if t.Owner != c.Identity.Actor {
		return notOwner(c)
	}
	return nil
}

// notOwner is the refusal of a call in another actor's thread. It names
// nothing the caller did not send.
func notOwner(c *Call) *ForbiddenError {
	return &ForbiddenError{Actor: c.Identity.Actor, Reason: "only the thread's owner may make calls in it"}
}

// replay checks the record p (nil when the tool call is new) that lookup
// found of a repeated tool call, which resumes it: a repeated call never
// proposes or executes anew. It returns nil when the tool call is new, and a
// *MismatchError when the repeat names another action or another input
// than the record.
func (e *Engine) replay(c *Call, r *callRun, p *cstype.Proposal) (*cstype.Proposal, error) {
	switch {
	case p == nil:
		return nil, nil
	case p.Requester != c.Identity.Actor:
		// Only a thread that was deleted and taken by another actor can
		// hold another requester's record: it is not the caller's.
		return nil, notOwner(c)
	}
	if err := notReused(c, p); err != nil {
		return nil, err
	}
	if err := sameCall(c, r, p); err != nil {
		return nil, err
	}
	if err := replayedEvidence(c, p); err != nil {
		return nil, err
	}
	return p, nil
}

// notReused refuses p, the record of c's tool call id, to a call that
// must be new to its thread (Call.FreshToolCallID) when p is not its own
// run's: it is checked before the action and input are compared, so that
// the refusal says the id is taken, whatever the other call was.
func notReused(c *Call, p *cstype.Proposal) error {
	if c.FreshToolCallID && (c.RunID == "" || p.RunID != c.RunID) {
		return &ToolCallIDReusedError{ToolCallID: c.ToolCallID}
	}
	return nil
}

// sameCall refuses a repeat of p's tool call that names another action or
// another input. Inputs compare by the digest of the validated input, so
// that key order, spacing and the schema's normalization do not count; an
// input the action's schema now refuses compares by its canonical form, so
// that a genuine retry still replays after the schema changed.
func sameCall(c *Call, r *callRun, p *cstype.Proposal) error {
	var differs []string
	if p.Action != r.a.name {
		differs = append(differs, "action")
	}
	if inputDigest(r, c.Input) != p.InputDigest {
		differs = append(differs, "input")
	}
	if len(differs) == 0 {
		return nil
	}
	return &MismatchError{ToolCallID: c.ToolCallID, Differs: differs, Action: p.Action, InputDigest: p.InputDigest}
}

// inputDigest is the digest r's call would record for its input raw
// (prepareInput's), or, when the action's schema refuses raw, the digest of
// raw's canonical form; "" when raw is not JSON.
func inputDigest(r *callRun, raw json.RawMessage) string {
	if r.inputErr == nil {
		return r.digest
	}
	canon, err := canonjson.Canonicalize(raw)
	if err != nil {
		return ""
	}
	digest, err := canonjson.Digest(canon)
	if err != nil {
		return ""
	}
	return digest
}

// findGrant lets g, the live grant lookup found (nil when none), made
// under the call's rule as it stands, approve the call. The call still gets
// a proposal (and so an operation id, an outcome, a replay record), and
// still runs preflight and prepare; the grant is checked again in the
// transaction that creates the proposal (see record), so that one revoked
// since lookup read it never approves.
func (e *Engine) findGrant(r *callRun, g *cstype.Grant) {
	if g == nil {
		return
	}
	r.grantID = g.ID
	r.approvedBy = &cstype.Decision{Actor: grantActor + g.ID, Via: viaGrant, Reason: "remembered approval by " + g.GrantedBy}
	if r.mode == ModeTwoPhase {
		r.mode = ModeWait // there is nothing to confirm: the caller executes now
	}
}

// askedMode is the call's mode without a grant: its own, or its rule's. A
// caller-executed action is never independent (nobody but its caller can
// execute it): under an independent rule it waits.
func askedMode(c *Call, r *callRun) Mode {
	m := c.Mode
	if m == "" {
		m = r.m.rule.Mode
	}
	if m == ModeIndependent && r.a.callerExecuted {
		return ModeWait
	}
	return m
}

// A decision taken by a remembered approval names the grant as its actor and
// comes via a channel no human decision may use (Decide refuses it).
const (
	grantActor = "grant:"
	viaGrant   = "grant"
)

// preflightCall runs the Preflight hook and fills in the confirmation copy.
// A completed call is answered with its result; a denied one is refused.
func (e *Engine) preflightCall(ctx context.Context, c *Call, r *callRun) (*Result, error) {
	r.conf = Confirmation{Title: fill(r.a.confirmation.Title, r.input), Verb: r.a.confirmation.Verb}
	override, done, err := e.preflight(ctx, c.Identity, r.a, r.input)
	switch {
	case err != nil || done != nil:
		return done, err
	case override != nil:
		r.conf = *override
	}
	if r.conf.Title == "" {
		r.conf.Title = r.a.name + " " + string(r.input)
	}
	return nil, nil
}

// preflight runs the action's Preflight hook in phase prepare. A ready call
// may get a confirmation override; a completed one gets its result; a denied
// one is a *DeniedError.
func (e *Engine) preflight(ctx context.Context, id Identity, a *Action, input json.RawMessage) (*Confirmation, *Result, error) {
	if a.hooks.Preflight == nil {
		return nil, nil, nil
	}
	pf, err := a.hooks.Preflight(ctx, &PreflightRequest{Identity: id, Phase: PhasePrepare, Action: a.name, Input: input})
	if err != nil {
		return nil, nil, fmt.Errorf("call %s: preflight: %w", a.name, err)
	}
	switch pf.Verdict {
	case PreflightDenied:
		return nil, nil, &DeniedError{Code: DeniedByPreflight, Action: a.name, Reason: pf.Reason}
	case PreflightCompleted:
		return nil, &Result{Status: ResultSucceeded, Executed: ptr(false), Receipt: pf.Receipt, Result: pf.Result,
			Summary: store.DefaultSummary(a.name, cstype.StatusSucceeded, "It was already done.")}, nil
	case PreflightReady:
		return pf.Confirmation, nil, nil
	}
	return nil, nil, fmt.Errorf("call %s: preflight verdict %q: want ready, denied or completed", a.name, pf.Verdict)
}

// prepare runs the action's Prepare hook: the preview of the exact change
// and the state version it depends on.
func (e *Engine) prepare(ctx context.Context, c *Call, r *callRun) error {
	r.prep = &Prepared{Preview: r.conf.Title}
	if r.a.hooks.Prepare == nil {
		return nil
	}
	prep, err := r.a.hooks.Prepare(ctx, &PrepareRequest{Identity: c.Identity, Action: r.a.name, Input: r.input})
	if err != nil {
		return prepareErr(r.a, err)
	}
	r.prep = prep
	return nil
}

// prepareErr passes a Prepare hook's denial through as it is (a webhook
// backend answering 403/409/422 denies the call) and wraps anything else.
func prepareErr(a *Action, err error) error {
	var d *DeniedError
	if errors.As(err, &d) {
		return d
	}
	return fmt.Errorf("call %s: prepare: %w", a.name, err)
}

// record stores the call's proposal in one transaction, creating the thread
// if needed: a pending proposal; one approved by the grant findGrant found,
// if the grant still approves it in that transaction (else the call asks
// after all, as if no grant existed, so that a revocation already answered
// is never outrun); or, for a write the policy allows, a record already
// executing under this process' lease. created is false when a concurrent
// identical call stored it first: p is then that call's.
func (e *Engine) record(ctx context.Context, c *Call, r *callRun) (p *cstype.Proposal, created bool, err error) {
	a := r.a
	key, err := a.replacementKeyFor(r.input)
	if err != nil {
		return nil, false, fmt.Errorf("call %s: replacement key: %w", a.name, err)
	}
	now := e.clock()
	rule, confirmationID := &r.m.rule, "cnf_"+newID()
	var allowed *store.AllowedExecution
	if !r.asked() {
		// Nobody decides an allowed write, and its caller executes it now.
		rule, confirmationID = &Rule{TTL: r.m.rule.TTL, Approvers: []string{}}, ""
		r.mode = ModeWait
		allowed = &store.AllowedExecution{Owner: e.owner, LeaseDuration: e.lease}
		if a.callerExecuted {
			allowed.Owner = callerOwner(c.Identity.Actor)
		}
	}
	p = &cstype.Proposal{
		ID:                 "prp_" + newID(),
		Tenant:             c.Identity.Tenant,
		Requester:          c.Identity.Actor,
		RequesterRoles:     c.Identity.Roles,
		RequesterKind:      string(c.Identity.KindOrHuman()),
		ThreadID:           c.ThreadID,
		RunID:              c.RunID,
		ToolCallID:         c.ToolCallID,
		Action:             a.name,
		ActionVersion:      a.version,
		Input:              r.input,
		RawInput:           c.Input,
		InputDigest:        r.digest,
		Preview:            r.prep.Preview,
		StateVersion:       r.prep.StateVersion,
		Confirmation:       r.conf,
		ConfirmationID:     confirmationID,
		Mode:               r.mode,
		Approvers:          rule.Approvers,
		Quorum:             rule.Quorum,
		ForbidSelfApproval: rule.ForbidSelfApproval,
		Channels:           rule.Channels,
		RememberScopes:     rule.Remember,
		GrantAnyInput:      rule.GrantAnyInput,
		GrantTTL:           rule.GrantTTL,
		ReplacementKey:     key,
		ExpiresAt:          now.Add(rule.TTL),
		OperationID:        "op_" + newID(),
		RuleFingerprint:    r.fingerprint,
	}
	if r.m.matched {
		p.RuleMatch, p.RuleWhen = r.m.rule.Match, r.m.rule.whenText()
	}
	if rule.EscalateAfter > 0 {
		at := now.Add(rule.EscalateAfter)
		p.EscalateAt, p.EscalateTo = &at, slices.Clone(rule.EscalateTo)
	}
	if rule.RemindEvery > 0 {
		at := now.Add(rule.RemindEvery)
		p.RemindAt, p.RemindEvery = &at, rule.RemindEvery
	}
	params := &store.CreateProposalParams{Proposal: p, ApprovedBy: r.approvedBy, GrantID: r.grantID, Allowed: allowed}
	r.leaseAsked = time.Now()
	cr, err := e.store.CreateProposal(ctx, params)
	if errors.Is(err, cstype.ErrGrantNotLive) {
		// Revoked (or expired, or its rule changed) since lookup read it.
		r.approvedBy, r.grantID, r.mode = nil, "", askedMode(c, r)
		params.ApprovedBy, params.GrantID, p.Mode = nil, "", r.mode
		cr, err = e.store.CreateProposal(ctx, params)
	}
	switch {
	case errors.Is(err, cstype.ErrNotThreadOwner):
		// Another actor's call created the thread since lookup read it.
		return nil, false, notOwner(c)
	case err != nil:
		return nil, false, fmt.Errorf("call %s: create proposal: %w", a.name, err)
	}
	for _, s := range cr.Superseded {
		e.changed(ctx, s, cstype.StatusPending)
	}
	if !cr.Created {
		if cr.Proposal.Requester != c.Identity.Actor {
			return nil, false, notOwner(c)
		}
		if err := notReused(c, cr.Proposal); err != nil {
			return nil, false, err
		}
		return cr.Proposal, false, nil
	}
	e.changed(ctx, cr.Proposal, "")
	return cr.Proposal, true, nil
}

// executeAllowed executes the record of an allowed write, which this process
// holds under the lease its creation took, as any claimed execution: a crash
// or a lost lease leaves it to be recovered like an approved one.
func (e *Engine) executeAllowed(ctx context.Context, p *cstype.Proposal, asked time.Time) (*Result, error) {
	return e.executeHeld(ctx, p, asked)
}

// executeGranted executes a proposal a grant approved at its creation: the
// caller claims it at once.
func (e *Engine) executeGranted(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, error) {
	res, err := e.claimAndExecute(ctx, c, p)
	if !errors.Is(err, cstype.ErrConflict) {
		return res, err
	}
	if e.callerExecutes(p) {
		// An identical call claimed it first: it holds the lease.
		now, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", p.Action, err)
		}
		if now.Status == cstype.StatusExecuting {
			return e.callerExecuting(ctx, c, now)
		}
		return resultOf(now), nil
	}
	// A worker claimed it first (independent mode): its outcome is ours.
	settled, err := e.Wait(ctx, c.Identity, p.ID)
	if settled == nil {
		return nil, err
	}
	return resultOf(settled), err
}

// withoutWait passes a Result and an error through call.
func withoutWait(res *Result, err error) (*Result, *cstype.Proposal, error) { return res, nil, err }

// resumeOrWait answers a call whose proposal exists, or hands a wait-mode
// proposal back for Call to wait on.
func (e *Engine) resumeOrWait(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, *cstype.Proposal, error) {
	if p.Mode == ModeWait {
		return nil, p, nil
	}
	return withoutWait(e.resume(ctx, c, p))
}

// resume answers a call whose proposal exists, by its mode and state.
func (e *Engine) resume(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, error) {
	switch p.Mode {
	case ModeWait:
		return e.waitAndExecute(ctx, c, p)
	case ModeTwoPhase:
		switch p.Status {
		case cstype.StatusPending:
			return confirmationRequired(p), nil
		case cstype.StatusApproved:
			if c.Evidence != p.ConfirmationID {
				return confirmationRequired(p), nil
			}
			return e.claimAndExecute(ctx, c, p)
		case cstype.StatusExecuting:
			return e.waitSettled(ctx, c, p)
		}
		return resultOf(p), nil
	default: // independent: the worker executes
		if p.Status.Terminal() || p.Status == cstype.StatusReconciling {
			return resultOf(p), nil
		}
		return pendingReceipt(p), nil
	}
}
