package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"slices"
	"strings"
)

const (
	minRSABits = 2048
	// maxRSABits is the largest modulus crypto/rsa verifies with.
	maxRSABits = 16384
	// maxJWKSBytes bounds the file: a real key set is a few KiB.
	maxJWKSBytes = 1 << 20
)

// verifyKey is one public key from the JWKS file, with the only algorithm a
// token may use with it.
type verifyKey struct {
	kid string
	alg string // algRS256 or algES256
	key any    // *rsa.PublicKey or *ecdsa.PublicKey, as the jwt package wants
}

// jwk holds the members of RFC 7517/7518 keys that this package reads.
type jwk struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	Crv    string   `json:"crv"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
	// Private members: any of them in a file of public keys is a leak.
	D   string          `json:"d"`
	P   string          `json:"p"`
	Q   string          `json:"q"`
	DP  string          `json:"dp"`
	DQ  string          `json:"dq"`
	QI  string          `json:"qi"`
	Oth json.RawMessage `json:"oth"`
	K   string          `json:"k"`
}

// readJWKS reads the public signing keys of a JWKS file ({"keys": [...]}).
//
// A key is used when it can verify RS256 or ES256: kty "RSA", or kty "EC"
// with crv "P-256"; "use" absent or "sig"; "alg" absent or the matching one;
// "key_ops" absent or holding "verify". Other keys (encryption keys, other
// curves and algorithms) are skipped, so a provider's published set can be
// used as it is. A used key that is malformed or too weak is an error, as is
// private key material anywhere in the file, a "kid" shared by two used
// keys, or a file without a usable key.
func readJWKS(path string) ([]verifyKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxJWKSBytes)
	}
	return parseJWKS(data)
}

func parseJWKS(data []byte) ([]verifyKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	var keys []verifyKey
	kids := make(map[string]int)
	for i, k := range set.Keys {
		if k.D != "" || k.P != "" || k.Q != "" || k.DP != "" || k.DQ != "" || k.QI != "" || len(k.Oth) > 0 || k.K != "" {
			return nil, fmt.Errorf("keys[%d]: holds private or secret key material; give public keys only", i)
		}
		alg := usableAlg(k)
		if alg == "" {
			continue
		}
		var (
			pub any
			err error
		)
		if alg == algRS256 {
			pub, err = rsaKey(k)
		} else {
			pub, err = ecKey(k)
		}
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if k.Kid != "" {
			if j, dup := kids[k.Kid]; dup {
				return nil, fmt.Errorf("keys[%d]: kid %q already used by keys[%d]", i, k.Kid, j)
			}
			kids[k.Kid] = i
		}
		keys = append(keys, verifyKey{kid: k.Kid, alg: alg, key: pub})
	}
	if len(keys) == 0 {
		return nil, errors.New("no RS256 or ES256 (P-256) signing key")
	}
	return keys, nil
}

// usableAlg returns the algorithm k verifies, or "" when it is not a key
// this package uses.
func usableAlg(k jwk) string {
	if k.Use != "" && k.Use != "sig" {
		return ""
	}
	if k.KeyOps != nil && !slices.Contains(k.KeyOps, "verify") {
		return ""
	}
	var alg string
	switch {
	case k.Kty == "RSA":
		alg = algRS256
	case k.Kty == "EC" && k.Crv == "P-256":
		alg = algES256
	default:
		return ""
	}
	if k.Alg != "" && k.Alg != alg {
		return ""
	}
	return alg
}

func rsaKey(k jwk) (*rsa.PublicKey, error) {
	nb, err := decodeB64URL(k.N)
	if err != nil || len(nb) == 0 {
		return nil, errors.New("n: not base64url")
	}
	eb, err := decodeB64URL(k.E)
	if err != nil || len(eb) == 0 {
		return nil, errors.New("e: not base64url")
	}
	n := new(big.Int).SetBytes(nb)
	if bits := n.BitLen(); bits < minRSABits || bits > maxRSABits {
		return nil, fmt.Errorf("RSA modulus has %d bits, want %d to %d", bits, minRSABits, maxRSABits)
	}
	if n.Bit(0) == 0 {
		return nil, errors.New("n: RSA modulus is even")
	}
	e := new(big.Int).SetBytes(eb)
	// crypto/rsa takes an int exponent and refuses even or tiny ones.
	if e.BitLen() > 31 || e.Int64() < 3 || e.Bit(0) == 0 {
		return nil, errors.New("e: RSA exponent must be odd, at least 3 and below 2^31")
	}
	return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
}

func ecKey(k jwk) (*ecdsa.PublicKey, error) {
	const size = 32 // P-256 coordinates, full length (RFC 7518 §6.2.1.2)
	x, err := decodeB64URL(k.X)
	if err != nil || len(x) != size {
		return nil, fmt.Errorf("x: want %d base64url bytes", size)
	}
	y, err := decodeB64URL(k.Y)
	if err != nil || len(y) != size {
		return nil, fmt.Errorf("y: want %d base64url bytes", size)
	}
	point := make([]byte, 0, 1+2*size)
	point = append(point, 4) // SEC 1 uncompressed point
	point = append(point, x...)
	point = append(point, y...)
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
	if err != nil {
		return nil, errors.New("x, y: not a point on P-256")
	}
	return pub, nil
}

// decodeB64URL decodes base64url, without padding as RFC 7515 asks, but
// tolerating it since some encoders add it.
func decodeB64URL(s string) ([]byte, error) {
	return base64.RawURLEncoding.Strict().DecodeString(strings.TrimRight(s, "="))
}
