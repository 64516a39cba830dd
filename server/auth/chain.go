package auth

import (
	"context"
	"fmt"

	"github.com/countersign/countersign"
)

var errNoAuthenticator = fmt.Errorf("%w: no authentication configured", ErrUnauthenticated)

type chain []Authenticator

// Chain returns an Authenticator that tries each of as in order and answers
// with the first identity found; nil entries are skipped, so optional
// authenticators can be passed as they are. Put API keys before JWTs: a
// digest comparison is cheaper than a signature check.
//
// When all fail, the error joins theirs. If any of them failed with an error
// that does not wrap ErrUnauthenticated (it could not decide, rather than
// refused), that error is returned instead, so the server answers 5xx rather
// than 401.
func Chain(as ...Authenticator) Authenticator {
	c := make(chain, 0, len(as))
	for _, a := range as {
		if a != nil {
			c = append(c, a)
		}
	}
	return c
}

// Authenticate implements Authenticator: the identity of the first member
// that accepts the token (see AuthenticateCredential).
func (c chain) Authenticate(ctx context.Context, token string) (countersign.Identity, error) {
	cred, err := c.AuthenticateCredential(ctx, token)
	return cred.Identity, err
}
