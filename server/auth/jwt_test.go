package auth

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/countersign/countersign"
)

func TestJWTAuthenticate(t *testing.T) {
	t.Parallel()
	k := testKeys()
	base := testJWTConfig(t)

	withClaims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := goodClaims()
		edit(c)
		return c
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	alice := countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent", "finance"}}

	tests := []struct {
		name    string
		cfg     func(*JWTConfig) // edits base; nil keeps it
		token   func(t *testing.T) string
		want    countersign.Identity
		wantErr error // nil: want success
	}{
		{
			name:  "HS256",
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodHS256, testSecret, goodClaims(), nil) },
			want:  alice,
		},
		{
			name: "RS256",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), H{"kid": "rsa1"})
			},
			want: alice,
		},
		{
			name:  "ES256",
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodES256, k.ec, goodClaims(), H{"kid": "ec1"}) },
			want:  alice,
		},
		{
			name:  "RS256 without kid uses the only RSA key",
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), nil) },
			want:  alice,
		},
		{
			name: "without kid, several keys of the algorithm",
			cfg: func(c *JWTConfig) {
				c.JWKSFile = writeJWKS(t, rsaJWK("a", &k.rsa.PublicKey), rsaJWK("b", &k.rsaOther.PublicKey))
			},
			token:   func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), nil) },
			wantErr: errJWTNoKey,
		},
		{
			name: "kid selects among several keys",
			cfg: func(c *JWTConfig) {
				c.JWKSFile = writeJWKS(t, rsaJWK("a", &k.rsaOther.PublicKey), rsaJWK("b", &k.rsa.PublicKey))
			},
			token: func(t *testing.T) string { return sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), H{"kid": "b"}) },
			want:  alice,
		},
		{
			name: "expired",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-time.Minute).Unix() }), nil)
			},
			wantErr: errJWTExpired,
		},
		{
			name: "expired within leeway",
			cfg:  func(c *JWTConfig) { c.Leeway = 2 * time.Minute },
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-time.Minute).Unix() }), nil)
			},
			want: alice,
		},
		{
			name: "not yet valid",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(time.Minute).Unix() }), nil)
			},
			wantErr: errJWTNotYetValid,
		},
		{
			name: "wrong issuer",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), nil)
			},
			wantErr: errJWTIssuer,
		},
		{
			name: "missing issuer",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { delete(c, "iss") }), nil)
			},
			wantErr: ErrUnauthenticated,
		},
		{
			name: "issuer not checked when not configured",
			cfg:  func(c *JWTConfig) { c.Issuer = "" },
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["iss"] = "anyone" }), nil)
			},
			want: alice,
		},
		{
			name: "wrong audience",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["aud"] = "someone-else" }), nil)
			},
			wantErr: errJWTAudience,
		},
		{
			name: "audience in a list",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["aud"] = []any{"other", testAudience} }), nil)
			},
			want: alice,
		},
		{
			name: "missing exp",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { delete(c, "exp") }), nil)
			},
			wantErr: ErrUnauthenticated,
		},
		{
			name: "exp of the wrong type",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }), nil)
			},
			wantErr: errJWTClaimType,
		},
		{
			name: "alg none",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, goodClaims(), nil)
			},
			wantErr: errJWTAlg,
		},
		{
			name: "alg NONE, handmade",
			token: func(t *testing.T) string {
				return unsigned(`{"alg":"NONE","typ":"JWT"}`, mustJSON(t, goodClaims()), nil)
			},
			wantErr: errJWTAlg,
		},
		{
			name:    "alg missing",
			token:   func(t *testing.T) string { return unsigned(`{"typ":"JWT"}`, mustJSON(t, goodClaims()), []byte("sig")) },
			wantErr: errJWTAlg,
		},
		{
			name: "HS256 keyed with the RSA public key (PEM), secret configured",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, pubPEM, goodClaims(), H{"kid": "rsa1"})
			},
			wantErr: errJWTSignature,
		},
		{
			name: "HS256 keyed with the RSA public key (DER), secret configured",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, pubDER, goodClaims(), H{"kid": "rsa1"})
			},
			wantErr: errJWTSignature,
		},
		{
			name: "HS256 keyed with the RSA public key, JWKS only",
			cfg:  func(c *JWTConfig) { c.HS256Secret = nil },
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, pubPEM, goodClaims(), H{"kid": "rsa1"})
			},
			wantErr: errJWTAlg,
		},
		{
			name:    "HS256 without a configured secret",
			cfg:     func(c *JWTConfig) { c.HS256Secret = nil },
			token:   func(t *testing.T) string { return sign(t, jwt.SigningMethodHS256, testSecret, goodClaims(), nil) },
			wantErr: errJWTAlg,
		},
		{
			name: "RS256 without a JWKS file",
			cfg:  func(c *JWTConfig) { c.JWKSFile = "" },
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), H{"kid": "rsa1"})
			},
			wantErr: errJWTAlg,
		},
		{
			name: "RS384 is not accepted",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodRS384, k.rsa, goodClaims(), H{"kid": "rsa1"})
			},
			wantErr: errJWTAlg,
		},
		{
			name: "PS256 is not accepted",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodPS256, k.rsa, goodClaims(), H{"kid": "rsa1"})
			},
			wantErr: errJWTAlg,
		},
		{
			name: "ES256 naming an RSA key",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodES256, k.ec, goodClaims(), H{"kid": "rsa1"})
			},
			wantErr: errJWTNoKey,
		},
		{
			name: "RS256 naming an EC key",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), H{"kid": "ec1"})
			},
			wantErr: errJWTNoKey,
		},
		{
			name: "unknown kid",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), H{"kid": "rsa2"})
			},
			wantErr: errJWTNoKey,
		},
		{
			name: "kid not a string",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), H{"kid": 7})
			},
			wantErr: errJWTKid,
		},
		{
			name: "signed by another RSA key under a known kid",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodRS256, k.rsaOther, goodClaims(), H{"kid": "rsa1"})
			},
			wantErr: errJWTSignature,
		},
		{
			name: "signed by another EC key under a known kid",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodES256, k.ecOther, goodClaims(), H{"kid": "ec1"})
			},
			wantErr: errJWTSignature,
		},
		{
			name: "HS256 with another secret",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, []byte(strings.Repeat("x", 32)), goodClaims(), nil)
			},
			wantErr: errJWTSignature,
		},
		{
			name: "tampered payload",
			token: func(t *testing.T) string {
				parts := strings.Split(sign(t, jwt.SigningMethodRS256, k.rsa, goodClaims(), H{"kid": "rsa1"}), ".")
				parts[1] = b64([]byte(mustJSON(t, withClaims(func(c jwt.MapClaims) { c["roles"] = []any{"operator"} }))))
				return strings.Join(parts, ".")
			},
			wantErr: errJWTSignature,
		},
		{
			name: "tampered header",
			token: func(t *testing.T) string {
				parts := strings.Split(sign(t, jwt.SigningMethodES256, k.ec, goodClaims(), H{"kid": "ec1"}), ".")
				parts[0] = b64([]byte(`{"alg":"ES256","kid":"ec1","typ":"JWT","x":1}`))
				return strings.Join(parts, ".")
			},
			wantErr: errJWTSignature,
		},
		{
			name: "signature not in canonical base64",
			token: func(t *testing.T) string {
				tok := sign(t, jwt.SigningMethodHS256, testSecret, goodClaims(), nil)
				// 32 bytes encode to 43 characters; the last carries 2 unused
				// bits, which strict decoding requires to be zero.
				last := tok[len(tok)-1]
				i := strings.IndexByte(alphabet, last)
				return tok[:len(tok)-1] + string(alphabet[i|1])
			},
			wantErr: errJWTMalformed,
		},
		{
			name: "critical header",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, goodClaims(), H{"crit": []any{"exp"}, "exp": 1})
			},
			wantErr: errJWTCrit,
		},
		{
			name: "roles as a space-separated string",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["roles"] = " agent  finance " }), nil)
			},
			want: alice,
		},
		{
			name: "no roles",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { delete(c, "roles") }), nil)
			},
			want: countersign.Identity{Tenant: "acme", Actor: "alice"},
		},
		{
			name: "roles of the wrong type",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["roles"] = 3 }), nil)
			},
			wantErr: errJWTRoles,
		},
		{
			name: "roles holding a number",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["roles"] = []any{"agent", 3} }), nil)
			},
			wantErr: errJWTRoles,
		},
		{
			name: "missing tenant",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { delete(c, "tid") }), nil)
			},
			wantErr: ErrUnauthenticated,
		},
		{
			name: "tenant not a string",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["tid"] = []any{"acme"} }), nil)
			},
			wantErr: ErrUnauthenticated,
		},
		{
			name: "empty actor",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["sub"] = "" }), nil)
			},
			wantErr: ErrUnauthenticated,
		},
		{
			name: "custom claim names",
			cfg:  func(c *JWTConfig) { c.Claims = ClaimNames{Tenant: "org", Actor: "email", Roles: "scope"} },
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) {
					c["org"], c["email"], c["scope"] = "globex", "bob@globex.example", "finance operator"
				}), nil)
			},
			want: countersign.Identity{Tenant: "globex", Actor: "bob@globex.example", Roles: []string{"finance", "operator"}},
		},
		{
			name: "custom claim names ignore the defaults",
			cfg:  func(c *JWTConfig) { c.Claims = ClaimNames{Tenant: "org"} },
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, goodClaims(), nil) // has tid, not org
			},
			wantErr: ErrUnauthenticated,
		},
		{
			name:    "empty",
			token:   func(*testing.T) string { return "" },
			wantErr: errJWTMalformed,
		},
		{
			name:    "API key",
			token:   func(*testing.T) string { return "ck_dev_alice" },
			wantErr: errJWTMalformed,
		},
		{
			name: "too long",
			token: func(t *testing.T) string {
				return sign(t, jwt.SigningMethodHS256, testSecret, withClaims(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("p", maxTokenBytes) }), nil)
			},
			wantErr: errJWTMalformed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := base
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			a, err := NewJWT(cfg)
			if err != nil {
				t.Fatalf("NewJWT: %v", err)
			}
			token := tt.token(t)
			got, err := a.Authenticate(context.Background(), token)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if !sameIdentity(got, tt.want) {
					t.Fatalf("Authenticate = %+v, want %+v", got, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("Authenticate error = %v, want %v", err, tt.wantErr)
			}
			if !sameIdentity(got, countersign.Identity{}) {
				t.Fatalf("Authenticate returned %+v with an error", got)
			}
			assertNoLeak(t, err, token)
		})
	}
}

