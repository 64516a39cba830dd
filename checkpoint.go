package countersign

import (
	"context"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
)

// Signed checkpoints of the audit chain (docs/audit.md, ADR 0019): the
// sealer holding the lease signs them (internal/maintenance, checkpoints.go,
// says how and why); the engine reads them back.

// DefaultCheckpointEvery is how often the sealer signs checkpoints when
// SealerOptions.CheckpointEvery is 0.
const DefaultCheckpointEvery = auditchain.DefaultCheckpointEvery

// DefaultCheckpointBudget bounds the events one round of checkpoints reads
// of one tenant's chain: a chain checked for the first time (a store that
// had no key before) is checked this much a seal, a checkpoint signed at
// each step, rather than all at once while the lease waits.
const DefaultCheckpointBudget = 10_000

// CheckpointPage is one page of a tenant's signed checkpoints.
type CheckpointPage struct {
	// Checkpoints are in seq order.
	Checkpoints []*cstype.Checkpoint
	// Next is the seq to read on from (the after of the next page), or 0
	// when this page holds the last checkpoint.
	Next int64
}

// AuditCheckpoints returns the caller's tenant's signed checkpoints with
// seq > after, up to limit (1..MaxAuditPage; 0 means MaxAuditPage). Like the
// audit log it needs the operator role.
func (e *Engine) AuditCheckpoints(ctx context.Context, id Identity, after int64, limit int) (*CheckpointPage, error) {
	cps, next, err := auditPage(id, "audit checkpoints", after, limit, func(l int) ([]*cstype.Checkpoint, error) {
		return e.store.ListCheckpoints(ctx, &store.ListCheckpointsParams{Tenant: id.Tenant, After: after, Limit: l})
	}, func(cp *cstype.Checkpoint) int64 { return cp.Seq })
	if err != nil {
		return nil, err
	}
	return &CheckpointPage{Checkpoints: cps, Next: next}, nil
}
