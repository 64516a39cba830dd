package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/countersign/countersign"
)

// Default claim names, used where JWTConfig.Claims leaves a name empty.
const (
	DefaultTenantClaim = "tid"
	DefaultActorClaim  = "sub"
	DefaultRolesClaim  = "roles"
	DefaultKindClaim   = "ck_kind"
)

// MinHS256SecretBytes is the shortest HS256 secret NewJWT accepts: the size
// of the hash output, as RFC 7518 §3.2 requires.
const MinHS256SecretBytes = 32

const (
	algHS256 = "HS256"
	algRS256 = "RS256"
	algES256 = "ES256"
)

// ClaimNames names the JWT claims that carry the caller's identity. They are
// top-level claims; nested paths are not supported.
type ClaimNames struct {
	// Tenant names a string claim; default DefaultTenantClaim ("tid").
	Tenant string
	// Actor names a string claim; default DefaultActorClaim ("sub").
	Actor string
	// Roles names a claim holding an array of strings or one space-separated
	// string (as OAuth's "scope"); default DefaultRolesClaim ("roles"). It
	// may be absent: the caller then has no roles.
	Roles string
	// Kind names a string claim holding exactly "human" or "agent" (any
	// other value is refused); default DefaultKindClaim ("ck_kind"). A
	// token without it takes JWTConfig.DefaultKind.
	Kind string
}

// JWTConfig configures NewJWT. At least one of HS256Secret and JWKSFile is
// required; the zero value of every other field is a sane default.
type JWTConfig struct {
	// Issuer, when set, must equal the token's "iss" claim.
	Issuer string
	// Audience, when set, must be in the token's "aud" claim. Set it whenever
	// the issuer also issues tokens for other services, or theirs work here.
	Audience string
	// HS256Secret enables HS256 tokens. It is at least MinHS256SecretBytes
	// long. Without it, HS256 tokens are refused.
	HS256Secret []byte
	// JWKSFile is the path of a JWKS JSON file ({"keys": [...]}) with the
	// public keys of RS256 (RSA, at least 2048 bits) and ES256 (EC, P-256)
	// tokens; a token selects one by its "kid" header, and its "alg" must
	// match the key's type. A token without "kid" may use the only key of
	// its algorithm. Keys for other uses or algorithms are skipped. The file
	// is read once, by NewJWT. Without it, RS256 and ES256 tokens are refused.
	JWKSFile string
	// Claims names the identity claims; empty names take the defaults.
	Claims ClaimNames
	// DefaultKind is the kind of a token without the kind claim; empty:
	// countersign.KindHuman.
	DefaultKind countersign.CredentialKind
	// Leeway is the clock skew allowed when checking "exp" and "nbf";
	// default 0.
	Leeway time.Duration
	// Now tells the time; default time.Now.
	Now func() time.Time
}

// JWT authenticates JSON Web Tokens. It is safe for concurrent use.
//
// A token is accepted when its signature verifies with an algorithm and key
// the configuration allows (HS256, RS256, ES256; never "none"), it has an
// "exp" claim in the future, its "nbf" (if any) is past, its "iss" and "aud"
// match the configured ones, it has no "crit" header, and its tenant and
// actor claims are non-empty strings.
type JWT struct {
	opts   []jwt.ParserOption
	algs   []string
	secret []byte
	keys   []verifyKey
	claims ClaimNames
	kind   countersign.CredentialKind // of a token without the kind claim
}

