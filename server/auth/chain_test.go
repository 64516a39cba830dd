package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/countersign/countersign"
)

// authFunc adapts a function to Authenticator.
type authFunc func(context.Context, string) (countersign.Identity, error)

func (f authFunc) Authenticate(ctx context.Context, token string) (countersign.Identity, error) {
	return f(ctx, token)
}

func TestChain(t *testing.T) {
	t.Parallel()
	keys, err := NewAPIKeys([]APIKey{{Key: "ck_dev_alice", Tenant: "acme", Actor: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	jwts, err := NewJWT(testJWTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	bobToken := sign(t, jwt.SigningMethodHS256, testSecret, func() jwt.MapClaims {
		c := goodClaims()
		c["sub"] = "bob"
		return c
	}(), nil)
	errStore := errors.New("introspection endpoint unreachable")
	undecided := authFunc(func(context.Context, string) (countersign.Identity, error) {
		return countersign.Identity{}, errStore
	})
	var noKeys *APIKeys
	var noJWT *JWT

	tests := []struct {
		name    string
		chain   Authenticator
		token   string
		actor   string // "": want an error
		wantErr error
	}{
		{"API key", Chain(keys, jwts), "ck_dev_alice", "alice", nil},
		{"JWT", Chain(keys, jwts), bobToken, "bob", nil},
		{"neither", Chain(keys, jwts), "ck_dev_mallory", "", errUnknownAPIKey},
		{"nil and typed-nil entries skipped", Chain(nil, noKeys, jwts, noJWT), bobToken, "bob", nil},
		{"typed nil only", Chain(noKeys, noJWT), "ck_dev_alice", "", ErrUnauthenticated},
		{"empty chain", Chain(), "ck_dev_alice", "", errNoAuthenticator},
		{"undecided, then found", Chain(undecided, keys), "ck_dev_alice", "alice", nil},
		{"undecided beats refused", Chain(keys, undecided, jwts), "nope", "", errStore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id, err := tt.chain.Authenticate(context.Background(), tt.token)
			if tt.actor != "" {
				if err != nil || id.Actor != tt.actor {
					t.Fatalf("Authenticate = %+v, %v; want actor %q", id, err, tt.actor)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Authenticate error = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == errStore && errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("an undecided error became ErrUnauthenticated: %v", err)
			}
		})
	}
}

// TestChainErrorNamesEach checks that a refusal says why each failed.
func TestChainErrorNamesEach(t *testing.T) {
	t.Parallel()
	keys, err := NewAPIKeys(nil)
	if err != nil {
		t.Fatal(err)
	}
	jwts, err := NewJWT(testJWTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Chain(keys, jwts).Authenticate(context.Background(), "ck_dev_alice")
	if !errors.Is(err, errUnknownAPIKey) || !errors.Is(err, errJWTMalformed) {
		t.Fatalf("error = %v, want both refusals", err)
	}
	if strings.Contains(err.Error(), "ck_dev_alice") {
		t.Fatalf("error %q quotes the token", err)
	}
}
