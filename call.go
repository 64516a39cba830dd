package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
}

// ResultStatus is what a call came to. It mirrors API.md's call statuses.
type ResultStatus string

// The call result statuses. Denials and invalid evidence are errors
// (*DeniedError, *EvidenceError), not statuses.
const (
	ResultSucceeded            ResultStatus = "succeeded"
	ResultFailed               ResultStatus = "failed"
	ResultPending              ResultStatus = "pending"
	ResultConfirmationRequired ResultStatus = "confirmation_required"
	ResultRejected             ResultStatus = "rejected"
	ResultExpired              ResultStatus = "expired"
	ResultSuperseded           ResultStatus = "superseded"
	ResultCancelled            ResultStatus = "cancelled"
	ResultUnknown              ResultStatus = "unknown"
	ResultReconciling          ResultStatus = "reconciling"
)

// Result is what the calling agent gets back.
type Result struct {
	Status ResultStatus
	// Executed says whether Execute was called: nil when nobody can know.
	Executed *bool
	Receipt  string
	Result   json.RawMessage
	Error    string
	// Proposal is nil when no approval was needed.
	Proposal *store.Proposal
	// ProposalID, ConfirmationID, Summary and ExpiresAt describe a pending
	// proposal (independent receipt, two-phase confirmation).
	ProposalID     string
	ConfirmationID string
	Summary        string
	ExpiresAt      time.Time
	// GrantID names the remembered approval that approved the call, if any.
	GrantID string
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

// Call runs one invocation (DESIGN.md §2). Denials return *DeniedError, bad
// two-phase evidence *EvidenceError, schema failures *InvalidInputError; every
// other answer, including a human's rejection, is a Result.
//
// In wait mode, when ctx ends before a decision, Call returns the pending
// Result together with ctx's error: the proposal is durable, and repeating the
// same call resumes waiting.
func (e *Engine) Call(ctx context.Context, c *Call) (*Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	a, ok := e.Action(c.Action)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrActionNotFound, c.Action)
	}
	m := e.policy.evaluate(a)
	if m.effect == EffectDeny {
		return nil, &DeniedError{Code: DeniedByPolicy, Action: a.name, Reason: "the policy denies " + a.name}
	}
	mode := c.Mode
	if mode == "" {
		mode = m.rule.Mode
	}

	// A repeated tool call resumes its proposal: it never proposes again.
	if m.effect == EffectAsk {
		p, err := e.store.GetProposalByToolCall(ctx, &store.GetProposalByToolCallParams{
			Tenant: c.Identity.Tenant, ThreadID: c.ThreadID, ToolCallID: c.ToolCallID,
		})
		switch {
		case err == nil:
			// The stored input is what was approved; the repeat's is ignored.
			return e.resume(ctx, c, a, p)
		case !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("call %s: %w", a.name, err)
		}
	}
	snapshot, digest, err := a.prepareInput(c.Input)
	if err != nil {
		return nil, err
	}
	if m.effect == EffectAsk {
		if c.Evidence != "" {
			res, err, handled := e.spendEvidence(ctx, c, a, digest)
			if handled {
				return res, err
			}
		}
	}

	if err := e.authorize(ctx, a, c.Identity, PhasePropose, snapshot, ""); err != nil {
		return nil, err
	}
	if m.effect == EffectAllow {
		return e.executeDirect(ctx, c, a, snapshot)
	}
	// A live grant stands in for the humans, but the call still gets a
	// proposal (and so an operation id, an outcome, a replay record), and
	// still runs preflight and prepare below.
	var approvedBy *store.Decision
	if g, err := e.store.FindGrant(ctx, &store.FindGrantParams{
		Tenant: c.Identity.Tenant, Requester: c.Identity.Actor, ThreadID: c.ThreadID, RunID: c.RunID,
		Action: a.name, ActionVersion: a.version, InputDigest: digest,
	}); err == nil {
		approvedBy = &store.Decision{Actor: grantActor + g.ID, Via: viaGrant, Reason: "remembered approval by " + g.GrantedBy}
		if mode == ModeTwoPhase {
			mode = ModeWait // there is nothing to confirm: the caller executes now
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("call %s: find grant: %w", a.name, err)
	}

	conf := Confirmation{Title: fill(a.confirmation.Title, snapshot), Verb: a.confirmation.Verb}
	override, done, err := e.preflight(ctx, c.Identity, a, snapshot)
	switch {
	case err != nil:
		return nil, err
	case done != nil:
		return done, nil
	case override != nil:
		conf = *override
	}
	if conf.Title == "" {
		conf.Title = a.name + " " + string(snapshot)
	}
	prep := &Prepared{Preview: conf.Title}
	if a.hooks.Prepare != nil {
		prep, err = a.hooks.Prepare(ctx, &PrepareRequest{Identity: c.Identity, Action: a.name, Input: snapshot})
		if err != nil {
			return nil, prepareErr(a, err)
		}
	}
	key, err := a.replacementKeyFor(snapshot)
	if err != nil {
		return nil, fmt.Errorf("call %s: replacement key: %w", a.name, err)
	}
	now := e.clock()
	p := &store.Proposal{
		ID:                 "prp_" + newID(),
		Tenant:             c.Identity.Tenant,
		Requester:          c.Identity.Actor,
		RequesterRoles:     c.Identity.Roles,
		ThreadID:           c.ThreadID,
		RunID:              c.RunID,
		ToolCallID:         c.ToolCallID,
		Action:             a.name,
		ActionVersion:      a.version,
		Input:              snapshot,
		RawInput:           c.Input,
		InputDigest:        digest,
		Preview:            prep.Preview,
		StateVersion:       prep.StateVersion,
		Confirmation:       conf,
		ConfirmationID:     "cnf_" + newID(),
		Mode:               mode,
		Approvers:          m.rule.Approvers,
		Quorum:             m.rule.Quorum,
		ForbidSelfApproval: m.rule.ForbidSelfApproval,
		Channels:           m.rule.Channels,
		RememberScopes:     m.rule.Remember,
		GrantAnyInput:      m.rule.GrantAnyInput,
		GrantTTL:           m.rule.GrantTTL,
		ReplacementKey:     key,
		ExpiresAt:          now.Add(m.rule.TTL),
		OperationID:        "op_" + newID(),
	}
	cr, err := e.store.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p, ApprovedBy: approvedBy})
	if err != nil {
		return nil, fmt.Errorf("call %s: create proposal: %w", a.name, err)
	}
	for _, s := range cr.Superseded {
		e.changed(ctx, s, store.StatusPending)
	}
	if !cr.Created {
		// A concurrent identical call created it first: resume that one.
		return e.resume(ctx, c, a, cr.Proposal)
	}
	e.changed(ctx, cr.Proposal, "")
	if approvedBy != nil {
		res, err := e.claimAndExecute(ctx, c, cr.Proposal)
		if errors.Is(err, store.ErrConflict) {
			// A worker claimed it first (independent mode): its outcome is ours.
			p, err := e.Wait(ctx, c.Identity, cr.Proposal.ID)
			if p == nil {
				return nil, err
			}
			return resultOf(p), err
		}
		return res, err
	}
	return e.resume(ctx, c, a, cr.Proposal)
}

