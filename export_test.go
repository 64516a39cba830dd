package countersign

// SetTrailCheck bounds the chain events e's ProposalTrail reads, so that a
// test reaches the bound without writing MaxTrailCheck events.
func (e *Engine) SetTrailCheck(n int64) { e.trailCheck = n }

// SetCheckpointBudget bounds the events of a tenant's chain one round of
// checkpoints reads, so that a test sees a chain checked in steps.
func (e *Engine) SetCheckpointBudget(n int64) { e.checkpointBudget = n }
