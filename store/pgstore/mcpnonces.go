package pgstore

import (
	"context"

	"github.com/countersign/countersign/store"
)

// The nonce statements; qualify puts the store's schema in.
const (
	// A few passed nonces, the oldest first; SKIP LOCKED lets concurrent
	// spends share the work instead of queueing on the same rows.
	// The rows are found again through the primary key (the ANYs): with
	// IN, the generic plan of a large backlog hashed the whole table
	// (TestClaimPlanUnderBacklog).
	forgetMCPNoncesSQL = `WITH pick AS (
		SELECT tenant, nonce FROM _S_.mcp_nonces WHERE until_at <= $1 ORDER BY until_at LIMIT $2 FOR UPDATE SKIP LOCKED
	)
	DELETE FROM _S_.mcp_nonces m USING pick
	WHERE m.tenant = pick.tenant AND m.nonce = pick.nonce
		AND m.tenant = ANY (ARRAY(SELECT tenant FROM pick)) AND m.nonce = ANY (ARRAY(SELECT nonce FROM pick))`
	// Inserted, or a passed record taken over; a live record is left as
	// it is, and no row is affected.
	spendMCPNonceSQL = `INSERT INTO _S_.mcp_nonces (tenant, nonce, until_at) VALUES ($1, $2, $3)
		ON CONFLICT (tenant, nonce) DO UPDATE SET until_at = EXCLUDED.until_at WHERE _S_.mcp_nonces.until_at <= $4`
)

// SpendMCPNonce implements store.Store. The insert decides alone, atomically
// (ON CONFLICT): of concurrent spenders of one nonce, one affects its row.
func (s *Store) SpendMCPNonce(ctx context.Context, params *store.SpendMCPNonceParams) (bool, error) {
	if err := store.ValidateSpendMCPNonce(params); err != nil {
		return false, wrap("spend mcp nonce", err)
	}
	now := s.clock()
	if _, err := s.pool.Exec(ctx, qualify(s.q.schema, forgetMCPNoncesSQL), now, store.ForgetMCPNonces); err != nil {
		return false, wrap("spend mcp nonce: forget", err)
	}
	tag, err := s.pool.Exec(ctx, qualify(s.q.schema, spendMCPNonceSQL), params.Tenant, params.Nonce, params.Until.UTC(), now)
	if err != nil {
		return false, wrap("spend mcp nonce", err)
	}
	return tag.RowsAffected() == 1, nil
}