// TestJWTMissingClaimNamed checks that a missing registered claim is named.
func TestJWTMissingClaimNamed(t *testing.T) {
	t.Parallel()
	a, err := NewJWT(testJWTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, claim := range []string{"exp", "iss", "aud"} {
		c := goodClaims()
		delete(c, claim)
		_, err := a.Authenticate(context.Background(), sign(t, jwt.SigningMethodHS256, testSecret, c, nil))
		if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "missing "+claim+" claim") {
			t.Errorf("without %s: error %v", claim, err)
		}
	}
}

func TestJWTRolesNotShared(t *testing.T) {
	t.Parallel()
	a, err := NewJWT(testJWTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	token := sign(t, jwt.SigningMethodHS256, testSecret, goodClaims(), nil)
	id1, err := a.Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	id1.Roles[0] = "operator"
	id2, err := a.Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if id2.Roles[0] != "agent" {
		t.Fatalf("roles leaked between calls: %v", id2.Roles)
	}
}

func TestJWTNil(t *testing.T) {
	t.Parallel()
	var a *JWT
	if _, err := a.Authenticate(context.Background(), "x.y.z"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("nil JWT: %v", err)
	}
}

func TestNewJWTInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  func(*JWTConfig)
		want string
	}{
		{"neither secret nor JWKS", func(c *JWTConfig) { c.HS256Secret, c.JWKSFile = nil, "" }, "set an HS256 secret"},
		{"short secret", func(c *JWTConfig) { c.HS256Secret = []byte("short") }, "at least 32"},
		{"empty secret", func(c *JWTConfig) { c.HS256Secret, c.JWKSFile = []byte{}, "" }, "at least 32"},
		{"negative leeway", func(c *JWTConfig) { c.Leeway = -time.Second }, "leeway"},
		{"missing JWKS file", func(c *JWTConfig) { c.JWKSFile = filepath.Join(t.TempDir(), "none.json") }, "jwks_file"},
		{"JWKS not JSON", func(c *JWTConfig) {
			c.JWKSFile = filepath.Join(t.TempDir(), "bad.json")
			if err := os.WriteFile(c.JWKSFile, []byte("{keys"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a JWKS"},
		{"JWKS too large", func(c *JWTConfig) {
			c.JWKSFile = filepath.Join(t.TempDir(), "big.json")
			if err := os.WriteFile(c.JWKSFile, []byte(`{"keys":[]}`+strings.Repeat(" ", maxJWKSBytes)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testJWTConfig(t)
			tt.cfg(&cfg)
			_, err := NewJWT(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewJWT error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestParseJWKS(t *testing.T) {
	t.Parallel()
	k := testKeys()
	rsa1 := rsaJWK("rsa1", &k.rsa.PublicKey)
	ec1 := ecJWK("ec1", &k.ec.PublicKey)
	with := func(key map[string]any, kv ...any) map[string]any {
		c := make(map[string]any, len(key))
		for k, v := range key {
			c[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(c, kv[i].(string))
			} else {
				c[kv[i].(string)] = kv[i+1]
			}
		}
		return c
	}
	// An odd 1024-bit modulus: only its size matters to the check.
	small := new(big.Int).Lsh(big.NewInt(1), 1023)
	small.SetBit(small, 0, 1)

	tests := []struct {
		name     string
		keys     []map[string]any
		wantAlgs []string // of the keys used, in order
		wantErr  string
	}{
		{name: "RSA and EC", keys: []map[string]any{rsa1, ec1}, wantAlgs: []string{algRS256, algES256}},
		{name: "padded base64 tolerated", keys: []map[string]any{with(ec1, "x", ec1["x"].(string)+"=")}, wantAlgs: []string{algES256}},
		{name: "RSA without alg or use", keys: []map[string]any{with(rsa1, "alg", nil, "use", nil)}, wantAlgs: []string{algRS256}},
		{name: "key_ops with verify", keys: []map[string]any{with(rsa1, "key_ops", []string{"verify"})}, wantAlgs: []string{algRS256}},
		{
			name: "other keys skipped",
			keys: []map[string]any{
				with(rsa1, "kid", "enc", "use", "enc", "alg", "RSA-OAEP"),
				with(rsa1, "kid", "rs512", "alg", "RS512"),
				with(rsa1, "kid", "ops", "key_ops", []string{"encrypt"}),
				{"kty": "EC", "kid": "p384", "crv": "P-384", "x": "AA", "y": "AA"},
				{"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": "AA"},
				ec1,
			},
			wantAlgs: []string{algES256},
		},
		{name: "empty", keys: nil, wantErr: "no RS256 or ES256"},
		{name: "only skipped keys", keys: []map[string]any{with(rsa1, "use", "enc")}, wantErr: "no RS256 or ES256"},
		{name: "RSA private key", keys: []map[string]any{with(rsa1, "d", "AQAB")}, wantErr: "keys[0]: holds private"},
		{name: "EC private key", keys: []map[string]any{ec1, with(ec1, "kid", "x", "d", "AQAB")}, wantErr: "keys[1]: holds private"},
		{name: "symmetric key", keys: []map[string]any{rsa1, {"kty": "oct", "k": "c2VjcmV0"}}, wantErr: "keys[1]: holds private"},
		{name: "small RSA key", keys: []map[string]any{with(rsa1, "n", b64(small.Bytes()))}, wantErr: "1024 bits"},
		{name: "even RSA modulus", keys: []map[string]any{with(rsa1, "n", b64(new(big.Int).Lsh(big.NewInt(1), 2047).Bytes()))}, wantErr: "even"},
		{name: "RSA exponent 1", keys: []map[string]any{with(rsa1, "e", "AQ")}, wantErr: "exponent"},
		{name: "even RSA exponent", keys: []map[string]any{with(rsa1, "e", "AAI")}, wantErr: "exponent"},
		{name: "huge RSA exponent", keys: []map[string]any{with(rsa1, "e", b64([]byte{1, 0, 0, 0, 1}))}, wantErr: "exponent"},
		{name: "RSA n not base64url", keys: []map[string]any{with(rsa1, "n", "a+b/")}, wantErr: "n: not base64url"},
		{name: "RSA e missing", keys: []map[string]any{with(rsa1, "e", nil)}, wantErr: "e: not base64url"},
		{name: "EC x short", keys: []map[string]any{with(ec1, "x", b64(make([]byte, 31)))}, wantErr: "x: want 32"},
		{name: "EC y missing", keys: []map[string]any{with(ec1, "y", nil)}, wantErr: "y: want 32"},
		{name: "EC point off the curve", keys: []map[string]any{with(ec1, "y", b64(make([]byte, 32)))}, wantErr: "not a point on P-256"},
		{name: "duplicate kid", keys: []map[string]any{rsa1, with(ec1, "kid", "rsa1")}, wantErr: `keys[1]: kid "rsa1" already used by keys[0]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := mustJSON(t, map[string]any{"keys": tt.keys})
			keys, err := parseJWKS([]byte(data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseJWKS error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseJWKS: %v", err)
			}
			var algs []string
			for _, k := range keys {
				algs = append(algs, k.alg)
			}
			if !slices.Equal(algs, tt.wantAlgs) {
				t.Fatalf("algorithms = %v, want %v", algs, tt.wantAlgs)
			}
		})
	}
}

// H is a JWT header edit for sign.
type H = map[string]any

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func sameIdentity(a, b countersign.Identity) bool {
	return a.Tenant == b.Tenant && a.Actor == b.Actor && slices.Equal(a.Roles, b.Roles)
}

// assertNoLeak fails when err's message quotes token or one of its parts.
func assertNoLeak(tb testing.TB, err error, token string) {
	tb.Helper()
	msg := err.Error()
	for _, part := range append(strings.Split(token, "."), token) {
		if len(part) >= 8 && strings.Contains(msg, part) {
			tb.Fatalf("error %q quotes the token", msg)
		}
	}
}

// TestJWTCredentialNamesItsParties: a JWT's credential carries its iss,
// sub and azp claims, which the MCP gateway fingerprints; a claim of
// another type is left empty.
func TestJWTCredentialNamesItsParties(t *testing.T) {
	t.Parallel()
	a, err := NewJWT(testJWTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	claims := goodClaims()
	claims["azp"] = "desktop-client"
	cred, err := a.AuthenticateCredential(context.Background(), sign(t, jwt.SigningMethodHS256, testSecret, claims, nil))
	if err != nil {
		t.Fatal(err)
	}
	if cred.Issuer != claims["iss"] || cred.Subject != claims["sub"] || cred.Party != "desktop-client" {
		t.Fatalf("credential %+v, claims %v", cred, claims)
	}
	claims["azp"] = 42
	cred, err = a.AuthenticateCredential(context.Background(), sign(t, jwt.SigningMethodHS256, testSecret, claims, nil))
	if err != nil || cred.Party != "" {
		t.Fatalf("a numeric azp: %+v %v", cred, err)
	}
}
