package maintenance

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/store"
)

// sealReleaseTimeout bounds a stopping sealer's release of its lease.
const sealReleaseTimeout = 5 * time.Second

// SealerStore is what Sealer needs of the store: the sealing lease and the
// seal, and, to sign checkpoints, the chains' heads, their events and the
// checkpoints' table.
type SealerStore interface {
	AcquireSealLease(ctx context.Context, params *store.AcquireSealLeaseParams) (*store.SealLease, error)
	SealEvents(ctx context.Context, params *store.SealEventsParams) (*store.SealResult, error)
	ReleaseSealLease(ctx context.Context, params *store.ReleaseSealLeaseParams) error
	ListChainHeads(ctx context.Context, params *store.ListChainHeadsParams) ([]*store.TenantChain, error)
	ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*store.AuditEvent, error)
	WriteCheckpoints(ctx context.Context, params *store.WriteCheckpointsParams) (*store.SealLease, error)
}

// SealerConfig configures a Sealer. countersign.SealerOptions validates the
// values and fills their defaults before they get here.
type SealerConfig struct {
	// Owner names this process in the lease.
	Owner string
	// Interval is how often the lease holder seals, and how often the
	// others try to take the lease; less than a third of LeaseDuration.
	Interval time.Duration
	// LeaseDuration is the sealing lease.
	LeaseDuration time.Duration
	// Batch bounds the events one seal writes.
	Batch int
	// SigningKey, when set, makes the lease holder sign a checkpoint of
	// every tenant's chain every CheckpointEvery (checkpoints.go).
	SigningKey ed25519.PrivateKey
	// CheckpointEvery is how often the checkpoints are signed.
	CheckpointEvery time.Duration
	// CheckpointBudget bounds the events one round of checkpoints reads of
	// one tenant's chain.
	CheckpointBudget int64
	// Now is the clock of the checkpoints. Default time.Now.
	Now func() time.Time
	// OnSealed, when set, is told the time whenever this sealer has chained
	// every event committed so far (a seal that found its batch not full
	// and no hole): the metrics' "sealed up to now" timestamp, whose age is
	// the sealer's lag.
	OnSealed func(at time.Time)
	// Logger receives the failures. Default slog.Default().
	Logger *slog.Logger
}

// Sealer builds the audit chain (docs/audit.md): every process may run one;
// they compete for the store's sealing lease, the holder chains every
// Interval the events that committed since, and, with a signing key, signs
// the chains' checkpoints. When it stops it gives the lease up, so that
// another process's sealer takes over at once rather than when the lease
// lapses.
type Sealer struct {
	loop
	store SealerStore
	cfg   SealerConfig
	cp    *checkpointer // nil without a signing key
	token string        // the lease held; "" when none
}

// NewSealer returns the sealer on st.
func NewSealer(st SealerStore, cfg SealerConfig) *Sealer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sealer{loop: newLoop("sealer", cfg.Interval, cfg.Logger), store: st, cfg: cfg}
	if cfg.SigningKey != nil {
		s.cp = newCheckpointer(st, cfg, s.log)
	}
	return s
}

// Run implements Service. It seals until ctx ends, then releases the lease
// it holds and returns ctx's error.
func (s *Sealer) Run(ctx context.Context) error {
	defer s.release(ctx)
	return s.run(ctx, s.round)
}

// round seals every backlog in batches, taking the lease first if it has
// none, then signs the checkpoints that are due. The error is the seal's
// (an outage paces the loop); the checkpoints log their own failures.
func (s *Sealer) round(ctx context.Context) error {
	err := s.seal(ctx)
	// Between seals, so that the chains it reads do not move; not while the
	// store cannot be reached.
	if s.cp != nil && s.token != "" && !errors.Is(err, store.ErrUnavailable) {
		s.token = s.cp.run(ctx, s.token)
	}
	return err
}

// seal takes the lease if it has none and seals every backlog in batches.
// Another process holding the lease, or taking it over, is not a failure.
func (s *Sealer) seal(ctx context.Context) error {
	if s.token == "" {
		l, err := s.store.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: s.cfg.Owner, LeaseDuration: s.cfg.LeaseDuration})
		switch {
		case errors.Is(err, store.ErrSealLeaseHeld):
			return nil
		case err != nil:
			return fmt.Errorf("acquire the sealing lease: %w", err)
		}
		s.token = l.Token
	}
	for {
		res, err := s.store.SealEvents(ctx, &store.SealEventsParams{Token: s.token, LeaseDuration: s.cfg.LeaseDuration, Limit: s.cfg.Batch})
		switch {
		case errors.Is(err, store.ErrLeaseLost):
			s.log.Info("sealing lease taken over by another process")
			s.token = ""
			return nil
		case err != nil:
			// The lease is kept: the next seal renews it, or finds it lost.
			return fmt.Errorf("seal audit events: %w", err)
		case res.Sealed < s.cfg.Batch:
			if !res.Blocked && s.cfg.OnSealed != nil {
				s.cfg.OnSealed(s.cfg.Now())
			}
			return nil
		}
	}
}

// release gives the lease up. It waits for the store's writer like any
// write: bounded by sealReleaseTimeout, not by the seal interval, which a
// loaded machine's writer queue can outlast (the lease then stayed held
// until it lapsed).
func (s *Sealer) release(ctx context.Context) {
	if s.token == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sealReleaseTimeout)
	defer cancel()
	if err := s.store.ReleaseSealLease(rctx, &store.ReleaseSealLeaseParams{Token: s.token}); err != nil {
		s.log.Warn("release the sealing lease", "err", err)
	}
	s.token = ""
}
