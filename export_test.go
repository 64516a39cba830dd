package countersign

// SetTrailCheck bounds the chain events e's ProposalTrail reads, so that a
// test reaches the bound without writing MaxTrailCheck events.
func (e *Engine) SetTrailCheck(n int64) { e.trailCheck = n }
