package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/countersign/countersign/store"
)

// runs are kept in s.runs (by id) and, per thread, in start order in
// s.threadRuns; both are created lazily.

// PostMessage implements store.Store.
func (s *Store) PostMessage(ctx context.Context, params *store.PostMessageParams) (*store.PostMessageResult, error) {
	if err := store.ValidatePostMessageParams(params); err != nil {
		return nil, fmt.Errorf("memstore: post message: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	tenant, thread := params.Thread()
	posted := params.Posted()
	tk := key(tenant, thread)
	t, ok := s.threads[tk]
	switch {
	case !ok && params.Decision:
		return nil, fmt.Errorf("memstore: post message: thread %s: %w", thread, store.ErrNotFound)
	case ok && !params.Decision && t.Owner != params.Owner:
		return nil, fmt.Errorf("memstore: post message: thread %s: %w", thread, store.ErrNotThreadOwner)
	case ok && !params.Decision && t.RunID != "":
		return nil, &store.ThreadBusyError{ThreadID: thread, RunID: t.RunID}
	case params.Run != nil && s.runs[params.Run.ID] != nil:
		return nil, fmt.Errorf("memstore: post message: %w: run id %s is taken", store.ErrInvalidParams, params.Run.ID)
	}
	for _, m := range posted {
		if s.messageIDs[key(tenant, thread, m.ID)] {
			return nil, fmt.Errorf("memstore: post message: %w", &store.MessageIDTakenError{ThreadID: thread, ID: m.ID})
		}
	}
	if !ok {
		t = &store.Thread{Tenant: tenant, ID: thread, Owner: params.Owner, CreatedAt: now}
		s.threads[tk] = t
	}
	res := &store.PostMessageResult{}
	if params.Run != nil {
		r := store.NewRun(params, now)
		if s.runs == nil {
			s.runs, s.threadRuns = map[string]*store.Run{}, map[string][]string{}
		}
		s.runs[r.ID] = r
		s.threadRuns[tk] = append(s.threadRuns[tk], r.ID)
		t.RunID = r.ID
		res.Run = r.Clone()
	}
	for _, m := range posted {
		mc := m.Clone()
		mc.CreatedAt, mc.Decision = now, params.Decision
		s.messageIDs[key(tenant, thread, mc.ID)] = true
		s.messages[tk] = append(s.messages[tk], mc)
		if m == params.Message {
			res.Message = mc.Clone()
		} else {
			res.Results = append(res.Results, mc.Clone())
		}
	}
	tc := *t
	res.Thread = &tc
	return res, nil
}

func (s *Store) run(tenant, id string) (*store.Run, error) {
	r, ok := s.runs[id]
	if !ok || r.Tenant != tenant {
		return nil, fmt.Errorf("run %s: %w", id, store.ErrNotFound)
	}
	return r, nil
}

// GetRun implements store.Store.
func (s *Store) GetRun(ctx context.Context, params *store.GetRunParams) (*store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r, err := s.run(params.Tenant, params.ID)
	if err != nil {
		return nil, fmt.Errorf("memstore: get run: %w", err)
	}
	return r.Clone(), nil
}

// ListRuns implements store.Store.
func (s *Store) ListRuns(ctx context.Context, params *store.ListRunsParams) ([]*store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ids := s.threadRuns[key(params.Tenant, params.ThreadID)]
	var out []*store.Run
	for i := len(ids) - 1; i >= 0 && (params.Limit <= 0 || len(out) < params.Limit); i-- {
		out = append(out, s.runs[ids[i]].Clone())
	}
	return out, nil
}

// UpdateRun implements store.Store.
func (s *Store) UpdateRun(ctx context.Context, params *store.UpdateRunParams) (*store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r, err := s.run(params.Tenant, params.ID)
	if err != nil {
		return nil, fmt.Errorf("memstore: update run: %w", err)
	}
	for _, m := range params.Messages {
		if m != nil && s.messageIDs[key(r.Tenant, r.ThreadID, m.ID)] {
			return nil, fmt.Errorf("memstore: update run: %w", &store.MessageIDTakenError{ThreadID: r.ThreadID, ID: m.ID})
		}
	}
	next := r.Clone()
	c, err := store.ApplyRunUpdate(next, params, s.clock())
	if err != nil {
		return nil, fmt.Errorf("memstore: update run: %w", err)
	}
	*r = *next
	s.applyRun(r, c)
	return r.Clone(), nil
}

// applyRun writes a run change's messages and releases the thread.
func (s *Store) applyRun(r *store.Run, c *store.RunChange) {
	tk := key(r.Tenant, r.ThreadID)
	t := s.threads[tk]
	if t == nil { // the thread was deleted under the run
		return
	}
	for _, m := range c.Messages {
		s.messageIDs[key(r.Tenant, r.ThreadID, m.ID)] = true
		s.messages[tk] = append(s.messages[tk], m)
	}
	if c.Release && t.RunID == r.ID {
		t.RunID = ""
	}
}

// ClaimRuns implements store.Store.
func (s *Store) ClaimRuns(ctx context.Context, params *store.ClaimRunsParams) ([]*store.Run, error) {
	if params.Limit <= 0 || params.LeaseDuration <= 0 || params.Owner == "" {
		return nil, fmt.Errorf("memstore: claim runs: %w: owner, limit and lease are required", store.ErrInvalidParams)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	var ready []*store.Run
	for _, r := range s.runs {
		var awaited *store.Status
		if p, ok := s.proposals[r.Awaiting]; ok && p.Tenant == r.Tenant {
			awaited = &p.Status
		}
		if store.RunResumable(r, awaited, now) {
			ready = append(ready, r)
		}
	}
	slices.SortFunc(ready, func(a, b *store.Run) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return compareStrings(a.ID, b.ID)
	})
	var out []*store.Run
	for _, r := range ready[:min(len(ready), params.Limit)] {
		store.ApplyRunClaim(r, params, now)
		out = append(out, r.Clone())
	}
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CancelRun implements store.Store.
func (s *Store) CancelRun(ctx context.Context, params *store.CancelRunParams) (*store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r, err := s.run(params.Tenant, params.ID)
	if err != nil {
		return nil, fmt.Errorf("memstore: cancel run: %w", err)
	}
	if store.ApplyRunCancel(r, s.clock()) {
		s.applyRun(r, &store.RunChange{Release: true})
	}
	return r.Clone(), nil
}
