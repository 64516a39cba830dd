package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign/store"
)

// outbox holds the notifications and the targets they are written for. It
// lives under the store's mutex: announce runs in the critical section that
// appends an event, which is this driver's transaction.
type outbox struct {
	targets map[store.EventType][]string // event type → target names, sorted
	entries []*store.OutboxEntry         // in event order
	byID    map[string]*store.OutboxEntry
	// leaseEnds holds the expiry of each claimed entry's lease.
	leaseEnds map[string]int64 // id → unix nanoseconds
}

// announce writes the notifications of e, an event just appended.
func (s *Store) announce(e *store.Event) {
	for _, target := range s.outbox.targets[e.Type] {
		n := &store.OutboxEntry{
			ID: store.NotificationID(e.ID, target), Tenant: e.Tenant, Target: target,
			EventID: e.ID, EventType: e.Type, ProposalID: e.ProposalID, At: e.At,
			Status: store.NotificationPending, NextAttemptAt: e.At, UpdatedAt: e.At,
		}
		if s.outbox.byID == nil {
			s.outbox.byID = map[string]*store.OutboxEntry{}
		}
		s.outbox.byID[n.ID] = n
		s.outbox.entries = append(s.outbox.entries, n)
	}
}

// SetNotificationTargets implements store.Store.
func (s *Store) SetNotificationTargets(ctx context.Context, params *store.SetNotificationTargetsParams) error {
	if err := store.ValidateNotificationTargets(params); err != nil {
		return fmt.Errorf("memstore: set notification targets: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	targets := map[store.EventType][]string{}
	for _, t := range params.Targets {
		for _, e := range t.Events {
			if !slices.Contains(targets[e], t.Name) {
				targets[e] = append(targets[e], t.Name)
			}
		}
	}
	for _, names := range targets {
		slices.Sort(names)
	}
	s.outbox.targets = targets
	return nil
}

// ClaimNotifications implements store.Store, earliest due first.
func (s *Store) ClaimNotifications(ctx context.Context, params *store.ClaimNotificationsParams) ([]*store.OutboxEntry, error) {
	if err := store.ValidateClaimNotifications(params); err != nil {
		return nil, fmt.Errorf("memstore: claim notifications: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	var due []*store.OutboxEntry
	for _, n := range s.outbox.entries {
		if n.Status != store.NotificationPending || n.NextAttemptAt.After(now) || !slices.Contains(params.Targets, n.Target) {
			continue
		}
		if n.LeaseToken != "" && s.outbox.leaseEnds[n.ID] > now.UnixNano() {
			continue
		}
		due = append(due, n)
	}
	slices.SortStableFunc(due, func(a, b *store.OutboxEntry) int {
		if c := a.NextAttemptAt.Compare(b.NextAttemptAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(due) > params.Limit {
		due = due[:params.Limit]
	}
	if s.outbox.leaseEnds == nil {
		s.outbox.leaseEnds = map[string]int64{}
	}
	out := make([]*store.OutboxEntry, len(due))
	for i, n := range due {
		n.Attempts++
		n.LeaseToken = store.NewToken()
		n.UpdatedAt = now
		s.outbox.leaseEnds[n.ID] = now.Add(params.LeaseDuration).UnixNano()
		out[i] = n.Clone()
	}
	return out, nil
}

// RecordDelivery implements store.Store.
func (s *Store) RecordDelivery(ctx context.Context, params *store.RecordDeliveryParams) (*store.OutboxEntry, error) {
	if err := store.ValidateRecordDelivery(params); err != nil {
		return nil, fmt.Errorf("memstore: record delivery: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	n, ok := s.outbox.byID[params.ID]
	if !ok || n.Tenant != params.Tenant {
		return nil, fmt.Errorf("memstore: record delivery of %s: %w", params.ID, store.ErrNotFound)
	}
	if n.Status != store.NotificationPending || n.LeaseToken != params.LeaseToken {
		return nil, fmt.Errorf("memstore: %w", store.DeliveryConflict(n.ID, n.Status))
	}
	store.ApplyDelivery(n, params, s.clock())
	delete(s.outbox.leaseEnds, n.ID)
	return n.Clone(), nil
}

// ListNotifications implements store.Store, newest event first.
func (s *Store) ListNotifications(ctx context.Context, params *store.ListNotificationsParams) ([]*store.OutboxEntry, error) {
	limit, err := store.ValidateListNotifications(params)
	if err != nil {
		return nil, fmt.Errorf("memstore: list notifications: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*store.OutboxEntry
	for i := len(s.outbox.entries) - 1; i >= 0 && len(out) < limit; i-- {
		n := s.outbox.entries[i]
		if n.Tenant == params.Tenant && (params.Status == "" || n.Status == params.Status) {
			c := n.Clone()
			c.LeaseToken = ""
			out = append(out, c)
		}
	}
	return out, nil
}

// RetryNotification implements store.Store.
func (s *Store) RetryNotification(ctx context.Context, params *store.RetryNotificationParams) (*store.OutboxEntry, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	n, ok := s.outbox.byID[params.ID]
	if !ok || n.Tenant != params.Tenant {
		return nil, fmt.Errorf("memstore: retry notification %s: %w", params.ID, store.ErrNotFound)
	}
	if n.Status != store.NotificationFailed {
		return nil, fmt.Errorf("memstore: %w", store.RetryConflict(n.ID, n.Status))
	}
	now := s.clock()
	n.Status, n.Attempts, n.NextAttemptAt, n.LeaseToken, n.UpdatedAt = store.NotificationPending, 0, now, "", now
	return n.Clone(), nil
}
