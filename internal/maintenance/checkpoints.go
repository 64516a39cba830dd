package maintenance

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
)

// Signed checkpoints of the audit chain (docs/audit.md, ADR 0019).
//
// A hash chain shows that no event was changed without the hashes after it
// changing too; it cannot show that someone who can write to the database
// did not change an event and recompute every hash after it, or cut the
// chain short. With a signing key, the sealer holding the lease signs, every
// CheckpointEvery, a checkpoint of every tenant's chain: {tenant, seq,
// hash, at, key_id, signature}. The database's writers do not hold the key,
// so they cannot make a checkpoint for the chain they rewrote, and a
// checkpoint of the chain as it was no longer matches it; the checkpoints
// being signed every CheckpointEvery, idle or not, removing the newest of
// them leaves the rest stale. `countersign audit verify --public-key` checks
// both.
//
// The sealer signs only what it has checked: before it signs a tenant's
// head, it verifies the chain from the last seq it knows to be signed (its
// own last checkpoint, or the store's newest one that its key verifies)
// through the head. A chain rewritten or cut short under a running sealer
// is thus never signed: the sealer logs an error and signs nothing more for
// that tenant, and its newest checkpoint goes stale.

// checkpointPage is the tenants a round reads, checks and signs at a time.
const checkpointPage = 100

// checkpointer signs the chains' checkpoints for the sealer holding the
// lease. Its state is its process's knowledge of the chains, which stays
// true whoever holds the lease; it is used by the sealer's goroutine only.
type checkpointer struct {
	store SealerStore
	cfg   SealerConfig
	log   *slog.Logger
	keys  auditchain.Keys // the signing key's public half, to check stored checkpoints
	keyID string
	// due is when the next round of every tenant is; zero: at once.
	due time.Time
	// signed is, per tenant, the last seq checked and signed, and its hash.
	signed map[string]auditchain.Head
	// behind holds the tenants whose last check stopped short of their
	// head (the budget): they go on at every seal until they catch up.
	behind map[string]bool
}

func newCheckpointer(st SealerStore, cfg SealerConfig, log *slog.Logger) *checkpointer {
	pub := cfg.SigningKey.Public().(ed25519.PublicKey)
	return &checkpointer{store: st, cfg: cfg, log: log, keys: auditchain.NewKeys(pub), keyID: auditchain.KeyID(pub),
		signed: map[string]auditchain.Head{}, behind: map[string]bool{}}
}

// run signs a round of checkpoints when one is due: every tenant's every
// CheckpointEvery, and the tenants still behind at every seal. It returns
// the token it holds afterwards ("" when the lease was lost). A store error
// ends the round early; the next seal tries again.
func (c *checkpointer) run(ctx context.Context, token string) string {
	now := c.cfg.Now()
	full := !now.Before(c.due)
	if !full && len(c.behind) == 0 {
		return token
	}
	for after := ""; ; {
		page, err := c.store.ListChainHeads(ctx, &store.ListChainHeadsParams{AfterTenant: after, Limit: checkpointPage})
		if err != nil {
			c.warn(ctx, "list the audit chains to sign", err)
			return token
		}
		var cps []*store.Checkpoint
		for _, tc := range page {
			if !full && !c.behind[tc.Tenant] {
				continue
			}
			cp, err := c.check(ctx, tc)
			if err != nil {
				c.warn(ctx, "check an audit chain to sign", err)
				return token
			}
			if cp != nil {
				cps = append(cps, cp)
			}
		}
		if len(cps) > 0 {
			_, err := c.store.WriteCheckpoints(ctx, &store.WriteCheckpointsParams{Token: token, LeaseDuration: c.cfg.LeaseDuration, Checkpoints: cps})
			switch {
			case errors.Is(err, store.ErrLeaseLost):
				c.log.Info("sealing lease taken over by another process")
				return ""
			case err != nil:
				c.warn(ctx, "write audit checkpoints", err)
				return token
			}
		}
		if len(page) < checkpointPage {
			break
		}
		after = page[len(page)-1].Tenant
	}
	if full {
		c.due = now.Add(c.cfg.CheckpointEvery)
	}
	return token
}

func (c *checkpointer) warn(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		c.log.Warn(what, "err", err)
	}
}

