package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// Credential is what a token stands for, and what bounds a session opened
// with it (the inbox's): until when it is valid, and whether it can be
// withdrawn before then.
type Credential struct {
	Identity countersign.Identity
	// ExpiresAt is when the token stops being valid by itself (a JWT's
	// "exp"); zero when it does not expire (an API key).
	ExpiresAt time.Time
	// Revocable: the token can be withdrawn before it expires (an API key
	// removed from the configuration) and is found again by its SHA-256
	// with a KeyLookup, which a session opened with it asks on every use.
	// A credential with an ExpiresAt that is not Revocable (a JWT) is
	// bounded by its expiry alone: the server's streams do not ask about it
	// again. One without an ExpiresAt they ask about every half second.
	Revocable bool
	// Issuer, Subject and Party are a JWT's "iss", "sub" and "azp" claims
	// (each empty when the token has none, and for an API key): who issued
	// the token, to whom, and for which client. The MCP gateway names a
	// JWT's thread by them (mcpgateway, "mcp:<fingerprint>").
	Issuer, Subject, Party string
}

// CredentialAuthenticator is an Authenticator that also tells what bounds a
// session opened with a token. An Authenticator that does not implement it
// still works everywhere: its sessions last their full lifetime.
type CredentialAuthenticator interface {
	Authenticator
	// AuthenticateCredential is Authenticate with the token's bounds.
	AuthenticateCredential(ctx context.Context, token string) (Credential, error)
}

// KeyLookup finds a configured key again by its SHA-256, without the key
// itself: how a session that keeps only the digest checks that its key is
// still configured, for the same identity.
type KeyLookup interface {
	// LookupSHA256 returns the identity of the key whose SHA-256 is digest
	// (64 hex digits), or an error wrapping ErrUnauthenticated when no
	// configured key has it.
	LookupSHA256(ctx context.Context, digest string) (countersign.Identity, error)
}

// AuthenticateCredential resolves token with a, and with its bounds when a
// is a CredentialAuthenticator; otherwise the credential is the identity
// alone.
func AuthenticateCredential(ctx context.Context, a Authenticator, token string) (Credential, error) {
	if ca, ok := a.(CredentialAuthenticator); ok {
		return ca.AuthenticateCredential(ctx, token)
	}
	id, err := a.Authenticate(ctx, token)
	if err != nil {
		return Credential{}, err
	}
	return Credential{Identity: id}, nil
}

var errNoKeyLookup = fmt.Errorf("%w: no key lookup configured", ErrUnauthenticated)

// LookupSHA256 implements KeyLookup over the chain's key lookups, in order.
func (c chain) LookupSHA256(ctx context.Context, digest string) (countersign.Identity, error) {
	var refused error = errNoKeyLookup
	for _, a := range c {
		kl, ok := a.(KeyLookup)
		if !ok {
			continue
		}
		id, err := kl.LookupSHA256(ctx, digest)
		switch {
		case err == nil:
			return id, nil
		case !errors.Is(err, ErrUnauthenticated):
			return countersign.Identity{}, err // could not decide
		default:
			refused = err
		}
	}
	return countersign.Identity{}, refused
}

// AuthenticateCredential implements CredentialAuthenticator, with the
// bounds of whichever member authenticated the token.
func (c chain) AuthenticateCredential(ctx context.Context, token string) (Credential, error) {
	if len(c) == 0 {
		return Credential{}, errNoAuthenticator
	}
	var refused, undecided error
	for _, a := range c {
		cred, err := AuthenticateCredential(ctx, a, token)
		switch {
		case err == nil:
			return cred, nil
		case !errors.Is(err, ErrUnauthenticated):
			if undecided == nil {
				undecided = err
			}
		case refused == nil:
			refused = err
		default:
			refused = fmt.Errorf("%w; %w", refused, err)
		}
	}
	if undecided != nil {
		return Credential{}, undecided
	}
	return Credential{}, refused
}
