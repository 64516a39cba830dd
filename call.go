package countersign

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
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
	// ThreadOrigin says who named ThreadID: a client (the zero value), or
	// the MCP gateway, which alone may use the reserved thread ids
	// (ReservedThread).
	ThreadOrigin ThreadOrigin
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
	if e.tracer != nil {
		return e.tracedCall(ctx, c)
	}
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

// tracedCall is Call in a span of its own, which the call's proposal
// records (call_record.go) for the spans that follow it in other processes.
func (e *Engine) tracedCall(ctx context.Context, c *Call) (*Result, error) {
	ctx, span := e.tracer.Start(ctx, spanCall, trace.WithAttributes(
		attrOperation.String("execute_tool"), attrToolName.String(c.Action), attrToolCallID.String(c.ToolCallID),
		attrAction.String(c.Action), attrTenant.String(c.Identity.Tenant), attrThreadID.String(c.ThreadID),
	))
	if c.RunID != "" {
		span.SetAttributes(attrRunID.String(c.RunID))
	}
	res, wait, err := e.call(ctx, c)
	if wait != nil {
		_, res, err = e.await(ctx, c, wait)
	}
	if res != nil {
		span.SetAttributes(attribute.String("countersign.result", string(res.Status)))
		if id := cmp.Or(res.ProposalID, proposalID(res.Proposal)); id != "" {
			span.SetAttributes(attrProposalID.String(id))
		}
		if res.Proposal != nil {
			span.SetAttributes(attrMode.String(string(res.Proposal.Mode)))
		}
	}
	endSpan(span, nil, err)
	return res, err
}

func proposalID(p *cstype.Proposal) string {
	if p == nil {
		return ""
	}
	return p.ID
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

// The steps of a call, each in the file named for it (docs/architecture.md,
// "The path of a call"):
//
//	call.go            Call, call: validate, then the steps below in order
//	call_policy.go     resolve the action, apply the policy (its conditions:
//	                   policy_conditions.go), choose the mode, find a grant
//	call_replay.go     look up the tool call's record and the thread, check
//	                   ownership, replay a repeated call
//	call_evidence.go   spend a two-phase confirmation's evidence
//	call_record.go     preflight, prepare, record the proposal
//	call_wait.go       wait for the decision (its watcher: call_watch.go)
//	call_result.go     the answer
//	exec_claim.go      claim an approved proposal and execute it
//	exec_check.go      the checks just before Execute
//	exec_run.go        run Execute under the lease and settle
//	exec_lease.go      hold and renew the lease
//	exec_uncertain.go  reconcile, retry or give up on an uncertain outcome
//	exec_direct.go     a read the policy allows, executed without a record
//	exec_caller.go     a caller-executed action: hand-over, settle, renew

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
