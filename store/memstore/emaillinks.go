package memstore

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/store"
)

// emailLinks holds the email channel's links by token digest, and the
// spends by approver: one spend per tenant, proposal and actor.
type emailLinks struct {
	links  map[string]*store.EmailLink      // by TokenSHA256
	spends map[string]*store.EmailLinkSpend // tenant\x00proposal\x00actor
}

func spendKey(l *store.EmailLink) string { return l.Tenant + "\x00" + l.ProposalID + "\x00" + l.Actor }

// read returns a copy of a stored link with its approver's spend.
func (e *emailLinks) read(l *store.EmailLink) *store.EmailLink {
	c := l.Clone()
	if sp := e.spends[spendKey(l)]; sp != nil {
		cp := *sp
		c.Spend = &cp
	}
	return c
}

// IssueEmailLinks implements store.Store.
func (s *Store) IssueEmailLinks(ctx context.Context, params *store.IssueEmailLinksParams) (*store.IssueEmailLinksResult, error) {
	if err := store.ValidateIssueEmailLinks(params); err != nil {
		return nil, fmt.Errorf("memstore: issue email links: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	e := &s.emailLinks
	if e.links == nil {
		e.links, e.spends = map[string]*store.EmailLink{}, map[string]*store.EmailLinkSpend{}
	}
	first := params.Links[0]
	for _, l := range params.Links {
		if _, dup := e.links[l.TokenSHA256]; dup {
			return nil, fmt.Errorf("memstore: issue email links: %w: token exists", store.ErrInvalidParams)
		}
	}
	var earlier []*store.EmailLink
	for _, l := range e.links {
		if l.Tenant == first.Tenant && l.ProposalID == first.ProposalID && l.Actor == first.Actor && l.NotificationID == first.NotificationID {
			if !l.SentAt.IsZero() {
				return &store.IssueEmailLinksResult{AlreadySent: true}, nil
			}
			earlier = append(earlier, l)
		}
	}
	now := s.clock()
	res := &store.IssueEmailLinksResult{}
	if e.spends[spendKey(first)] == nil {
		for _, l := range earlier {
			if l.RetiredAt.IsZero() {
				l.RetiredAt = now
				res.Retired++
			}
		}
	}
	for _, l := range params.Links {
		c := l.Clone()
		c.CreatedAt, c.ExpiresAt = c.CreatedAt.UTC(), c.ExpiresAt.UTC()
		e.links[c.TokenSHA256] = c
	}
	return res, nil
}

// MarkEmailLinksSent implements store.Store.
func (s *Store) MarkEmailLinksSent(ctx context.Context, params *store.MarkEmailLinksSentParams) error {
	if err := store.ValidateMarkEmailLinksSent(params); err != nil {
		return fmt.Errorf("memstore: mark email links sent: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	now := s.clock()
	for _, h := range params.TokenSHA256s {
		if l := s.emailLinks.links[h]; l != nil && l.Tenant == params.Tenant && l.SentAt.IsZero() {
			l.SentAt = now
		}
	}
	return nil
}

// GetEmailLink implements store.Store.
func (s *Store) GetEmailLink(ctx context.Context, params *store.GetEmailLinkParams) (*store.EmailLink, error) {
	if err := store.CheckEmailLinkKey(params.Tenant, params.TokenSHA256); err != nil {
		return nil, fmt.Errorf("memstore: get email link: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	l := s.emailLinks.links[params.TokenSHA256]
	if l == nil || l.Tenant != params.Tenant {
		return nil, fmt.Errorf("memstore: get email link: %w", store.ErrNotFound)
	}
	return s.emailLinks.read(l), nil
}

// SpendEmailLink implements store.Store.
func (s *Store) SpendEmailLink(ctx context.Context, params *store.SpendEmailLinkParams) (*store.EmailLink, error) {
	if err := store.CheckEmailLinkKey(params.Tenant, params.TokenSHA256); err != nil {
		return nil, fmt.Errorf("memstore: spend email link: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	e := &s.emailLinks
	l := e.links[params.TokenSHA256]
	if l == nil || l.Tenant != params.Tenant {
		return nil, fmt.Errorf("memstore: spend email link: %w", store.ErrNotFound)
	}
	now := s.clock()
	found := e.read(l)
	if err := store.NotLive(found, now); err != nil {
		return nil, fmt.Errorf("memstore: spend email link: %w", err)
	}
	e.spends[spendKey(l)] = &store.EmailLinkSpend{TokenSHA256: l.TokenSHA256, Verdict: l.Verdict, At: now}
	return e.read(l), nil
}

// ListEmailLinks implements store.Store.
func (s *Store) ListEmailLinks(ctx context.Context, params *store.ListEmailLinksParams) ([]*store.EmailLink, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*store.EmailLink
	for _, l := range s.emailLinks.links {
		if l.Tenant == params.Tenant && l.ProposalID == params.ProposalID {
			out = append(out, s.emailLinks.read(l))
		}
	}
	store.SortEmailLinks(out)
	return out, nil
}
