package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// SpendMCPNonce implements store.Store: in one write, it forgets a few
// passed nonces, then inserts the nonce, or takes over its passed record;
// a live record leaves the row unchanged, and the call spent nothing.
func (s *Store) SpendMCPNonce(ctx context.Context, params *store.SpendMCPNonceParams) (bool, error) {
	if err := store.ValidateSpendMCPNonce(params); err != nil {
		return false, fmt.Errorf("sqlitestore: spend mcp nonce: %w", classify(err))
	}
	until, err := nanos("until", params.Until)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: spend mcp nonce: %w", classify(err))
	}
	spent := false
	err = s.write(ctx, func(tx *wtx, now time.Time) error {
		spent = false // the write may be retried
		if _, err := tx.ExecContext(ctx, `DELETE FROM mcp_nonces WHERE (tenant, nonce) IN
			(SELECT tenant, nonce FROM mcp_nonces WHERE until_at <= ? ORDER BY until_at LIMIT ?)`,
			now.UnixNano(), store.ForgetMCPNonces); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO mcp_nonces (tenant, nonce, until_at) VALUES (?, ?, ?)
			ON CONFLICT (tenant, nonce) DO UPDATE SET until_at = excluded.until_at WHERE mcp_nonces.until_at <= ?`,
			params.Tenant, params.Nonce, until, now.UnixNano())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		spent = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: spend mcp nonce: %w", classify(err))
	}
	return spent, nil
}