// NewJWT validates cfg, reads the JWKS file, and returns an Authenticator.
// Errors name the offending field.
func NewJWT(cfg JWTConfig) (*JWT, error) {
	j := &JWT{
		claims: ClaimNames{
			Tenant: cmp.Or(cfg.Claims.Tenant, DefaultTenantClaim),
			Actor:  cmp.Or(cfg.Claims.Actor, DefaultActorClaim),
			Roles:  cmp.Or(cfg.Claims.Roles, DefaultRolesClaim),
			Kind:   cmp.Or(cfg.Claims.Kind, DefaultKindClaim),
		},
		kind: cmp.Or(cfg.DefaultKind, countersign.KindHuman),
	}
	if !cfg.DefaultKind.Valid() {
		return nil, fmt.Errorf("jwt: default kind %q: want human or agent", cfg.DefaultKind)
	}
	if cfg.HS256Secret == nil && cfg.JWKSFile == "" {
		return nil, errors.New("jwt: set an HS256 secret, a JWKS file, or both")
	}
	if cfg.HS256Secret != nil {
		if len(cfg.HS256Secret) < MinHS256SecretBytes {
			return nil, fmt.Errorf("jwt: HS256 secret is %d bytes, want at least %d", len(cfg.HS256Secret), MinHS256SecretBytes)
		}
		j.secret = slices.Clone(cfg.HS256Secret)
		j.algs = append(j.algs, algHS256)
	}
	if cfg.JWKSFile != "" {
		keys, err := readJWKS(cfg.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("jwt: jwks_file %s: %w", cfg.JWKSFile, err)
		}
		j.keys = keys
		for _, k := range keys {
			if !slices.Contains(j.algs, k.alg) {
				j.algs = append(j.algs, k.alg)
			}
		}
	}
	if cfg.Leeway < 0 {
		return nil, fmt.Errorf("jwt: leeway is %v, want 0 or more", cfg.Leeway)
	}
	j.opts = []jwt.ParserOption{
		// The allow-list is the first defence against algorithm confusion:
		// "none", and HS256 when no secret is configured, never reach key
		// selection. key() is the second.
		jwt.WithValidMethods(j.algs),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(cfg.Leeway),
		// One token, one encoding: no malleable trailing bits.
		jwt.WithStrictDecoding(),
	}
	if cfg.Issuer != "" {
		j.opts = append(j.opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		j.opts = append(j.opts, jwt.WithAudience(cfg.Audience))
	}
	if cfg.Now != nil {
		j.opts = append(j.opts, jwt.WithTimeFunc(cfg.Now))
	}
	return j, nil
}

// The messages are fixed strings: none quotes the token, its header or its
// claims, so they can be logged.
var (
	errJWTNotConfigured = fmt.Errorf("%w: jwt: not configured", ErrUnauthenticated)
	errJWTMalformed     = fmt.Errorf("%w: jwt: malformed token", ErrUnauthenticated)
	errJWTAlg           = fmt.Errorf("%w: jwt: algorithm not accepted", ErrUnauthenticated)
	errJWTCrit          = fmt.Errorf("%w: jwt: unsupported critical header", ErrUnauthenticated)
	errJWTKid           = fmt.Errorf("%w: jwt: malformed kid header", ErrUnauthenticated)
	errJWTNoKey         = fmt.Errorf("%w: jwt: no key for the token's kid and algorithm", ErrUnauthenticated)
	errJWTSignature     = fmt.Errorf("%w: jwt: bad signature", ErrUnauthenticated)
	errJWTExpired       = fmt.Errorf("%w: jwt: token expired", ErrUnauthenticated)
	errJWTNotYetValid   = fmt.Errorf("%w: jwt: token not valid yet", ErrUnauthenticated)
	errJWTIssuer        = fmt.Errorf("%w: jwt: wrong issuer", ErrUnauthenticated)
	errJWTAudience      = fmt.Errorf("%w: jwt: wrong audience", ErrUnauthenticated)
	errJWTClaimType     = fmt.Errorf("%w: jwt: a registered claim has the wrong type", ErrUnauthenticated)
	errJWTClaims        = fmt.Errorf("%w: jwt: invalid claims", ErrUnauthenticated)
	errJWTRoles         = fmt.Errorf("%w: jwt: roles claim is not an array of non-empty strings or a string", ErrUnauthenticated)
)

// Authenticate verifies token and maps its claims to an identity.
func (j *JWT) Authenticate(ctx context.Context, token string) (countersign.Identity, error) {
	cred, err := j.AuthenticateCredential(ctx, token)
	return cred.Identity, err
}

// AuthenticateCredential implements CredentialAuthenticator: a token is
// valid until its "exp", and cannot be withdrawn before.
func (j *JWT) AuthenticateCredential(_ context.Context, token string) (Credential, error) {
	if j == nil {
		return Credential{}, errJWTNotConfigured
	}
	// The length of a token is not secret; the bound keeps parsing cheap.
	if token == "" || len(token) > maxTokenBytes {
		return Credential{}, errJWTMalformed
	}
	claims := jwt.MapClaims{}
	// A parser per call: jwt.Parser does not promise to be safe for
	// concurrent use, and building one is cheap next to a signature check.
	parsed, err := jwt.NewParser(j.opts...).ParseWithClaims(token, claims, j.key)
	if err != nil {
		return Credential{}, j.classify(parsed, claims, err)
	}
	id, err := j.identity(claims)
	if err != nil {
		return Credential{}, err
	}
	// The parser required "exp" and checked its type.
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return Credential{}, errJWTClaimType
	}
	cred := Credential{Identity: id, ExpiresAt: exp.UTC()}
	// Claims of another type than a string are left empty: they name
	// nothing the fingerprint could rely on.
	cred.Issuer, _ = claims["iss"].(string)
	cred.Subject, _ = claims["sub"].(string)
	cred.Party, _ = claims["azp"].(string)
	return cred, nil
}

