package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Keys are generated once: RSA generation is slow under the race detector.
var testKeys = sync.OnceValue(func() (k struct {
	rsa, rsaOther *rsa.PrivateKey
	ec, ecOther   *ecdsa.PrivateKey
}) {
	var err error
	for _, p := range []**rsa.PrivateKey{&k.rsa, &k.rsaOther} {
		if *p, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	}
	for _, p := range []**ecdsa.PrivateKey{&k.ec, &k.ecOther} {
		if *p, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
	}
	return k
})

var (
	testSecret = []byte("0123456789abcdef0123456789abcdef-test-secret")
	testNow    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

const (
	testIssuer   = "https://issuer.example"
	testAudience = "countersign"
)

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, pub *rsa.PublicKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
}

func ecJWK(kid string, pub *ecdsa.PublicKey) map[string]any {
	raw, err := pub.Bytes() // 0x04 || x || y
	if err != nil {
		panic(err)
	}
	return map[string]any{"kty": "EC", "kid": kid, "crv": "P-256",
		"x": b64(raw[1:33]), "y": b64(raw[33:])}
}

// writeJWKS writes {"keys": keys} to a file in a temporary directory.
func writeJWKS(tb testing.TB, keys ...map[string]any) string {
	tb.Helper()
	data, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "jwks.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// testJWTConfig accepts HS256 with testSecret, RS256 with kid "rsa1" and
// ES256 with kid "ec1", at testNow.
func testJWTConfig(tb testing.TB) JWTConfig {
	k := testKeys()
	return JWTConfig{
		Issuer:      testIssuer,
		Audience:    testAudience,
		HS256Secret: testSecret,
		JWKSFile:    writeJWKS(tb, rsaJWK("rsa1", &k.rsa.PublicKey), ecJWK("ec1", &k.ec.PublicKey)),
		Now:         func() time.Time { return testNow },
	}
}

// goodClaims are valid for testJWTConfig.
func goodClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss": testIssuer, "aud": testAudience, "sub": "alice", "tid": "acme",
		"roles": []any{"agent", "finance"},
		"exp":   testNow.Add(time.Hour).Unix(), "nbf": testNow.Add(-time.Minute).Unix(),
	}
}

// sign signs claims with method and key; header entries are added to, or
// (when nil) removed from, the header.
func sign(tb testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims, header map[string]any) string {
	tb.Helper()
	t := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		if v == nil {
			delete(t.Header, k)
		} else {
			t.Header[k] = v
		}
	}
	s, err := t.SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// unsigned builds a token from raw header and claims JSON and a signature.
func unsigned(header, claims string, sig []byte) string {
	return strings.Join([]string{b64([]byte(header)), b64([]byte(claims)), b64(sig)}, ".")
}
