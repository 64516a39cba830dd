package countersign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
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
	res, wait, err := e.call(ctx, c)
	if wait != nil {
		// Waiting happens here, below Call's small frame rather than call's
		// large one: a blocked waiter's stack is what 10,000 waiters pay
		// 10,000 times, and the runtime shrinks it only to four times what
		// it uses.
		return e.waitAndExecute(ctx, c, wait)
	}
	return res, err
}

// call runs Call up to the wait: a wait-mode call whose proposal is not
// settled returns it as wait, for Call to wait on.
func (e *Engine) call(ctx context.Context, c *Call) (res *Result, wait *store.Proposal, err error) {
	if err := c.validate(); err != nil {
		return nil, nil, err
	}
	a, ok := e.Action(c.Action)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrActionNotFound, c.Action)
	}
	m := e.policy.evaluate(a)
	if m.effect == EffectDeny {
		return nil, nil, &DeniedError{Code: DeniedByPolicy, Action: a.name, Reason: "the policy denies " + a.name}
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
			return e.resumeOrWait(ctx, c, a, p)
		case !errors.Is(err, store.ErrNotFound):
			return nil, nil, fmt.Errorf("call %s: %w", a.name, err)
		}
	}
	snapshot, digest, err := a.prepareInput(c.Input)
	if err != nil {
		return nil, nil, err
	}
	if m.effect == EffectAsk {
		if c.Evidence != "" {
			res, err, handled := e.spendEvidence(ctx, c, a, digest)
			if handled {
				return res, nil, err
			}
		}
	}

	if err := e.authorize(ctx, a, c.Identity, PhasePropose, snapshot, ""); err != nil {
		return nil, nil, err
	}
	if m.effect == EffectAllow {
		return withoutWait(e.executeDirect(ctx, c, a, snapshot))
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
		return nil, nil, fmt.Errorf("call %s: find grant: %w", a.name, err)
	}

	conf := Confirmation{Title: fill(a.confirmation.Title, snapshot), Verb: a.confirmation.Verb}
	override, done, err := e.preflight(ctx, c.Identity, a, snapshot)
	switch {
	case err != nil:
		return nil, nil, err
	case done != nil:
		return done, nil, nil
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
			return nil, nil, prepareErr(a, err)
		}
	}
	key, err := a.replacementKeyFor(snapshot)
	if err != nil {
		return nil, nil, fmt.Errorf("call %s: replacement key: %w", a.name, err)
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
		return nil, nil, fmt.Errorf("call %s: create proposal: %w", a.name, err)
	}
	for _, s := range cr.Superseded {
		e.changed(ctx, s, store.StatusPending)
	}
	if !cr.Created {
		// A concurrent identical call created it first: resume that one.
		return e.resumeOrWait(ctx, c, a, cr.Proposal)
	}
	e.changed(ctx, cr.Proposal, "")
	if approvedBy != nil {
		res, err := e.claimAndExecute(ctx, c, cr.Proposal)
		if errors.Is(err, store.ErrConflict) {
			// A worker claimed it first (independent mode): its outcome is ours.
			p, err := e.Wait(ctx, c.Identity, cr.Proposal.ID)
			if p == nil {
				return nil, nil, err
			}
			return resultOf(p), nil, err
		}
		return res, nil, err
	}
	return e.resumeOrWait(ctx, c, a, cr.Proposal)
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

// withoutWait passes a Result and an error through call.
func withoutWait(res *Result, err error) (*Result, *store.Proposal, error) { return res, nil, err }

// resumeOrWait answers a call whose proposal exists, or hands a wait-mode
// proposal back for Call to wait on.
func (e *Engine) resumeOrWait(ctx context.Context, c *Call, a *Action, p *store.Proposal) (*Result, *store.Proposal, error) {
	if p.Mode == ModeWait {
		return nil, p, nil
	}
	return withoutWait(e.resume(ctx, c, a, p))
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
//
// A waiter holds its goroutine, a hub subscription, the proposal and one
// timer; the engine's watcher (see watch) polls the store for all waiters
// at once, so an idle waiter costs no store reads of its own.
func (e *Engine) waitAndExecute(ctx context.Context, c *Call, p *store.Proposal) (*Result, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if c.WaitTimeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, c.WaitTimeout)
	}
	defer cancel()
	// Watch first, then re-read: a change between the caller's read and the
	// subscription is seen by the re-read, and every later one wakes us.
	wake, unwatch := e.watch(p)
	defer unwatch()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		fresh, err := e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if err != nil {
			return e.waitFailed(wctx, ctx, p, err)
		}
		p = fresh
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
				continue
			}
		}
		// Wake at the deadline too, to expire the proposal without a
		// sweeper, and at the latest after waitRecheck (see watch).
		next := e.recheck()
		if p.Status == store.StatusPending {
			next = min(next, max(p.ExpiresAt.Sub(e.clock()), 0)+time.Millisecond)
		}
		timer.Reset(next)
		select {
		case <-wctx.Done():
			res := pendingReceipt(p)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, nil
		case <-wake:
		case <-timer.C:
		}
	}
}

