package countersign

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/cstype"
)

// ResumeResult is what a resume of an interrupt came to: the caller's
// decision, or the outcome that stands.
type ResumeResult struct {
	// Decided is the answer to the caller's decision (applied, unchanged,
	// conflict, expired); nil when Stands.
	Decided *DecideResult
	// Stands is true when the caller may not decide the proposal but it
	// was past pending (decided by someone who may, or expired): nothing
	// was decided, and the caller, the thread's owner, follows the run
	// with the outcome that stands.
	Stands bool
	// Proposal is the proposal as it stands after the resume.
	Proposal *cstype.Proposal
}

// Resume takes a resume of an interrupt — a proposal a run of a thread
// waits on — by its thread's owner, as the decision d (docs/api.md, AG-UI:
// Resume). The rules are authority.go's: an agent credential is refused
// before anything is looked up (ActResume); anyone but the thread's owner
// is refused (mayResume); the owner's decision is then Decide's, except
// that an owner who may not decide a proposal already past pending is
// answered Stands rather than refused (resumeStands). A proposal made
// outside a run is no interrupt: an error wrapping ErrInvalidCall.
func (e *Engine) Resume(ctx context.Context, d *Decision) (*ResumeResult, error) {
	if err := mayAct(d.Identity, ActResume); err != nil {
		return nil, err
	}
	p, err := e.Proposal(ctx, d.Identity, d.ProposalID)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	t, err := e.thread(ctx, d.Identity, p.ThreadID)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if err := mayResume(d.Identity, t, p); err != nil {
		return nil, err
	}
	dr, err := e.Decide(ctx, d)
	if err == nil {
		return &ResumeResult{Decided: dr, Proposal: dr.Proposal}, nil
	}
	// Read again: decided meanwhile is as good as decided before.
	now, rerr := e.Proposal(ctx, d.Identity, p.ID)
	if rerr == nil && resumeStands(err, now) {
		return &ResumeResult{Stands: true, Proposal: now}, nil
	}
	return nil, err
}
