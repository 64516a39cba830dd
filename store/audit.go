package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/internal/auditchain"
)

// Audit is the audit log's hash chain: every event of a tenant is given a
// sequence number (1, 2, 3, … per tenant) and hashed into its tenant's
// chain after it commits, by one sealer holding the store's sealing lease.
// Writers never wait for the chain: an event is written as before, unsealed,
// and sealed a moment later.
//
// Order. SealEvents seals, in one transaction, the events that had
// committed when it began and were not sealed yet, in id order. An event
// that commits later is sealed by a later call, after them. So the chain's
// order agrees with commit order for any two events one of which committed
// before a seal began and the other after it, and with causal order always:
// an event written after another committed has a higher id (ids are drawn
// when an event is written) and cannot be sealed before it. No event is
// ever passed over: unsealed is a state of the row, not a position of a
// reader, so a late commit is sealed next time whatever its id.
//
// Concurrency: a sealing lease is held by one owner at a time; SealEvents
// is fenced by the lease's token and, on a database, serialised with every
// other sealing write, so that two sealers (a stale one among them) never
// give two events one seq: the chain has no gaps and no forks.
type Audit interface {
	// AcquireSealLease takes the store's sealing lease for Owner for
	// LeaseDuration, when no one holds it or its holder's lease has
	// expired (by the store's clock: the database's, where there is one).
	// A lease someone else holds is *SealLeaseHeldError (ErrSealLeaseHeld).
	AcquireSealLease(ctx context.Context, params *AcquireSealLeaseParams) (*SealLease, error)

	// SealEvents renews the lease (Token, for LeaseDuration) and seals up to
	// Limit committed events not yet sealed, across every tenant, in one
	// transaction. A token that is no longer the lease's (another sealer
	// took it over) is ErrLeaseLost, and nothing is sealed. Sealed reports
	// how many events it sealed: fewer than Limit means it caught up.
	SealEvents(ctx context.Context, params *SealEventsParams) (*SealResult, error)

	// ReleaseSealLease gives the lease up, so that another process's sealer
	// takes over without waiting for it to expire. Releasing a lease that
	// is no longer held is not an error.
	ReleaseSealLease(ctx context.Context, params *ReleaseSealLeaseParams) error

	// ListAudit returns a tenant's sealed events with seq > After, in seq
	// order, at most Limit (1..MaxPageSize; 0 means MaxPageSize).
	ListAudit(ctx context.Context, params *ListAuditParams) ([]*AuditEvent, error)
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
		Seq: e.Seq, ID: e.ID, Type: string(e.Type), ProposalID: e.ProposalID, Actor: e.Actor, Via: e.Via,
		Status: string(e.Status), Detail: e.Detail, At: auditchain.FormatTime(e.At), PrevHash: e.PrevHash, Hash: e.Hash,
	}
}

// ChainHead is the last sealed event of one tenant's chain.
type ChainHead struct {
	Seq  int64
	Hash string
}

// ChainEvents seals evs (unsealed events, in the order they are to be
// chained) onto the heads of their tenants' chains: each gets the next seq
// of its tenant, its prev_hash and its hash. heads holds each tenant's head
// as stored (a tenant absent from it has no sealed event yet) and is
// advanced in place. Every driver seals through it, so that the chain's
// hash is computed by one function.
func ChainEvents(heads map[string]ChainHead, evs []*Event) []*AuditEvent {
	out := make([]*AuditEvent, len(evs))
	for i, e := range evs {
		h := heads[e.Tenant]
		ae := &AuditEvent{Event: *e, Seq: h.Seq + 1, PrevHash: h.Hash}
		ae.Hash = auditchain.Hash(ae.Chained())
		heads[e.Tenant] = ChainHead{Seq: ae.Seq, Hash: ae.Hash}
		out[i] = ae
	}
	return out
}

// SealLease is the store's sealing lease.
type SealLease struct {
	Owner     string
	Token     string
	ExpiresAt time.Time
}

// AcquireSealLeaseParams asks for the sealing lease.
type AcquireSealLeaseParams struct {
	Owner         string
	LeaseDuration time.Duration
}

// SealEventsParams seals a batch under the lease.
type SealEventsParams struct {
	Token         string
	LeaseDuration time.Duration
	Limit         int // 0: DefaultSealBatch
}

// DefaultSealBatch bounds the events one SealEvents seals when its Limit is 0.
const DefaultSealBatch = 1000

// SealResult reports a sealing.
type SealResult struct {
	Sealed int
	// Lease is the lease as renewed.
	Lease *SealLease
}

// ReleaseSealLeaseParams gives the lease up.
type ReleaseSealLeaseParams struct {
	Token string
}

// ListAuditParams selects a page of a tenant's chain.
type ListAuditParams struct {
	Tenant string
	After  int64
	Limit  int
}

// ErrSealLeaseHeld matches a *SealLeaseHeldError.
var ErrSealLeaseHeld = errors.New("sealing lease held")

// SealLeaseHeldError reports that another owner holds the sealing lease.
type SealLeaseHeldError struct {
	Owner     string
	ExpiresAt time.Time
}

func (e *SealLeaseHeldError) Error() string {
	return "sealing lease held by " + e.Owner + " until " + e.ExpiresAt.UTC().Format(time.RFC3339Nano)
}

// Is makes errors.Is(err, ErrSealLeaseHeld) hold.
func (e *SealLeaseHeldError) Is(target error) bool { return target == ErrSealLeaseHeld }

// ValidateSealParams checks the parameters of a sealing call.
func ValidateSealParams(owner, token string, lease time.Duration, limit int) error {
	switch {
	case lease <= 0:
		return invalidParams("a sealing lease needs a positive duration, not %v", lease)
	case limit < 0:
		return invalidParams("a sealing batch limit must not be negative, not %d", limit)
	case owner == "" && token == "":
		return invalidParams("a sealing lease needs an owner or a token")
	}
	return nil
}

// SealLeaseLost returns the error SealEvents answers when its token is no
// longer the lease's; it matches ErrLeaseLost.
func SealLeaseLost() error {
	return fmt.Errorf("seal audit events: the sealing lease is another's: %w", ErrLeaseLost)
}
