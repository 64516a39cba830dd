package memstore

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/store"
)

// LookupCall implements store.Store: the thread, the tool call's record
// and the grant are read under one hold of the mutex, so they are of one
// state.
func (s *Store) LookupCall(ctx context.Context, params *store.LookupCallParams) (*store.CallLookup, error) {
	if err := store.ValidateLookupCallParams(params); err != nil {
		return nil, fmt.Errorf("memstore: lookup call: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	l := &store.CallLookup{}
	if t, ok := s.threads[key(params.Tenant, params.ThreadID)]; ok {
		tc := *t
		l.Thread = &tc
	}
	if id, ok := s.byToolCall[key(params.Tenant, params.ThreadID, params.ToolCallID)]; ok {
		l.Proposal = s.proposals[id].Clone()
	}
	if params.Grant != nil {
		if g := s.findGrant(params.Grant); g != nil {
			l.Grant = g.Clone()
		}
	}
	return l, nil
}
