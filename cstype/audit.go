package cstype

import (
	"time"

	"github.com/countersign/countersign/internal/auditchain"
)

// Checkpoint is a signed statement that a tenant's chain held Hash at Seq
// at the time At (auditchain.Checkpoint). A store keeps At to the
// microsecond: the signature covers its RFC 3339 spelling, so the sealer
// signs times no finer than that.
type Checkpoint struct {
	Tenant    string
	Seq       int64
	Hash      string
	At        time.Time
	KeyID     string
	Signature string
}

// Signed returns the checkpoint in its exported form, the form its
// signature covers.
func (c *Checkpoint) Signed() *auditchain.Checkpoint {
	return &auditchain.Checkpoint{Tenant: c.Tenant, Seq: c.Seq, Hash: c.Hash, At: auditchain.FormatTime(c.At), KeyID: c.KeyID, Signature: c.Signature}
}

// AuditEvent is an event sealed into its tenant's chain.
type AuditEvent struct {
	Event
	Seq      int64
	PrevHash string
	Hash     string
}

// Chained returns the event in the chain's exported form, the form its hash
// covers.
func (e *AuditEvent) Chained() *auditchain.Event {
	return &auditchain.Event{
		Seq: e.Seq, ID: e.ID, Type: string(e.Type), ProposalID: e.ProposalID, Actor: e.Actor, ActorKind: e.ActorKind, Via: e.Via,
		Status: string(e.Status), Detail: e.Detail, At: auditchain.FormatTime(e.At), PrevHash: e.PrevHash, Hash: e.Hash,
	}
}