// waitFailed answers a wait whose store read failed: still pending if the
// wait ended meanwhile, an error otherwise.
func (e *Engine) waitFailed(wctx, ctx context.Context, p *store.Proposal, err error) (*Result, error) {
	if wctx.Err() != nil { // the wait ended while reading: still pending
		if ctx.Err() != nil {
			return pendingReceipt(p), ctx.Err()
		}
		return pendingReceipt(p), nil
	}
	return nil, fmt.Errorf("wait for proposal %s: %w", p.ID, err)
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
	wake, unwatch := e.watch(&store.Proposal{Tenant: id.Tenant, ID: proposalID})
	defer unwatch()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
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
		next := e.recheck()
		if p.Status == store.StatusPending {
			next = min(next, max(p.ExpiresAt.Sub(e.clock()), 0)+time.Millisecond)
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-wake:
		case <-timer.C:
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

// The waiters' watcher.
//
// Every waiting call (waitAndExecute, Wait) registers its proposal with the
// engine and subscribes to the hub; one goroutine per engine, running only
// while someone waits, finds the changes made by other processes for all of
// them at once: every WaitPoll it reads each waiting tenant's audit events
// after its cursor (every status change writes one) and wakes the waiters of
// the proposals named. Changes made through this engine wake their waiters
// directly (Engine.changed), and on a store with notifications (PostgreSQL
// LISTEN/NOTIFY) the watcher listens too, so other processes' changes wake
// waiters at once; the poll is what guarantees them.
//
// No change can slip between a waiter's read and its wake-up:
//   - a waiter registers before it re-reads its proposal;
//   - a tenant's cursor is taken from the store's events (the latest event of
//     one of its waiting proposals), and once it is set every waiter of the
//     tenant is woken to re-read, so a change either precedes that re-read or
//     writes an event after the cursor;
//   - each scan re-reads the events of the previous one (skipping those it
//     already published), because PostgreSQL may commit an event after one
//     with a higher id;
//   - as a last resort against a transaction that commits more than a poll
//     after writing its event, while the notification listener is down, each
//     waiter re-reads its own proposal every few hundred polls (recheck).

// waitRecheckPolls is how many WaitPolls pass, at most, before a waiter
// re-reads its own proposal even though nothing woke it.
const waitRecheckPolls = 600

// waitWatch is the engine's registry of waiting calls.
type waitWatch struct {
	mu      sync.Mutex
	tenants map[string]*tenantWatch
	waiters int
	running bool          // a watch loop runs
	idle    chan struct{} // told when the last waiter leaves
}

// tenantWatch follows one tenant's events for its waiting proposals. Only
// waiters is shared (under waitWatch.mu); the rest belongs to the loop.
type tenantWatch struct {
	waiters map[string]int // proposal id → registered waits
	ready   bool           // the cursor is set
	from    int64          // the next scan reads the events after from
	last    int64          // the highest event id read
	seen    map[int64]bool // the events above from already published
}

// watch registers a wait on p and returns its wake-up channel and the
// function that ends the registration. The caller must re-read p after
// watch returns and before it blocks.
func (e *Engine) watch(p *store.Proposal) (<-chan struct{}, func()) {
	wake, unsubscribe := e.hub.Subscribe(p.ID)
	w := &e.waits
	w.mu.Lock()
	if w.tenants == nil {
		w.tenants = map[string]*tenantWatch{}
	}
	tw := w.tenants[p.Tenant]
	if tw == nil {
		tw = &tenantWatch{waiters: map[string]int{}}
		w.tenants[p.Tenant] = tw
	}
	tw.waiters[p.ID]++
	w.waiters++
	if !w.running {
		w.running = true
		w.idle = make(chan struct{}, 1)
		go e.watchLoop(w.idle)
	}
	w.mu.Unlock()
	return wake, func() {
		w.mu.Lock()
		if tw.waiters[p.ID]--; tw.waiters[p.ID] <= 0 {
			delete(tw.waiters, p.ID)
		}
		w.waiters--
		if len(tw.waiters) == 0 && w.tenants[p.Tenant] == tw {
			delete(w.tenants, p.Tenant)
		}
		if w.waiters == 0 && w.running {
			select {
			case w.idle <- struct{}{}:
			default:
			}
		}
		w.mu.Unlock()
		unsubscribe()
	}
}

// recheck is how long a waiter blocks, at most, when nothing wakes it: a
// random time between half and all of waitRecheckPolls WaitPolls, so that
// waiters that started together do not re-read together.
func (e *Engine) recheck() time.Duration {
	d := e.waitPoll * waitRecheckPolls
	return d/2 + rand.N(d/2+1)
}

// watchLoop scans for the waiters every WaitPoll, and listens to the store's
// notifications if it has them, until nobody has waited for a moment (the
// smaller of WaitPoll and 100ms, so that a process whose calls wait one at a
// time does not restart it for each).
func (e *Engine) watchLoop(idle <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if n, ok := e.store.(store.Notifier); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = n.Listen(ctx, e.notified)
		}()
	}
	// The first scan sets the cursor at once, while few have registered.
	if !e.scanWaits(ctx) {
		return
	}
	t := time.NewTicker(e.waitPoll)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if !e.scanWaits(ctx) {
				return
			}
		case <-idle:
			time.Sleep(min(e.waitPoll, 100*time.Millisecond))
			if e.stopIfIdle() {
				return
			}
		}
	}
}

