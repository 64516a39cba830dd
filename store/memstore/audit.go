package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/countersign/countersign/store"
)

// The audit chain. Every write holds the mutex, so events are appended in
// commit order and the unsealed ones are exactly s.events[s.sealed:]. The
// sealing lease is s.seal; a zero Token means nobody holds it.

// AcquireSealLease implements store.Store.
func (s *Store) AcquireSealLease(ctx context.Context, params *store.AcquireSealLeaseParams) (*store.SealLease, error) {
	if err := store.ValidateSealParams(params.Owner, "", params.LeaseDuration, 0); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	if l := s.seal; l.Token != "" && now.Before(l.ExpiresAt) {
		return nil, &store.SealLeaseHeldError{Owner: l.Owner, ExpiresAt: l.ExpiresAt}
	}
	s.seal = store.SealLease{Owner: params.Owner, Token: store.NewToken(), ExpiresAt: now.Add(params.LeaseDuration)}
	l := s.seal
	return &l, nil
}

// SealEvents implements store.Store.
func (s *Store) SealEvents(ctx context.Context, params *store.SealEventsParams) (*store.SealResult, error) {
	if err := store.ValidateSealParams("", params.Token, params.LeaseDuration, params.Limit); err != nil {
		return nil, err
	}
	limit := params.Limit
	if limit == 0 {
		limit = store.DefaultSealBatch
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.seal.Token != params.Token {
		return nil, store.SealLeaseLost()
	}
	s.seal.ExpiresAt = s.clock().Add(params.LeaseDuration)
	evs := s.events[s.sealed:min(len(s.events), s.sealed+limit)]
	heads := map[string]store.ChainHead{}
	for _, e := range evs {
		if _, ok := heads[e.Tenant]; !ok {
			c := s.chains[e.Tenant]
			if n := len(c); n > 0 {
				heads[e.Tenant] = store.ChainHead{Seq: c[n-1].Seq, Hash: c[n-1].Hash}
			}
		}
	}
	for _, ae := range store.ChainEvents(heads, evs) {
		s.chains[ae.Tenant] = append(s.chains[ae.Tenant], ae)
		s.chained[ae.ID] = ae
	}
	s.sealed += len(evs)
	l := s.seal
	return &store.SealResult{Sealed: len(evs), Lease: &l}, nil
}

// ReleaseSealLease implements store.Store.
func (s *Store) ReleaseSealLease(ctx context.Context, params *store.ReleaseSealLeaseParams) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.seal.Token == params.Token {
		s.seal = store.SealLease{}
	}
	return nil
}

// ListAudit implements store.Store.
func (s *Store) ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*store.AuditEvent, error) {
	limit := store.PageLimit(params.Limit)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	c := s.chains[params.Tenant]
	// Seqs run 1, 2, 3, … so seq After+1 is at index After.
	from := int(min(max(params.After, 0), int64(len(c))))
	var out []*store.AuditEvent
	for _, ae := range c[from:min(len(c), from+limit)] {
		cp := *ae
		out = append(out, &cp)
	}
	return out, nil
}

// ListProposalAudit implements store.Store.
func (s *Store) ListProposalAudit(ctx context.Context, params *store.ListProposalAuditParams) ([]*store.AuditEvent, error) {
	limit := store.PageLimit(params.Limit)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*store.AuditEvent
	for _, e := range s.events {
		if len(out) == limit {
			break
		}
		if e.Tenant != params.Tenant || e.ProposalID != params.ProposalID || e.ID <= params.AfterID {
			continue
		}
		ae := &store.AuditEvent{Event: *e}
		if c, ok := s.chained[e.ID]; ok {
			ae = new(*c)
		}
		out = append(out, ae)
	}
	return out, nil
}

// ListChainHeads implements store.Store.
func (s *Store) ListChainHeads(ctx context.Context, params *store.ListChainHeadsParams) ([]*store.TenantChain, error) {
	limit := store.PageLimit(params.Limit)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var tenants []string
	for tn, c := range s.chains {
		if len(c) > 0 && tn > params.AfterTenant {
			tenants = append(tenants, tn)
		}
	}
	slices.Sort(tenants)
	var out []*store.TenantChain
	for _, tn := range tenants[:min(len(tenants), limit)] {
		c := s.chains[tn]
		tc := &store.TenantChain{Tenant: tn, Head: store.ChainHead{Seq: c[len(c)-1].Seq, Hash: c[len(c)-1].Hash}}
		if cps := s.checkpts[tn]; len(cps) > 0 {
			tc.Checkpoint = new(*cps[len(cps)-1])
		}
		out = append(out, tc)
	}
	return out, nil
}

// WriteCheckpoints implements store.Store.
func (s *Store) WriteCheckpoints(ctx context.Context, params *store.WriteCheckpointsParams) (*store.SealLease, error) {
	if err := store.ValidateCheckpoints(params); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.seal.Token != params.Token {
		return nil, store.CheckpointLeaseLost()
	}
	s.seal.ExpiresAt = s.clock().Add(params.LeaseDuration)
	for _, c := range params.Checkpoints {
		cp := *c
		cp.At = cp.At.UTC().Truncate(time.Microsecond) // as the SQL stores keep it
		cps := s.checkpts[c.Tenant]
		i, found := slices.BinarySearchFunc(cps, c.Seq, func(x *store.Checkpoint, seq int64) int { return cmp.Compare(x.Seq, seq) })
		switch {
		case !found:
			s.checkpts[c.Tenant] = slices.Insert(cps, i, &cp)
		case cps[i].Hash == cp.Hash && cps[i].At.Before(cp.At):
			cps[i] = &cp
		}
	}
	l := s.seal
	return &l, nil
}

// ListCheckpoints implements store.Store.
func (s *Store) ListCheckpoints(ctx context.Context, params *store.ListCheckpointsParams) ([]*store.Checkpoint, error) {
	limit := store.PageLimit(params.Limit)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	cps := s.checkpts[params.Tenant]
	i, _ := slices.BinarySearchFunc(cps, params.After+1, func(x *store.Checkpoint, seq int64) int { return cmp.Compare(x.Seq, seq) })
	var out []*store.Checkpoint
	for _, c := range cps[i:min(len(cps), i+limit)] {
		out = append(out, new(*c))
	}
	return out, nil
}
