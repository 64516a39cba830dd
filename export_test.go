package countersign

import (
	"context"

	"github.com/countersign/countersign/internal/maintenance"
)

// SetTrailCheck bounds the chain events e's ProposalTrail reads, so that a
// test reaches the bound without writing MaxTrailCheck events.
func (e *Engine) SetTrailCheck(n int64) { e.trailCheck = n }

// SetCheckpointBudget bounds the events of a tenant's chain one round of
// checkpoints reads, so that a test sees a chain checked in steps.
func (e *Engine) SetCheckpointBudget(n int64) { e.checkpointBudget = n }

// SetSessionSweep bounds the expired sessions one StartSession removes, so
// that a test reaches the bound without starting a hundred sessions.
func (e *Engine) SetSessionSweep(n int) { e.sessionSweep = n }

// The periodic jobs take no identity and are no method of Engine (the
// Worker runs them). The root package's tests drive one job, one batch of
// a chosen size, at the moment they choose, on the same services the
// Worker runs; these shims give them that, in tests only.

// Sweep is one batch, of up to batch (DefaultSweepBatch when batch <= 0),
// of the expiry job: it returns how many proposals it expired.
func (e *Engine) Sweep(ctx context.Context, batch int) (int, error) {
	if batch <= 0 {
		batch = DefaultSweepBatch
	}
	return e.expireBatch(ctx, batch)
}

// SweepEscalations is one batch, of up to batch each, of the escalation and
// reminder jobs: it returns how many proposals each handled.
func (e *Engine) SweepEscalations(ctx context.Context, batch int) (escalated, reminded int, err error) {
	if batch <= 0 {
		batch = DefaultSweepBatch
	}
	return e.escalateBatch(ctx, batch)
}

// RunSealer runs the audit chain's sealer a Worker runs, with opts, and
// nothing else, until ctx ends; it returns ctx's error, or opts' when they
// are invalid.
func (e *Engine) RunSealer(ctx context.Context, opts SealerOptions) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	maintenance.Run(ctx, e.log, e.sealer(opts))
	return ctx.Err()
}

// ClaimShare is claimShare, for the table test of how a worker splits its
// free slots among idle claim lanes.
var ClaimShare = claimShare
