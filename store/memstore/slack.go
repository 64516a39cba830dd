package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/store"
)

// slackKey is an announcement's key: tenant, proposal, actor.
func slackKey(tenant, proposal, actor string) string { return key(tenant, proposal, actor) }

// ClaimSlackPost implements store.Store.
func (s *Store) ClaimSlackPost(ctx context.Context, params *store.ClaimSlackPostParams) (*store.SlackPostClaim, error) {
	if err := store.ValidateClaimSlackPost(params); err != nil {
		return nil, fmt.Errorf("memstore: claim slack post: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if s.slack == nil {
		s.slack = map[string]*store.SlackAnnouncement{}
	}
	k := slackKey(params.Tenant, params.ProposalID, params.Actor)
	stored := s.slack[k]
	next, claimed := store.ApplySlackClaim(stored, params, s.clock())
	if !claimed {
		return &store.SlackPostClaim{Announcement: stored.Clone()}, nil
	}
	s.slack[k] = next
	return &store.SlackPostClaim{Announcement: next.Clone(), Claimed: true}, nil
}

// RecordSlackPost implements store.Store.
func (s *Store) RecordSlackPost(ctx context.Context, params *store.RecordSlackPostParams) (*store.SlackAnnouncement, error) {
	if err := store.ValidateRecordSlackPost(params); err != nil {
		return nil, fmt.Errorf("memstore: record slack post: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	a, ok := s.slack[slackKey(params.Tenant, params.ProposalID, params.Actor)]
	switch {
	case !ok:
		return nil, fmt.Errorf("memstore: record slack post: %w", store.ErrNotFound)
	case a.Posted() || a.PostToken != params.Token:
		return nil, fmt.Errorf("memstore: %w", store.SlackPostConflict(params.ProposalID, params.Actor))
	}
	a.Channel, a.TS = params.Channel, params.TS
	a.PostToken, a.PostUntil = "", time.Time{}
	a.UpdatedAt = s.clock()
	return a.Clone(), nil
}

// RotateSlackNonce implements store.Store.
func (s *Store) RotateSlackNonce(ctx context.Context, params *store.RotateSlackNonceParams) (*store.SlackAnnouncement, error) {
	if err := store.ValidateRotateSlackNonce(params); err != nil {
		return nil, fmt.Errorf("memstore: rotate slack nonce: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	a, ok := s.slack[slackKey(params.Tenant, params.ProposalID, params.Actor)]
	switch {
	case !ok:
		return nil, fmt.Errorf("memstore: rotate slack nonce: %w", store.ErrNotFound)
	case a.Nonce != params.From || a.NonceVersion > params.NonceVersion:
		return nil, fmt.Errorf("memstore: %w", store.SlackNonceConflict(params.ProposalID, params.Actor))
	}
	a.PrevNonce, a.Nonce, a.NonceVersion, a.UpdatedAt = a.Nonce, params.Nonce, params.NonceVersion, s.clock()
	return a.Clone(), nil
}

// RetireSlackNonce implements store.Store.
func (s *Store) RetireSlackNonce(ctx context.Context, params *store.RetireSlackNonceParams) error {
	if err := store.ValidateRetireSlackNonce(params); err != nil {
		return fmt.Errorf("memstore: retire slack nonce: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	a, ok := s.slack[slackKey(params.Tenant, params.ProposalID, params.Actor)]
	switch {
	case !ok:
		return fmt.Errorf("memstore: retire slack nonce: %w", store.ErrNotFound)
	case a.Nonce == params.Nonce && a.PrevNonce != "":
		a.PrevNonce, a.UpdatedAt = "", s.clock()
	}
	return nil
}

// GetSlackAnnouncement implements store.Store.
func (s *Store) GetSlackAnnouncement(ctx context.Context, params *store.GetSlackAnnouncementParams) (*store.SlackAnnouncement, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	a, ok := s.slack[slackKey(params.Tenant, params.ProposalID, params.Actor)]
	if !ok {
		return nil, fmt.Errorf("memstore: get slack announcement: %w", store.ErrNotFound)
	}
	return a.Clone(), nil
}

// ListSlackAnnouncements implements store.Store.
func (s *Store) ListSlackAnnouncements(ctx context.Context, params *store.ListSlackAnnouncementsParams) ([]*store.SlackAnnouncement, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*store.SlackAnnouncement
	for _, a := range s.slack {
		if a.Tenant == params.Tenant && a.ProposalID == params.ProposalID {
			out = append(out, a.Clone())
		}
	}
	slices.SortFunc(out, func(a, b *store.SlackAnnouncement) int { return strings.Compare(a.Actor, b.Actor) })
	return out, nil
}
