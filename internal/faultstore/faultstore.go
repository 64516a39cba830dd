package faultstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/countersign/countersign/store"
)

// Fault is what one call does instead of (or besides) reaching the wrapped
// store. The zero Fault passes the call through.
type Fault struct {
	// Hang blocks the call until its context ends and answers the context's
	// error; the wrapped store is never asked.
	Hang bool
	// Err fails the call with this error; the wrapped store is never asked.
	Err error
	// Gate, when set, holds the call until Gate is closed (or the context
	// ends: then the call answers the context's error) before anything
	// else.
	Gate <-chan struct{}
	// Delay holds back the wrapped store's answer this long: the call took
	// effect at once and its answer is slow on the way back. If the context
	// ends first, the call answers the context's error (it still took
	// effect).
	Delay time.Duration
}

// Renewal is one RenewLease call.
type Renewal struct {
	Params store.RenewLeaseParams
	// Asked is when the call reached this store.
	Asked time.Time
	// Deadline is the call's context deadline, zero when it had none.
	Deadline time.Time
	// InForce is the expiry of the lease the wrapped store had last granted
	// when the call came in: the call's deadline must come before it.
	InForce time.Time
	// Lease is the wrapped store's answer, nil when it was not asked or
	// refused.
	Lease *store.Lease
	Err   error
}

// Settlement is one settlement, by Settle or as an item of SettleMany.
type Settlement struct {
	Params store.SettleParams
	Err    error
}

// Store is a store.Store with faults. It is safe for concurrent use.
type Store struct {
	store.Store

	mu         sync.Mutex
	renewals   []Fault // a script: each renewal takes the first; the last stays
	claimDelay time.Duration
	renewLog   []Renewal
	settleLog  []Settlement
	events     []string
	leases     map[string]store.Lease
	calls      map[string]int
}

// New wraps s. Until it is told otherwise, every call passes through.
func New(s store.Store) *Store {
	return &Store{Store: s, leases: map[string]store.Lease{}, calls: map[string]int{}}
}

// SetRenewals scripts the renewals to come: the first takes faults[0], the
// next faults[1], and so on; the last fault stays for every later renewal.
// No faults passes renewals through.
func (s *Store) SetRenewals(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewals = append([]Fault(nil), faults...)
}

// SetClaimDelay holds back the answers of Claim, ClaimBatch and of a
// CreateProposal that takes a lease by d: the claim took effect at once, its
// answer is late.
func (s *Store) SetClaimDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claimDelay = d
}

// Note appends a test's own event to the log.
func (s *Store) Note(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, event)
}

// Events returns the log, oldest first: "claim <id>", "renew <id>: <err>",
// "settle <id> <status>: <err>" (err is "ok" on success), and the test's
// notes.
func (s *Store) Events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// Renewals returns the RenewLease calls, oldest first.
func (s *Store) Renewals() []Renewal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Renewal(nil), s.renewLog...)
}

// Settlements returns the settlements asked for, oldest first.
func (s *Store) Settlements() []Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Settlement(nil), s.settleLog...)
}

// Calls counts the calls of one method ("RenewLease", "Settle", …).
func (s *Store) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Lease returns the last lease the wrapped store granted or extended for a
// proposal (by a claim, a renewal or a retry), its expiry by the wrapped
// store's clock; ok is false when it granted none.
func (s *Store) Lease(id string) (l store.Lease, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok = s.leases[id]
	return l, ok
}

func (s *Store) count(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
}

// granted records a lease the wrapped store granted.
func (s *Store) granted(id string, l *store.Lease) {
	if l == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[id] = *l
}

func (s *Store) nextRenewal() Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.renewals) == 0 {
		return Fault{}
	}
	f := s.renewals[0]
	if len(s.renewals) > 1 {
		s.renewals = s.renewals[1:]
	}
	return f
}