// A decision taken by a remembered approval names the grant as its actor and
// comes via a channel no human decision may use (Decide refuses it).
const (
	grantActor = "grant:"
	viaGrant   = "grant"
)

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
			Summary: store.DefaultSummary(a.name, store.StatusSucceeded, "It was already done.")}, nil
	case PreflightReady:
		return pf.Confirmation, nil, nil
	}
	return nil, nil, fmt.Errorf("call %s: preflight verdict %q: want ready, denied or completed", a.name, pf.Verdict)
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

// resume answers a call whose proposal exists, by the proposal's state.
func (e *Engine) resume(ctx context.Context, c *Call, a *Action, p *store.Proposal) (*Result, error) {
	switch p.Mode {
	case ModeWait:
		return e.waitAndExecute(ctx, c, p)
	case ModeTwoPhase:
		switch p.Status {
		case store.StatusPending:
			return confirmationRequired(p), nil
		case store.StatusApproved:
			if c.Evidence != p.ConfirmationID {
				return confirmationRequired(p), nil
			}
			return e.claimAndExecute(ctx, c, p)
		case store.StatusExecuting:
			return e.waitSettled(ctx, c, p)
		}
		return resultOf(p), nil
	default: // independent: the worker executes
		if p.Status.Terminal() || p.Status == store.StatusReconciling {
			return resultOf(p), nil
		}
		return pendingReceipt(p), nil
	}
}

