package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/countersign/countersign"
)

// APIKey is one configured API key and the identity it stands for. Exactly
// one of Key and KeySHA256 is set.
type APIKey struct {
	// Key is the key in plain text: convenient in development, but anyone who
	// reads the configuration can use it. It must be a valid bearer token
	// (RFC 6750 b64token characters, at most 8 KiB).
	Key string
	// KeySHA256 is the hex SHA-256 digest of the key, for production: the
	// configuration then holds nothing a caller could present.
	KeySHA256 string
	// Tenant and Actor are required.
	Tenant, Actor string
	// Roles may be empty; an empty role name is an error.
	Roles []string
	// Kind is the kind of credential the key is: countersign.KindHuman
	// (or empty: human) or countersign.KindAgent.
	Kind countersign.CredentialKind
}

// APIKeys authenticates configured API keys. It is safe for concurrent use.
//
// A key is found by the SHA-256 of the token presented, in a map: the time
// taken does not grow with the number of keys, and what it could tell is
// about that digest, never about a configured key: knowing all of a key's
// digest (which a configuration with key_sha256 holds in plain sight) gives
// no way to a token that has it (docs/decisions/0057-api-keys-by-digest.md).
type APIKeys struct {
	keys map[[sha256.Size]byte]countersign.Identity
}

// NewAPIKeys validates keys and returns an Authenticator for them. Errors
// name the offending entry with the configuration's field names
// (api_keys[i].key_sha256). An empty list is valid and authenticates nobody.
func NewAPIKeys(keys []APIKey) (*APIKeys, error) {
	a := &APIKeys{keys: make(map[[sha256.Size]byte]countersign.Identity, len(keys))}
	seen := make(map[[sha256.Size]byte]int, len(keys))
	for i, k := range keys {
		field := fmt.Sprintf("api_keys[%d]", i)
		var digest [sha256.Size]byte
		switch {
		case k.Key != "" && k.KeySHA256 != "":
			return nil, fmt.Errorf("%s: set key or key_sha256, not both", field)
		case k.Key != "":
			if !validToken(k.Key) {
				return nil, fmt.Errorf("%s.key: not a valid bearer token (letters, digits and -._~+/ then optional =, at most %d bytes)", field, maxTokenBytes)
			}
			digest = sha256.Sum256([]byte(k.Key))
		case k.KeySHA256 != "":
			b, err := hex.DecodeString(k.KeySHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s.key_sha256: want %d hex digits", field, 2*sha256.Size)
			}
			digest = [sha256.Size]byte(b)
		default:
			return nil, fmt.Errorf("%s: key or key_sha256 is required", field)
		}
		if k.Tenant == "" {
			return nil, fmt.Errorf("%s.tenant: required", field)
		}
		if k.Actor == "" {
			return nil, fmt.Errorf("%s.actor: required", field)
		}
		if slices.Contains(k.Roles, "") {
			return nil, fmt.Errorf("%s.roles: empty role name", field)
		}
		if !k.Kind.Valid() {
			return nil, fmt.Errorf("%s.kind: %q: want human or agent", field, k.Kind)
		}
		// The same key for two identities would make the answer depend on
		// order; it is a configuration mistake, whichever form each uses.
		if j, dup := seen[digest]; dup {
			return nil, fmt.Errorf("%s: same key as api_keys[%d]", field, j)
		}
		seen[digest] = i
		a.keys[digest] = countersign.Identity{Tenant: k.Tenant, Actor: k.Actor, Roles: slices.Clone(k.Roles), Kind: cmp.Or(k.Kind, countersign.KindHuman)}
	}
	return a, nil
}

var errUnknownAPIKey = fmt.Errorf("%w: api key: unknown key", ErrUnauthenticated)

// Authenticate returns the identity of the key whose digest matches token's.
func (a *APIKeys) Authenticate(_ context.Context, token string) (countersign.Identity, error) {
	// The length of a token is not secret; the bound keeps hashing cheap.
	if a == nil || token == "" || len(token) > maxTokenBytes {
		return countersign.Identity{}, errUnknownAPIKey
	}
	return a.byDigest(sha256.Sum256([]byte(token)))
}

// AuthenticateCredential implements CredentialAuthenticator: a key does not
// expire, and can be removed from the configuration.
func (a *APIKeys) AuthenticateCredential(ctx context.Context, token string) (Credential, error) {
	id, err := a.Authenticate(ctx, token)
	if err != nil {
		return Credential{}, err
	}
	return Credential{Identity: id, Revocable: true}, nil
}

// LookupSHA256 implements KeyLookup.
func (a *APIKeys) LookupSHA256(_ context.Context, digest string) (countersign.Identity, error) {
	b, err := hex.DecodeString(digest)
	if a == nil || err != nil || len(b) != sha256.Size {
		return countersign.Identity{}, errUnknownAPIKey
	}
	return a.byDigest([sha256.Size]byte(b))
}

// byDigest returns the identity of the key with this digest.
func (a *APIKeys) byDigest(digest [sha256.Size]byte) (countersign.Identity, error) {
	id, ok := a.keys[digest]
	if !ok {
		return countersign.Identity{}, errUnknownAPIKey
	}
	id.Roles = slices.Clone(id.Roles) // callers may not change the configuration
	return id, nil
}
