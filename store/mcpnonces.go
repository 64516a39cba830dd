package store

import (
	"context"
	"fmt"
	"time"
)

// MCPNonces stores the nonces of the MCP gateway's request states
// (docs/api.md Part 3, "MCP 2026-07-28"): a state decides once, in whichever
// process it is presented, so its nonce is spent in the store.
type MCPNonces interface {
	// SpendMCPNonce spends Nonce of Tenant, kept until Until, and reports
	// whether this call spent it: false when it is spent already and its
	// Until has not passed by the driver's clock. A nonce whose Until has
	// passed is forgotten (a state past its deadline decides nothing
	// anyway), so spending it again succeeds; each call also forgets a
	// few such nonces, so the table holds only live ones.
	SpendMCPNonce(ctx context.Context, params *SpendMCPNonceParams) (bool, error)
}

// MaxMCPNonce is the longest nonce SpendMCPNonce stores, in bytes.
const MaxMCPNonce = 128

// ForgetMCPNonces is how many passed nonces one SpendMCPNonce forgets at
// most: enough to keep up with the spends, a bounded cost for each.
const ForgetMCPNonces = 16

// SpendMCPNonceParams names a nonce and how long it is kept.
type SpendMCPNonceParams struct {
	Tenant string
	Nonce  string
	Until  time.Time
}

// ValidateSpendMCPNonce checks the params before a driver stores them.
func ValidateSpendMCPNonce(p *SpendMCPNonceParams) error {
	switch {
	case p == nil:
		return fmt.Errorf("%w: nil params", ErrInvalidParams)
	case p.Tenant == "":
		return fmt.Errorf("%w: tenant is required", ErrInvalidParams)
	case p.Nonce == "" || len(p.Nonce) > MaxMCPNonce:
		return fmt.Errorf("%w: nonce: want 1 to %d bytes", ErrInvalidParams, MaxMCPNonce)
	case p.Until.IsZero():
		return fmt.Errorf("%w: until is required", ErrInvalidParams)
	}
	return nil
}
