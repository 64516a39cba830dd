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
// Order. A tenant's chain is in event id order. Ids are drawn when an event
// is written, so an event written after another committed has a higher id:
// the chain agrees with causal order always, and with commit order for any
// two events one of which committed before the other was written. A driver
// whose writers run at once may meet an id not yet committed below ids that
// are: it seals up to it and waits (SealResult.Blocked), so that no event
// is ever passed over and none is chained out of id order.
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
	// how many events it sealed: fewer than Limit means it caught up, as
	// far as it can while Blocked.
	SealEvents(ctx context.Context, params *SealEventsParams) (*SealResult, error)

	// ReleaseSealLease gives the lease up, so that another process's sealer
	// takes over without waiting for it to expire. Releasing a lease that
	// is no longer held is not an error.
	ReleaseSealLease(ctx context.Context, params *ReleaseSealLeaseParams) error

	// ListAudit returns a tenant's sealed events with seq > After, in seq
	// order, at most Limit (1..MaxPageSize; 0 means MaxPageSize).
	ListAudit(ctx context.Context, params *ListAuditParams) ([]*AuditEvent, error)

	// ListProposalAudit returns a proposal's events with id > AfterID, in
	// id order, at most Limit (1..MaxPageSize; 0 means MaxPageSize), each
	// with its place in its tenant's chain; an event not sealed yet has
	// Seq 0 and no hashes.
	ListProposalAudit(ctx context.Context, params *ListProposalAuditParams) ([]*AuditEvent, error)

	// ListChainHeads returns the tenants whose chains hold a sealed event,
	// in byte order of their names, after AfterTenant, at most Limit
	// (1..MaxPageSize; 0 means MaxPageSize): each with its chain's last
	// seq and hash, and its newest checkpoint (the one of the highest seq;
	// nil when it has none). The sealer reads it to sign checkpoints.
	ListChainHeads(ctx context.Context, params *ListChainHeadsParams) ([]*TenantChain, error)

	// WriteCheckpoints renews the sealing lease (Token, for LeaseDuration)
	// and stores signed checkpoints, in one transaction: only the lease's
	// holder writes them. A token that is no longer the lease's is
	// ErrLeaseLost, and nothing is written. A tenant has at most one
	// checkpoint a seq: one for a seq already stored replaces it when it
	// has the same hash and a later At (an idle chain signed again), and
	// is otherwise dropped, so that a stored checkpoint never comes to
	// vouch for another hash.
	WriteCheckpoints(ctx context.Context, params *WriteCheckpointsParams) (*SealLease, error)

	// ListCheckpoints returns a tenant's checkpoints with seq > After, in
	// seq order, at most Limit (1..MaxPageSize; 0 means MaxPageSize).
	ListCheckpoints(ctx context.Context, params *ListCheckpointsParams) ([]*Checkpoint, error)
}

// TenantChain is where one tenant's chain ends, and its newest checkpoint.
type TenantChain struct {
	Tenant string
	Head   ChainHead
	// Checkpoint is the tenant's checkpoint of the highest seq; nil when it
	// has none.
	Checkpoint *Checkpoint
}

// ListChainHeadsParams selects a page of tenants.
type ListChainHeadsParams struct {
	AfterTenant string
	Limit       int
}

// WriteCheckpointsParams stores checkpoints under the sealing lease.
type WriteCheckpointsParams struct {
	Token         string
	LeaseDuration time.Duration
	Checkpoints   []*Checkpoint
}

// ListCheckpointsParams selects a page of a tenant's checkpoints.
type ListCheckpointsParams struct {
	Tenant string
	After  int64
	Limit  int
}

// ValidateCheckpoints checks the parameters of WriteCheckpoints: a lease,
// and checkpoints a chain can have.
func ValidateCheckpoints(params *WriteCheckpointsParams) error {
	if err := ValidateSealParams("", params.Token, params.LeaseDuration, 0); err != nil {
		return err
	}
	type place struct {
		tenant string
		seq    int64
	}
	seen := map[place]bool{}
	for _, c := range params.Checkpoints {
		switch {
		case c == nil:
			return invalidParams("a nil checkpoint")
		case c.Tenant == "":
			return invalidParams("a checkpoint needs a tenant")
		case c.Seq < 1:
			return invalidParams("a checkpoint of %s at seq %d: seqs start at 1", c.Tenant, c.Seq)
		case len(c.Hash) != 64 || c.At.IsZero() || c.KeyID == "" || c.Signature == "":
			return invalidParams("a checkpoint of %s at seq %d needs a hash of 64 hex digits, a time, a key id and a signature", c.Tenant, c.Seq)
		case seen[place{c.Tenant, c.Seq}]:
			return invalidParams("two checkpoints of %s at seq %d in one write", c.Tenant, c.Seq)
		}
		seen[place{c.Tenant, c.Seq}] = true
	}
	return nil
}

// CheckpointLeaseLost returns the error WriteCheckpoints answers when its
// token is no longer the lease's; it matches ErrLeaseLost.
func CheckpointLeaseLost() error {
	return fmt.Errorf("write audit checkpoints: the sealing lease is another's: %w", ErrLeaseLost)
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
	// Blocked reports that sealing stopped at a hole: an event id it cannot
	// see, below ids it can, drawn by a transaction still open (the events
	// after it wait for it to commit) or one rolled back (passed by a later
	// seal once the transactions as old as it have ended). Only a store
	// whose writers run at once meets one (PostgreSQL's).
	Blocked bool
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

// ListProposalAuditParams selects a page of a proposal's events.
type ListProposalAuditParams struct {
	Tenant     string
	ProposalID string
	AfterID    int64
	Limit      int
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

// PageLimit is how many rows a list read returns at most for the Limit
// asked, where its contract says "1..MaxPageSize; 0 means MaxPageSize":
// MaxPageSize for 0 (or less), and for more than MaxPageSize.
func PageLimit(limit int) int {
	if limit <= 0 || limit > MaxPageSize {
		return MaxPageSize
	}
	return limit
}
