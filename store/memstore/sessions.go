package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/countersign/countersign/store"
)

// CreateSession implements store.Store.
func (s *Store) CreateSession(ctx context.Context, params *store.CreateSessionParams) error {
	if err := store.ValidateSession(params.Session); err != nil {
		return fmt.Errorf("memstore: create session: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.sessions == nil {
		s.sessions = map[string]*store.Session{}
	}
	if _, dup := s.sessions[params.Session.ID]; dup {
		return fmt.Errorf("memstore: create session: %w: id exists", store.ErrInvalidParams)
	}
	c := params.Session.Clone()
	c.CreatedAt, c.ExpiresAt = c.CreatedAt.UTC(), c.ExpiresAt.UTC()
	s.sessions[c.ID] = c
	return nil
}

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, params *store.GetSessionParams) (*store.Session, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sess, ok := s.sessions[params.ID]
	if !ok {
		return nil, fmt.Errorf("memstore: get session: %w", store.ErrNotFound)
	}
	return sess.Clone(), nil
}

// GetSessions implements store.Store.
func (s *Store) GetSessions(ctx context.Context, params *store.GetSessionsParams) ([]*store.Session, error) {
	if err := store.ValidateGetSessions(params); err != nil {
		return nil, fmt.Errorf("memstore: get sessions: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*store.Session
	seen := make(map[string]bool, len(params.IDs))
	for _, id := range params.IDs {
		if sess, ok := s.sessions[id]; ok && !seen[id] {
			seen[id] = true
			out = append(out, sess.Clone())
		}
	}
	return out, nil
}

// DeleteSession implements store.Store.
func (s *Store) DeleteSession(ctx context.Context, params *store.DeleteSessionParams) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.sessions, params.ID)
	return nil
}

// DeleteExpiredSessions implements store.Store: the longest expired first,
// as the durable drivers do.
func (s *Store) DeleteExpiredSessions(ctx context.Context, params *store.DeleteExpiredSessionsParams) (int, error) {
	if err := store.ValidateDeleteExpiredSessions(params); err != nil {
		return 0, fmt.Errorf("memstore: delete expired sessions: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var expired []*store.Session
	for _, sess := range s.sessions {
		if !sess.ExpiresAt.After(params.Before) {
			expired = append(expired, sess)
		}
	}
	slices.SortFunc(expired, func(a, b *store.Session) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.ID, b.ID))
	})
	expired = expired[:min(len(expired), params.Limit)]
	for _, sess := range expired {
		delete(s.sessions, sess.ID)
	}
	return len(expired), nil
}