// spendEvidence handles a two-phase retry that carries evidence from another
// tool call. handled is false when the evidence is inert (unknown, or bound to
// another thread or actor) or expired: then the call proposes afresh.
func (e *Engine) spendEvidence(ctx context.Context, c *Call, a *Action, digest string) (res *Result, err error, handled bool) {
	p, err := e.store.GetProposalByConfirmation(ctx, &store.GetProposalByConfirmationParams{
		Tenant: c.Identity.Tenant, ConfirmationID: c.Evidence,
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, false
	}
	if err != nil {
		return nil, fmt.Errorf("call %s: evidence: %w", a.name, err), true
	}
	// Evidence from another thread or actor is never a hint: it is absent.
	if p.ThreadID != c.ThreadID || p.Requester != c.Identity.Actor || p.Mode != ModeTwoPhase {
		return nil, nil, false
	}
	invalid := func(r EvidenceReason) (*Result, error, bool) {
		return nil, &EvidenceError{Reason: r, ProposalID: p.ID, ConfirmationID: c.Evidence}, true
	}
	if p.Action != a.name || p.ActionVersion != a.version || p.InputDigest != digest {
		return invalid(EvidenceMismatch)
	}
	if store.Due(p, e.clock()) {
		if tr, err := e.store.Expire(ctx, &store.ExpireParams{Tenant: p.Tenant, ID: p.ID}); err == nil && tr.Changed {
			e.changed(ctx, tr.Proposal, tr.From)
		}
		return nil, nil, false
	}
	switch p.Status {
	case store.StatusPending:
		return confirmationRequired(p), nil, true
	case store.StatusApproved:
		res, err := e.claimAndExecute(ctx, c, p)
		if errors.Is(err, store.ErrConflict) {
			return invalid(EvidenceConsumed)
		}
		return res, err, true
	case store.StatusExpired:
		return nil, nil, false
	case store.StatusRejected, store.StatusCancelled, store.StatusSuperseded:
		return invalid(EvidenceDenied)
	default: // executing or settled
		if p.ConsumedBy == c.ToolCallID {
			res, err := e.waitSettled(ctx, c, p)
			return res, err, true
		}
		return invalid(EvidenceConsumed)
	}
}

// waitAndExecute blocks until the proposal is decided, then (in wait mode)
// executes an approval, or returns the outcome.
func (e *Engine) waitAndExecute(ctx context.Context, c *Call, p *store.Proposal) (*Result, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if c.WaitTimeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, c.WaitTimeout)
	}
	defer cancel()
	wake, unsubscribe := e.hub.Subscribe(p.ID)
	defer unsubscribe()
	poll := time.NewTicker(e.waitPoll)
	defer poll.Stop()
	deadline := time.NewTimer(time.Hour)
	defer deadline.Stop()
	for {
		switch {
		case p.Status == store.StatusApproved:
			res, err := e.claimAndExecute(ctx, c, p)
			if !errors.Is(err, store.ErrConflict) {
				return res, err
			}
			// Another caller claimed it (or it lapsed): wait for its outcome.
		case p.Status.Terminal() || p.Status == store.StatusReconciling:
			return resultOf(p), nil
		case p.Status == store.StatusPending && store.Due(p, e.clock()):
			tr, err := e.store.Expire(ctx, &store.ExpireParams{Tenant: p.Tenant, ID: p.ID})
			if err == nil && tr.Changed {
				e.changed(ctx, tr.Proposal, tr.From)
			}
		}
		// Wake at the deadline too, to expire the proposal without a sweeper.
		if p.Status == store.StatusPending {
			deadline.Reset(max(p.ExpiresAt.Sub(e.clock()), 0) + time.Millisecond)
		} else {
			deadline.Reset(time.Hour)
		}
		select {
		case <-wctx.Done():
			res := pendingReceipt(p)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, nil
		case <-wake:
		case <-poll.C:
		case <-deadline.C:
		}
		fresh, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if err != nil {
			if wctx.Err() != nil { // the wait ended while reading: still pending
				return pendingReceipt(p), ctx.Err()
			}
			return nil, fmt.Errorf("wait for proposal %s: %w", p.ID, err)
		}
		p = fresh
	}
}

