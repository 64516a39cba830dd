package auth

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// The length bound is left to TestBearerToken: minimizing 8 KiB inputs
// would stall the fuzzer.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{
		"Bearer abc", "bearer a.b.c", "Bearer  abc==", "Basic abc", "Bearer", "Bearer a b",
		"Bearer\tabc", "Bearer =", "BEARER a/b+c~d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Authorization"] = []string{header}
		token, err := BearerToken(r)
		if err != nil {
			if token != "" || !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("BearerToken(%q) = %q, %v", header, token, err)
			}
			if len(header) > 16 && strings.Contains(err.Error(), header[7:]) {
				t.Fatalf("error %q quotes the header", err)
			}
			return
		}
		if !validToken(token) || len(token) > maxTokenBytes {
			t.Fatalf("BearerToken(%q) = %q: not a b64token", header, token)
		}
		if !strings.EqualFold(header[:7], "Bearer ") || !strings.HasSuffix(header, " "+token) ||
			strings.TrimLeft(header[7:], " ") != token {
			t.Fatalf("BearerToken(%q) = %q: not what the header carries", header, token)
		}
	})
}

func FuzzJWT(f *testing.F) {
	k := testKeys()
	cfg := testJWTConfig(f)
	a, err := NewJWT(cfg)
	if err != nil {
		f.Fatal(err)
	}
	expired := goodClaims()
	expired["exp"] = testNow.Add(-time.Hour).Unix()
	// Seeds with valid signatures carry claims that fail: a mutation that
	// keeps the signature valid cannot fix them.
	for _, s := range []string{
		sign(f, jwt.SigningMethodHS256, testSecret, expired, nil),
		sign(f, jwt.SigningMethodRS256, k.rsa, expired, H{"kid": "rsa1"}),
		sign(f, jwt.SigningMethodES256, k.ec, expired, H{"kid": "ec1"}),
		sign(f, jwt.SigningMethodES256, k.ecOther, goodClaims(), H{"kid": "ec1"}),
		sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, goodClaims(), nil),
		unsigned(`{"alg":"HS256"}`, `{"tid":"acme","sub":"a","exp":1e300}`, []byte("x")),
		unsigned(`{"alg":"RS256","kid":"rsa1","crit":["b64"],"b64":false}`, `{}`, nil),
		"a.b.c", "..", "", "ck_dev_alice", "eyJ.eyJ.",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		id, err := a.Authenticate(context.Background(), token)
		if err == nil {
			t.Fatalf("Authenticate(%q) = %+v: a random token authenticated", token, id)
		}
		if !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("Authenticate(%q): %v does not wrap ErrUnauthenticated", token, err)
		}
		if id.Tenant != "" || id.Actor != "" || id.Roles != nil {
			t.Fatalf("Authenticate(%q) = %+v with an error", token, id)
		}
		assertNoLeak(t, err, token)
	})
}