// hold waits d or until ctx ends.
func hold(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// RenewLease implements store.Store, with the scripted fault.
func (s *Store) RenewLease(ctx context.Context, params *store.RenewLeaseParams) (*store.Lease, error) {
	s.count("RenewLease")
	r := Renewal{Params: *params, Asked: time.Now()}
	r.Deadline, _ = ctx.Deadline()
	if l, ok := s.Lease(params.ID); ok {
		r.InForce = l.ExpiresAt
	}
	f := s.nextRenewal()
	var gated error
	if f.Gate != nil {
		select {
		case <-f.Gate:
		case <-ctx.Done():
			gated = ctx.Err()
		}
	}
	switch {
	case gated != nil:
		r.Err = gated
	case f.Hang:
		<-ctx.Done()
		r.Err = ctx.Err()
	case f.Err != nil:
		r.Err = f.Err
	default:
		r.Lease, r.Err = s.Store.RenewLease(ctx, params)
		if r.Err == nil {
			s.granted(params.ID, r.Lease)
			if err := hold(ctx, f.Delay); err != nil {
				r.Err = err
			}
		}
	}
	s.mu.Lock()
	s.renewLog = append(s.renewLog, r)
	s.events = append(s.events, fmt.Sprintf("renew %s: %s", params.ID, outcome(r.Err)))
	s.mu.Unlock()
	if r.Err != nil {
		return nil, r.Err
	}
	return r.Lease, nil
}

// Claim implements store.Store, with the claim delay.
func (s *Store) Claim(ctx context.Context, params *store.ClaimParams) (*store.Proposal, error) {
	s.count("Claim")
	p, err := s.Store.Claim(ctx, params)
	if err == nil {
		s.granted(p.ID, p.Lease)
		s.Note("claim " + p.ID)
		s.mu.Lock()
		d := s.claimDelay
		s.mu.Unlock()
		if herr := hold(ctx, d); herr != nil {
			return nil, herr
		}
	}
	return p, err
}

// CreateProposal implements store.Store. A creation that takes a lease (an
// allowed write's record, created executing) is a claim: it is recorded as
// one, with the claim delay.
func (s *Store) CreateProposal(ctx context.Context, params *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	s.count("CreateProposal")
	cr, err := s.Store.CreateProposal(ctx, params)
	if err == nil && cr.Created && cr.Proposal.Lease != nil {
		s.granted(cr.Proposal.ID, cr.Proposal.Lease)
		s.Note("claim " + cr.Proposal.ID)
		s.mu.Lock()
		d := s.claimDelay
		s.mu.Unlock()
		if herr := hold(ctx, d); herr != nil {
			return nil, herr
		}
	}
	return cr, err
}

// ClaimBatch implements store.Store, with the claim delay.
func (s *Store) ClaimBatch(ctx context.Context, params *store.ClaimBatchParams) ([]*store.Claimed, error) {
	s.count("ClaimBatch")
	claimed, err := s.Store.ClaimBatch(ctx, params)
	for _, c := range claimed {
		s.granted(c.Proposal.ID, c.Proposal.Lease)
		s.Note("claim " + c.Proposal.ID)
	}
	if err == nil && len(claimed) > 0 {
		s.mu.Lock()
		d := s.claimDelay
		s.mu.Unlock()
		if herr := hold(ctx, d); herr != nil {
			return nil, herr
		}
	}
	return claimed, err
}

// BeginRetry implements store.Store, recording the extended lease.
func (s *Store) BeginRetry(ctx context.Context, params *store.BeginRetryParams) (*store.Proposal, error) {
	s.count("BeginRetry")
	p, err := s.Store.BeginRetry(ctx, params)
	if err == nil {
		s.granted(p.ID, p.Lease)
	}
	return p, err
}

func (s *Store) settled(params *store.SettleParams, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLog = append(s.settleLog, Settlement{Params: *params, Err: err})
	s.events = append(s.events, fmt.Sprintf("settle %s %s: %s", params.ID, params.Status, outcome(err)))
}

// Settle implements store.Store, recording the settlement.
func (s *Store) Settle(ctx context.Context, params *store.SettleParams) (*store.TransitionResult, error) {
	s.count("Settle")
	tr, err := s.Store.Settle(ctx, params)
	s.settled(params, err)
	return tr, err
}

// SettleMany implements store.Store, recording each settlement.
func (s *Store) SettleMany(ctx context.Context, params []*store.SettleParams) ([]*store.TransitionResult, []error, error) {
	s.count("SettleMany")
	results, errs, err := s.Store.SettleMany(ctx, params)
	for i, p := range params {
		switch {
		case err != nil:
			s.settled(p, err)
		default:
			s.settled(p, errs[i])
		}
	}
	return results, errs, err
}
