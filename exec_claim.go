package countersign

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

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

// claimAndExecute claims an approved proposal for this caller and executes it.
// A caller-executed action is claimed for the caller, which runs it: the
// answer is the claim (see handOver).
func (e *Engine) claimAndExecute(ctx context.Context, c *Call, p *cstype.Proposal) (*Result, error) {
	asked := time.Now()
	byCaller := e.callerExecutes(p)
	owner := e.owner
	if byCaller {
		owner = callerOwner(p.Requester)
	}
	claimed, err := e.store.Claim(ctx, &store.ClaimParams{
		Tenant: p.Tenant, ID: p.ID, Owner: owner, LeaseDuration: e.lease, ConsumedBy: c.ToolCallID,
	})
	e.claimSpan(ctx, cmp.Or(claimed, p), asked, err)
	if err != nil {
		// A claim that finds the approval lapsed expires it and hands back
		// the expired proposal, so this process settles it exactly once, and
		// the caller is told it expired.
		if claimed != nil && claimed.Status == cstype.StatusExpired {
			e.changed(ctx, claimed, cstype.StatusApproved)
			return resultOf(claimed), nil
		}
		return nil, err
	}
	e.changed(ctx, claimed, p.Status)
	if byCaller {
		return e.handOver(ctx, claimed)
	}
	return e.executeHeld(ctx, claimed, asked)
}

// executeHeld executes, for its caller, an approved proposal this process
// holds under the lease that a claim (or an allowed write's record) asked
// for at asked took, and answers the caller.
func (e *Engine) executeHeld(ctx context.Context, p *cstype.Proposal, asked time.Time) (*Result, error) {
	settled, err := e.executeClaimed(ctx, &store.Claimed{Proposal: p, From: cstype.StatusApproved}, asked, e.lease, nil)
	if errors.Is(err, cstype.ErrLeaseLost) {
		// The execution was given up with its lease: whoever claims the
		// proposal next settles it (or already did). The caller is told
		// where it stands, as any waiter would be, and a repeat of the call
		// later answers the outcome.
		now, gerr := e.store.GetProposal(context.WithoutCancel(ctx), &store.GetProposalParams{Tenant: p.Tenant, ID: p.ID})
		if gerr != nil {
			return nil, fmt.Errorf("%w (and reading proposal %s: %w)", err, p.ID, gerr)
		}
		return resultOf(now), nil
	}
	if err != nil {
		return nil, err
	}
	return resultOf(settled), nil
}
