package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/store"
)

// passkeyState is the memstore's share of store.Passkeys.
type passkeyState struct {
	passkeys    []*store.Passkey                    // in creation order
	enrollments map[string]*store.PasskeyEnrollment // by hash
	challenges  map[string]*store.PasskeyChallenge  // by hash
}

// passkeyEvent appends a passkey's audit event. It belongs to no proposal:
// nothing is announced.
func (s *Store) passkeyEvent(p *store.Passkey, typ store.EventType, detail, via string, at time.Time) {
	s.events = append(s.events, &store.Event{
		ID: int64(len(s.events) + 1), Tenant: p.Tenant, Type: typ, Actor: p.Actor, ActorKind: "human",
		Via: via, Detail: detail, At: at.UTC(),
	})
}

// CreatePasskeyEnrollment implements store.Store.
func (s *Store) CreatePasskeyEnrollment(ctx context.Context, params *store.CreatePasskeyEnrollmentParams) error {
	e := params.Enrollment
	if err := store.ValidatePasskeyEnrollment(e); err != nil {
		return fmt.Errorf("memstore: create passkey enrollment: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.pk.enrollments == nil {
		s.pk.enrollments = map[string]*store.PasskeyEnrollment{}
	}
	if _, dup := s.pk.enrollments[e.Hash]; dup {
		return fmt.Errorf("memstore: create passkey enrollment: %w: hash exists", store.ErrInvalidParams)
	}
	for h, old := range s.pk.enrollments {
		if old.Tenant == e.Tenant && old.Actor == e.Actor && (old.SpentAt != nil || !old.ExpiresAt.After(e.CreatedAt)) {
			delete(s.pk.enrollments, h)
		}
	}
	c := e.Clone()
	c.CreatedAt, c.ExpiresAt = c.CreatedAt.UTC(), c.ExpiresAt.UTC()
	s.pk.enrollments[c.Hash] = c
	return nil
}

// GetPasskeyEnrollment implements store.Store.
func (s *Store) GetPasskeyEnrollment(ctx context.Context, params *store.GetPasskeyEnrollmentParams) (*store.PasskeyEnrollment, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	e, ok := s.pk.enrollments[params.Hash]
	if !ok {
		return nil, fmt.Errorf("memstore: get passkey enrollment: %w", store.ErrNotFound)
	}
	return e.Clone(), nil
}

// CreatePasskey implements store.Store.
func (s *Store) CreatePasskey(ctx context.Context, params *store.CreatePasskeyParams) error {
	if err := store.ValidatePasskey(params); err != nil {
		return fmt.Errorf("memstore: create passkey: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	p := params.Passkey
	if slices.ContainsFunc(s.pk.passkeys, func(o *store.Passkey) bool { return o.ID == p.ID }) {
		return fmt.Errorf("memstore: create passkey: %w: credential id exists", store.ErrInvalidParams)
	}
	typ := store.EventPasskeyAdded
	if params.EnrollmentHash != "" {
		e, ok := s.pk.enrollments[params.EnrollmentHash]
		if !ok || e.Tenant != p.Tenant || e.Actor != p.Actor || e.SpentAt != nil || !params.Now.Before(e.ExpiresAt) {
			return fmt.Errorf("memstore: create passkey: enrollment: %w", store.ErrNotFound)
		}
		at := params.Now.UTC()
		e.SpentAt = &at
		typ = store.EventPasskeyEnrolled
	}
	c := p.Clone()
	c.CreatedAt = c.CreatedAt.UTC()
	if c.LastUsedAt != nil {
		t := c.LastUsedAt.UTC()
		c.LastUsedAt = &t
	}
	s.pk.passkeys = append(s.pk.passkeys, c)
	s.passkeyEvent(c, typ, store.PasskeyEventDetail(c), params.Via, params.Now)
	return nil
}

// ListPasskeys implements store.Store.
func (s *Store) ListPasskeys(ctx context.Context, params *store.ListPasskeysParams) ([]*store.Passkey, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*store.Passkey
	for _, p := range s.pk.passkeys {
		if p.Tenant == params.Tenant && p.Actor == params.Actor {
			out = append(out, p.Clone())
		}
	}
	slices.SortStableFunc(out, func(a, b *store.Passkey) int { return cmp.Compare(a.CreatedAt.UnixNano(), b.CreatedAt.UnixNano()) })
	return out, nil
}

// UpdatePasskey implements store.Store.
func (s *Store) UpdatePasskey(ctx context.Context, params *store.UpdatePasskeyParams) error {
	if len(params.Credential) == 0 || params.UsedAt.IsZero() {
		return fmt.Errorf("memstore: update passkey: %w: credential record and time required", store.ErrInvalidParams)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, p := range s.pk.passkeys {
		if p.Tenant == params.Tenant && p.Actor == params.Actor && p.ID == params.ID {
			p.Credential = slices.Clone(params.Credential)
			at := params.UsedAt.UTC()
			p.LastUsedAt = &at
			return nil
		}
	}
	return fmt.Errorf("memstore: update passkey: %w", store.ErrNotFound)
}

// DeletePasskey implements store.Store.
func (s *Store) DeletePasskey(ctx context.Context, params *store.DeletePasskeyParams) error {
	if params.Now.IsZero() {
		return fmt.Errorf("memstore: delete passkey: %w: time required", store.ErrInvalidParams)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.pk.passkeys, func(p *store.Passkey) bool {
		return p.Tenant == params.Tenant && p.Actor == params.Actor && p.ID == params.ID
	})
	if i < 0 {
		return fmt.Errorf("memstore: delete passkey: %w", store.ErrNotFound)
	}
	p := s.pk.passkeys[i]
	s.pk.passkeys = slices.Delete(s.pk.passkeys, i, i+1)
	s.passkeyEvent(p, store.EventPasskeyRemoved, store.PasskeyEventDetail(p), params.Via, params.Now)
	return nil
}

// CreatePasskeyChallenge implements store.Store.
func (s *Store) CreatePasskeyChallenge(ctx context.Context, params *store.CreatePasskeyChallengeParams) error {
	c := params.Challenge
	if err := store.ValidatePasskeyChallenge(c); err != nil {
		return fmt.Errorf("memstore: create passkey challenge: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.pk.challenges == nil {
		s.pk.challenges = map[string]*store.PasskeyChallenge{}
	}
	if _, dup := s.pk.challenges[c.Hash]; dup {
		return fmt.Errorf("memstore: create passkey challenge: %w: hash exists", store.ErrInvalidParams)
	}
	for h, old := range s.pk.challenges {
		if old.Tenant == c.Tenant && old.Actor == c.Actor && !old.ExpiresAt.After(c.CreatedAt) {
			delete(s.pk.challenges, h)
		}
	}
	cc := c.Clone()
	cc.CreatedAt, cc.ExpiresAt = cc.CreatedAt.UTC(), cc.ExpiresAt.UTC()
	s.pk.challenges[cc.Hash] = cc
	return nil
}

// SpendPasskeyChallenge implements store.Store.
func (s *Store) SpendPasskeyChallenge(ctx context.Context, params *store.SpendPasskeyChallengeParams) (*store.PasskeyChallenge, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	c, ok := s.pk.challenges[params.Hash]
	if !ok || !store.ChallengeMatches(c, params) {
		return nil, fmt.Errorf("memstore: spend passkey challenge: %w", store.ErrNotFound)
	}
	delete(s.pk.challenges, params.Hash)
	return c, nil
}