// check verifies a tenant's chain from the last seq known to be signed
// through its head (or through the budget's end) and returns the
// checkpoint to sign for where it got; nil, with an error logged, when the
// chain does not hold there.
func (c *checkpointer) check(ctx context.Context, tc *store.TenantChain) (*store.Checkpoint, error) {
	base, known := c.signed[tc.Tenant]
	if s := tc.Checkpoint; s != nil && (!known || s.Seq > base.Seq) && s.KeyID == c.keyID {
		// Signed with this key, by this process before it last started or by
		// another: the chain held there. One of another key (before the key
		// was changed) cannot be checked here, nor taken as given.
		if err := c.keys.VerifySignature(s.Signed()); err != nil {
			c.log.Error("an audit checkpoint in the store does not verify under the signing key", "tenant", tc.Tenant, "seq", s.Seq, "err", err)
		} else {
			base, known = auditchain.Head{Seq: s.Seq, Hash: s.Hash}, true
		}
	}
	// The budget counts the events past the signed seq, which is read
	// again only to check its hash.
	v, to := &auditchain.Verifier{}, min(tc.Head.Seq, c.cfg.CheckpointBudget)
	if known {
		if tc.Head.Seq < base.Seq {
			c.refuse(tc.Tenant, &auditchain.BreakError{Seq: tc.Head.Seq + 1,
				Reason: fmt.Sprintf("missing: the chain ends at seq %d, before seq %d, which was signed", tc.Head.Seq, base.Seq)})
			return nil, nil
		}
		// From the signed seq itself: its hash must still be the one signed.
		v = &auditchain.Verifier{After: base.Seq - 1, Expect: &auditchain.Head{Seq: base.Seq, Hash: base.Hash}}
		to = min(tc.Head.Seq, base.Seq+c.cfg.CheckpointBudget)
	}
	head, brk, err := c.verifyChain(ctx, tc.Tenant, v, to)
	if err != nil {
		return nil, err
	}
	if brk != nil {
		c.refuse(tc.Tenant, brk)
		return nil, nil
	}
	at := c.cfg.Now().Truncate(time.Microsecond) // what the stores keep of it
	ac := &auditchain.Checkpoint{Tenant: tc.Tenant, Seq: head.Seq, Hash: head.Hash, At: auditchain.FormatTime(at)}
	auditchain.Sign(ac, c.cfg.SigningKey)
	c.signed[tc.Tenant] = head
	if head.Seq < tc.Head.Seq {
		c.behind[tc.Tenant] = true
	} else {
		delete(c.behind, tc.Tenant)
	}
	return &store.Checkpoint{Tenant: ac.Tenant, Seq: ac.Seq, Hash: ac.Hash, At: at, KeyID: ac.KeyID, Signature: ac.Signature}, nil
}

// refuse reports a chain that no longer holds where it was signed: it is
// not signed again until it does, so that its newest checkpoint goes stale
// and verification fails, as it should.
func (c *checkpointer) refuse(tenant string, brk *auditchain.BreakError) {
	delete(c.behind, tenant)
	c.log.Error("the audit chain no longer holds where it was checked and signed: no checkpoint is signed for it",
		"tenant", tenant, "break", brk.Error())
}

// verifyChain reads a tenant's chain after v.After through seq to and feeds
// it to v, then finishes v. It returns where the chain ends as checked, or
// the first event that does not hold.
func (c *checkpointer) verifyChain(ctx context.Context, tenant string, v *auditchain.Verifier, to int64) (auditchain.Head, *auditchain.BreakError, error) {
	for after := v.After; after < to; {
		page, err := c.store.ListAudit(ctx, &store.ListAuditParams{Tenant: tenant, After: after, Limit: int(min(to-after, store.MaxPageSize))})
		if err != nil {
			return auditchain.Head{}, nil, fmt.Errorf("read the audit chain of %s: %w", tenant, err)
		}
		if len(page) == 0 {
			return auditchain.Head{}, &auditchain.BreakError{Seq: after + 1, Reason: fmt.Sprintf("missing: the chain ends at seq %d", after)}, nil
		}
		for _, ae := range page {
			if err := v.Event(ae.Chained()); err != nil {
				var brk *auditchain.BreakError
				if errors.As(err, &brk) {
					return auditchain.Head{}, brk, nil
				}
				return auditchain.Head{}, nil, fmt.Errorf("check the audit chain of %s: %w", tenant, err)
			}
		}
		after = page[len(page)-1].Seq
	}
	head, err := v.Finish()
	var brk *auditchain.BreakError
	if errors.As(err, &brk) {
		return auditchain.Head{}, brk, nil
	}
	return head, nil, err
}
