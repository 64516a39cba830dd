package auth

import (
	"context"
	"errors"

	"github.com/countersign/countersign"
)

// ErrUnauthenticated matches every authentication failure: a missing,
// unknown, malformed, expired or badly signed token. Its message never
// includes the token.
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticator resolves a bearer token (without the "Bearer " prefix).
// Implementations are safe for concurrent use.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (countersign.Identity, error)
}
