package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/countersign/countersign"
)

func hexSHA256(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// TestAPIKeyCredential checks that an API key is a revocable credential
// without expiry, and that it is found again by its SHA-256 alone, whether
// the configuration holds the key or its digest.
func TestAPIKeyCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, err := NewAPIKeys([]APIKey{
		{Key: "ck_alice", Tenant: "acme", Actor: "alice", Roles: []string{"agent"}},
		{KeySHA256: hexSHA256("ck_bob"), Tenant: "acme", Actor: "bob"},
	})
	if err != nil {
		t.Fatal(err)
	}
	alice := countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	cred, err := keys.AuthenticateCredential(ctx, "ck_alice")
	if err != nil || !sameIdentity(cred.Identity, alice) || !cred.Revocable || !cred.ExpiresAt.IsZero() {
		t.Fatalf("credential %+v, %v; want alice, revocable, no expiry", cred, err)
	}
	if _, err := keys.AuthenticateCredential(ctx, "ck_nobody"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("unknown key: %v", err)
	}
	for key, want := range map[string]string{"ck_alice": "alice", "ck_bob": "bob"} {
		id, err := keys.LookupSHA256(ctx, hexSHA256(key))
		if err != nil || id.Actor != want {
			t.Errorf("lookup %s by digest: %+v, %v; want %s", key, id, err, want)
		}
	}
	for name, digest := range map[string]string{
		"unknown":   hexSHA256("ck_nobody"),
		"the key":   "ck_alice",
		"not hex":   strings.Repeat("z", 64),
		"short":     hexSHA256("ck_alice")[:62],
		"uppercase": strings.ToUpper(hexSHA256("ck_carol")),
		"empty":     "",
	} {
		if _, err := keys.LookupSHA256(ctx, digest); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("lookup %s: %v, want unauthenticated", name, err)
		}
	}
	// A lookup hands out a copy of the configured roles.
	id, _ := keys.LookupSHA256(ctx, hexSHA256("ck_alice"))
	id.Roles[0] = "operator"
	if again, _ := keys.LookupSHA256(ctx, hexSHA256("ck_alice")); again.Roles[0] != "agent" {
		t.Errorf("a caller changed the configured roles to %q", again.Roles)
	}
}

// TestJWTCredential checks that a JWT's credential expires at its "exp" and
// is not revocable, and that it fails as Authenticate does.
func TestJWTCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j, err := NewJWT(testJWTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	exp := testNow.Add(17 * time.Minute)
	claims := goodClaims()
	claims["exp"] = exp.Unix()
	cred, err := j.AuthenticateCredential(ctx, sign(t, jwt.SigningMethodHS256, testSecret, claims, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !cred.ExpiresAt.Equal(exp) || cred.Revocable || cred.Identity.Actor != "alice" || cred.Identity.Tenant != "acme" {
		t.Errorf("credential %+v; want alice of acme until %v, not revocable", cred, exp)
	}
	claims["exp"] = testNow.Add(-time.Second).Unix()
	if _, err := j.AuthenticateCredential(ctx, sign(t, jwt.SigningMethodHS256, testSecret, claims, nil)); !errors.Is(err, errJWTExpired) {
		t.Errorf("expired token: %v, want %v", err, errJWTExpired)
	}
	var none *JWT
	if _, err := none.AuthenticateCredential(ctx, "x"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("nil JWT: %v", err)
	}
}

// TestChainCredential checks that a chain answers with the bounds of the
// member that authenticated the token, gives a plain Authenticator's
// identity without bounds, and finds keys by digest through its members.
func TestChainCredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys, err := NewAPIKeys([]APIKey{{Key: "ck_alice", Tenant: "acme", Actor: "alice"}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := NewJWT(testJWTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	plain := authFunc(func(_ context.Context, tok string) (countersign.Identity, error) {
		if tok == "custom_carol" {
			return countersign.Identity{Tenant: "acme", Actor: "carol"}, nil
		}
		return countersign.Identity{}, ErrUnauthenticated
	})
	c := Chain(keys, j, plain).(CredentialAuthenticator)
	token := sign(t, jwt.SigningMethodHS256, testSecret, goodClaims(), nil)
	for tok, want := range map[string]Credential{
		"ck_alice":     {Identity: countersign.Identity{Tenant: "acme", Actor: "alice"}, Revocable: true},
		token:          {Identity: countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent", "finance"}}, ExpiresAt: testNow.Add(time.Hour)},
		"custom_carol": {Identity: countersign.Identity{Tenant: "acme", Actor: "carol"}},
	} {
		got, err := c.AuthenticateCredential(ctx, tok)
		if err != nil || !sameIdentity(got.Identity, want.Identity) || got.Revocable != want.Revocable || !got.ExpiresAt.Equal(want.ExpiresAt) {
			t.Errorf("%.12s: %+v, %v; want %+v", tok, got, err, want)
		}
	}
	if _, err := c.AuthenticateCredential(ctx, "nobody"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("unknown token: %v", err)
	}
	errDown := errors.New("directory down")
	undecided := Chain(authFunc(func(context.Context, string) (countersign.Identity, error) { return countersign.Identity{}, errDown }), keys)
	if _, err := undecided.(CredentialAuthenticator).AuthenticateCredential(ctx, "nobody"); !errors.Is(err, errDown) {
		t.Errorf("undecided member: %v, want %v", err, errDown)
	}

	kl := c.(KeyLookup)
	if id, err := kl.LookupSHA256(ctx, hexSHA256("ck_alice")); err != nil || id.Actor != "alice" {
		t.Errorf("lookup through the chain: %+v, %v", id, err)
	}
	if _, err := kl.LookupSHA256(ctx, hexSHA256(token)); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("lookup of a JWT's digest: %v, want unauthenticated", err)
	}
	if _, err := Chain(j).(KeyLookup).LookupSHA256(ctx, hexSHA256("ck_alice")); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("lookup in a chain without keys: %v, want unauthenticated", err)
	}
}

// TestAuthenticateCredentialPlain checks that an Authenticator without
// bounds keeps working: its credential is its identity alone.
func TestAuthenticateCredentialPlain(t *testing.T) {
	t.Parallel()
	plain := authFunc(func(context.Context, string) (countersign.Identity, error) {
		return countersign.Identity{Tenant: "acme", Actor: "dave"}, nil
	})
	cred, err := AuthenticateCredential(context.Background(), plain, "anything")
	if err != nil || cred.Identity.Actor != "dave" || cred.Revocable || !cred.ExpiresAt.IsZero() {
		t.Errorf("credential %+v, %v; want dave, unbounded", cred, err)
	}
	errNo := errors.New("no")
	refusing := authFunc(func(context.Context, string) (countersign.Identity, error) { return countersign.Identity{}, errNo })
	if _, err := AuthenticateCredential(context.Background(), refusing, "x"); !errors.Is(err, errNo) {
		t.Errorf("refusal: %v", err)
	}
}