// key selects the verification key for t, whose algorithm is already one
// of j.algs. It returns only a key of the type t's algorithm needs: the
// secret for HS256, a public key of the matching type for RS256 and ES256.
func (j *JWT) key(t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, errJWTCrit // RFC 7515 §4.1.11: we understand no extension
	}
	alg := t.Method.Alg()
	switch alg {
	case algHS256:
		if j.secret == nil {
			return nil, errJWTAlg
		}
		return j.secret, nil
	case algRS256, algES256:
	default:
		return nil, errJWTAlg
	}
	var kid string
	if v, ok := t.Header["kid"]; ok {
		s, ok := v.(string)
		if !ok || s == "" {
			return nil, errJWTKid
		}
		kid = s
	}
	var key any
	n := 0
	for _, k := range j.keys {
		if k.alg == alg && (kid == "" || k.kid == kid) {
			key, n = k.key, n+1
		}
	}
	if n != 1 { // none, or no kid and several candidates
		return nil, errJWTNoKey
	}
	return key, nil
}

// classify turns a jwt error into one of the fixed errors above: the jwt
// package's own messages may quote fragments of the token.
func (j *JWT) classify(t *jwt.Token, claims jwt.MapClaims, err error) error {
	for _, e := range []error{errJWTCrit, errJWTAlg, errJWTKid, errJWTNoKey} {
		if errors.Is(err, e) {
			return e
		}
	}
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return errJWTMalformed
	case t != nil && t.Method != nil && !slices.Contains(j.algs, t.Method.Alg()):
		return errJWTAlg // refused by WithValidMethods
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return errJWTAlg // "alg" missing or unknown
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return errJWTSignature
	}
	// The signature verified; what is left is the claims' validation, so
	// reading the claims to say which is missing is safe.
	switch {
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		for _, name := range []string{"exp", "iss", "aud"} {
			if _, ok := claims[name]; !ok {
				return fmt.Errorf("%w: jwt: missing %s claim", ErrUnauthenticated, name)
			}
		}
		return fmt.Errorf("%w: jwt: missing required claim", ErrUnauthenticated)
	case errors.Is(err, jwt.ErrInvalidType):
		return errJWTClaimType
	case errors.Is(err, jwt.ErrTokenExpired):
		return errJWTExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errJWTNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errJWTIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return errJWTAudience
	}
	return errJWTClaims
}

// identity maps verified claims to the caller's identity.
func (j *JWT) identity(claims jwt.MapClaims) (countersign.Identity, error) {
	tenant, ok := claims[j.claims.Tenant].(string)
	if !ok || tenant == "" {
		return countersign.Identity{}, fmt.Errorf("%w: jwt: %s claim missing, empty or not a string", ErrUnauthenticated, j.claims.Tenant)
	}
	actor, ok := claims[j.claims.Actor].(string)
	if !ok || actor == "" {
		return countersign.Identity{}, fmt.Errorf("%w: jwt: %s claim missing, empty or not a string", ErrUnauthenticated, j.claims.Actor)
	}
	var roles []string
	switch v := claims[j.claims.Roles].(type) {
	case nil: // absent or null: no roles
	case string:
		roles = strings.Fields(v)
	case []any:
		roles = make([]string, 0, len(v))
		for _, r := range v {
			s, ok := r.(string)
			if !ok || s == "" {
				return countersign.Identity{}, errJWTRoles
			}
			roles = append(roles, s)
		}
	default:
		return countersign.Identity{}, errJWTRoles
	}
	kind := j.kind
	if v, present := claims[j.claims.Kind]; present {
		s, _ := v.(string)
		k, err := countersign.ParseCredentialKind(s)
		if err != nil {
			return countersign.Identity{}, fmt.Errorf("%w: jwt: %s claim: want \"human\" or \"agent\"", ErrUnauthenticated, j.claims.Kind)
		}
		kind = k
	}
	return countersign.Identity{Tenant: tenant, Actor: actor, Roles: roles, Kind: kind}, nil
}