// waitSettled waits for an executing proposal to settle, then returns its outcome.
func (e *Engine) waitSettled(ctx context.Context, c *Call, p *store.Proposal) (*Result, error) {
	if p.Status != store.StatusExecuting {
		return resultOf(p), nil
	}
	return e.waitAndExecute(ctx, c, p)
}

// Wait blocks until the proposal is terminal or reconciling, or ctx ends, and
// returns it. It never executes anything.
func (e *Engine) Wait(ctx context.Context, id Identity, proposalID string) (*store.Proposal, error) {
	wake, unsubscribe := e.hub.Subscribe(proposalID)
	defer unsubscribe()
	poll := time.NewTicker(e.waitPoll)
	defer poll.Stop()
	for {
		p, err := e.Get(ctx, id, proposalID)
		if err != nil {
			return nil, err
		}
		if p.Status.Terminal() || p.Status == store.StatusReconciling {
			return p, nil
		}
		if store.Due(p, e.clock()) {
			if tr, err := e.store.Expire(ctx, &store.ExpireParams{Tenant: p.Tenant, ID: p.ID}); err == nil && tr.Changed {
				e.changed(ctx, tr.Proposal, tr.From)
				continue
			}
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-wake:
		case <-poll.C:
		}
	}
}

func confirmationRequired(p *store.Proposal) *Result {
	return &Result{
		Status: ResultConfirmationRequired, Executed: ptr(false), Proposal: p,
		ProposalID: p.ID, ConfirmationID: p.ConfirmationID, Summary: p.Confirmation.Title, ExpiresAt: p.ExpiresAt,
	}
}

func pendingReceipt(p *store.Proposal) *Result {
	return &Result{
		Status: ResultPending, Executed: ptr(false), Proposal: p,
		ProposalID: p.ID, Summary: p.Confirmation.Title, ExpiresAt: p.ExpiresAt,
	}
}

// resultOf turns a settled (or reconciling) proposal into the caller's answer.
func resultOf(p *store.Proposal) *Result {
	r := &Result{Status: ResultStatus(p.Status), Proposal: p, ProposalID: p.ID, ExpiresAt: p.ExpiresAt}
	if d := p.Decisions; len(d) > 0 && d[0].Via == viaGrant && d[0].Decision == store.VerdictApproved && strings.HasPrefix(d[0].Actor, grantActor) {
		r.GrantID = strings.TrimPrefix(p.Decisions[0].Actor, grantActor)
	}
	if o := p.Outcome; o != nil {
		r.Executed = o.Executed
		r.Receipt = o.Receipt
		r.Result = o.Result
		r.Summary = o.Summary
		if o.Error != nil {
			r.Error = *o.Error
		}
	}
	switch p.Status {
	case store.StatusUnknown, store.StatusReconciling:
		r.Executed = nil
	case store.StatusPending, store.StatusApproved, store.StatusExecuting:
		r.Status = ResultPending
	}
	return r
}

func ptr[T any](v T) *T { return &v }
