package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// SpendMCPNonce implements store.Store.
func (s *Store) SpendMCPNonce(ctx context.Context, params *store.SpendMCPNonceParams) (bool, error) {
	if err := store.ValidateSpendMCPNonce(params); err != nil {
		return false, fmt.Errorf("memstore: spend mcp nonce: %w", err)
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	if s.mcpNonces == nil {
		s.mcpNonces = map[string]mcpNonce{}
	}
	forgotten := 0
	for key, n := range s.mcpNonces {
		if forgotten == store.ForgetMCPNonces {
			break
		}
		if !n.until.After(now) {
			delete(s.mcpNonces, key)
			forgotten++
		}
	}
	key := params.Tenant + "\x00" + params.Nonce
	if n, ok := s.mcpNonces[key]; ok && n.until.After(now) {
		return false, nil
	}
	s.mcpNonces[key] = mcpNonce{until: params.Until.UTC()}
	return true, nil
}

// mcpNonce is a spent nonce, kept until until.
type mcpNonce struct {
	until time.Time
}
