package countersign

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// SpendMCPNonce spends the nonce of an MCP request state of tenant, kept
// until until (the state's deadline), and reports whether this call spent
// it: a state decides once, in whichever process presents it first. The MCP
// gateway spends a state's nonce only after its signature and every field
// it binds have matched the caller and the request.
func (e *Engine) SpendMCPNonce(ctx context.Context, tenant, nonce string, until time.Time) (bool, error) {
	ok, err := e.store.SpendMCPNonce(ctx, &store.SpendMCPNonceParams{Tenant: tenant, Nonce: nonce, Until: until})
	if err != nil {
		return false, fmt.Errorf("spend mcp nonce: %w", err)
	}
	return ok, nil
}