// stopIfIdle marks the loop stopped if nobody waits.
func (e *Engine) stopIfIdle() bool {
	w := &e.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiters == 0 {
		w.running = false
		return true
	}
	return false
}

// scanWaits reads every waiting tenant's new events and wakes the waiters of
// the proposals they name. It returns false, and marks the loop stopped, when
// nobody waits.
func (e *Engine) scanWaits(ctx context.Context) bool {
	w := &e.waits
	type job struct {
		tenant string
		tw     *tenantWatch
		probe  string // a waiting proposal, to set the cursor from
	}
	if e.stopIfIdle() {
		return false
	}
	w.mu.Lock()
	jobs := make([]job, 0, len(w.tenants))
	for tenant, tw := range w.tenants {
		j := job{tenant: tenant, tw: tw}
		if !tw.ready {
			for id := range tw.waiters {
				j.probe = id
				break
			}
		}
		jobs = append(jobs, j)
	}
	w.mu.Unlock()
	for _, j := range jobs {
		if !j.tw.ready {
			e.startCursor(ctx, j.tenant, j.tw, j.probe)
			continue
		}
		e.scanTenant(ctx, j.tenant, j.tw)
	}
	return true
}

// startCursor sets a tenant's cursor at the latest event of one of its
// waiting proposals, then wakes all its waiters to re-read: a change they
// might have missed before the cursor existed is in that re-read, and every
// later one comes after the cursor.
func (e *Engine) startCursor(ctx context.Context, tenant string, tw *tenantWatch, probe string) {
	var last int64
	for {
		evs, err := e.store.ListEvents(ctx, &store.ListEventsParams{Tenant: tenant, ProposalID: probe, AfterID: last})
		if err != nil {
			e.log.Warn("waiters: read events", "tenant", tenant, "err", err)
			return
		}
		if len(evs) == 0 {
			break
		}
		last = evs[len(evs)-1].ID
	}
	tw.from, tw.last, tw.ready, tw.seen = last, last, true, map[int64]bool{}
	e.waits.mu.Lock()
	ids := make([]string, 0, len(tw.waiters))
	for id := range tw.waiters {
		ids = append(ids, id)
	}
	e.waits.mu.Unlock()
	for _, id := range ids {
		e.hub.Publish(id)
	}
}

// scanTenant reads a tenant's events after its cursor and wakes the waiters
// they name. It reads the previous scan's events again, since an event may
// commit after one with a higher id, and publishes only the new ones.
func (e *Engine) scanTenant(ctx context.Context, tenant string, tw *tenantWatch) {
	seen := map[int64]bool{}
	last := tw.last
	for after := tw.from; ; {
		evs, err := e.store.ListEvents(ctx, &store.ListEventsParams{Tenant: tenant, AfterID: after})
		if err != nil {
			e.log.Warn("waiters: read events", "tenant", tenant, "err", err)
			return
		}
		for _, ev := range evs {
			if ev.ID > tw.last {
				seen[ev.ID] = true
			}
			// A creation is never news to a waiter: it read its proposal
			// after the proposal existed.
			if ev.Type != store.EventCreated && !tw.seen[ev.ID] {
				e.hub.Publish(ev.ProposalID)
			}
			last = max(last, ev.ID)
		}
		if len(evs) == 0 {
			break
		}
		after = evs[len(evs)-1].ID
	}
	tw.from, tw.last, tw.seen = tw.last, last, seen
}
