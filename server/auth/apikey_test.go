package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign"
)

func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

func TestAPIKeysAuthenticate(t *testing.T) {
	t.Parallel()
	keys, err := NewAPIKeys([]APIKey{
		{Key: "ck_dev_alice", Tenant: "acme", Actor: "alice", Roles: []string{"agent"}},
		{KeySHA256: sha256Hex("ck_live_bob"), Tenant: "acme", Actor: "bob", Roles: []string{"finance", "operator"}},
		{KeySHA256: strings.ToUpper(sha256Hex("ck_live_carol")), Tenant: "globex", Actor: "carol"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
		want  countersign.Identity // zero: want ErrUnauthenticated
	}{
		{"plain", "ck_dev_alice", countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}},
		{"sha256", "ck_live_bob", countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance", "operator"}}},
		{"sha256 in upper-case hex", "ck_live_carol", countersign.Identity{Tenant: "globex", Actor: "carol"}},
		{"wrong", "ck_dev_mallory", countersign.Identity{}},
		{"empty", "", countersign.Identity{}},
		{"prefix of a key", "ck_dev_alic", countersign.Identity{}},
		{"key with a suffix", "ck_dev_alice2", countersign.Identity{}},
		{"case differs", "CK_DEV_ALICE", countersign.Identity{}},
		{"the digest itself", sha256Hex("ck_live_bob"), countersign.Identity{}},
		{"too long", strings.Repeat("k", maxTokenBytes+1), countersign.Identity{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := keys.Authenticate(context.Background(), tt.token)
			if tt.want.Actor == "" {
				if !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("Authenticate = %+v, %v; want ErrUnauthenticated", got, err)
				}
				assertNoLeak(t, err, tt.token)
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if !sameIdentity(got, tt.want) {
				t.Fatalf("Authenticate = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestAPIKeysEveryPosition exercises the constant-time scan: the match is
// found wherever it stands, including first and last, and never confused
// with a neighbour.
func TestAPIKeysEveryPosition(t *testing.T) {
	t.Parallel()
	const n = 64
	cfg := make([]APIKey, n)
	for i := range cfg {
		key := fmt.Sprintf("ck_%02d", i)
		if i%2 == 0 {
			cfg[i] = APIKey{Key: key, Tenant: "t", Actor: key}
		} else {
			cfg[i] = APIKey{KeySHA256: sha256Hex(key), Tenant: "t", Actor: key}
		}
	}
	keys, err := NewAPIKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		key := fmt.Sprintf("ck_%02d", i)
		id, err := keys.Authenticate(context.Background(), key)
		if err != nil || id.Actor != key {
			t.Fatalf("key %d: %+v, %v", i, id, err)
		}
	}
	if _, err := keys.Authenticate(context.Background(), "ck_64"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestAPIKeysEmptyAndNil(t *testing.T) {
	t.Parallel()
	empty, err := NewAPIKeys(nil)
	if err != nil {
		t.Fatal(err)
	}
	var none *APIKeys
	for _, a := range []*APIKeys{empty, none} {
		if _, err := a.Authenticate(context.Background(), "ck_dev_alice"); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("Authenticate: %v", err)
		}
	}
}

func TestAPIKeysRolesNotShared(t *testing.T) {
	t.Parallel()
	roles := []string{"agent"}
	keys, err := NewAPIKeys([]APIKey{{Key: "k1", Tenant: "acme", Actor: "alice", Roles: roles}})
	if err != nil {
		t.Fatal(err)
	}
	roles[0] = "operator" // the configuration's slice, changed after construction
	id, err := keys.Authenticate(context.Background(), "k1")
	if err != nil {
		t.Fatal(err)
	}
	if id.Roles[0] != "agent" {
		t.Fatalf("roles = %v: the configuration's slice is shared", id.Roles)
	}
	id.Roles[0] = "operator" // the caller's copy
	id, _ = keys.Authenticate(context.Background(), "k1")
	if id.Roles[0] != "agent" {
		t.Fatalf("roles = %v: the returned slice is shared", id.Roles)
	}
}

func TestNewAPIKeysInvalid(t *testing.T) {
	t.Parallel()
	ok := APIKey{Key: "k0", Tenant: "acme", Actor: "alice"}
	tests := []struct {
		name string
		key  APIKey
		want string
	}{
		{"both key fields", APIKey{Key: "k", KeySHA256: sha256Hex("k"), Tenant: "a", Actor: "b"}, "api_keys[1]: set key or key_sha256, not both"},
		{"neither key field", APIKey{Tenant: "a", Actor: "b"}, "api_keys[1]: key or key_sha256 is required"},
		{"empty tenant", APIKey{Key: "k", Actor: "b"}, "api_keys[1].tenant: required"},
		{"empty actor", APIKey{Key: "k", Tenant: "a"}, "api_keys[1].actor: required"},
		{"bad hex", APIKey{KeySHA256: strings.Repeat("zz", 32), Tenant: "a", Actor: "b"}, "api_keys[1].key_sha256: want 64 hex digits"},
		{"short hex", APIKey{KeySHA256: "abcd", Tenant: "a", Actor: "b"}, "api_keys[1].key_sha256: want 64 hex digits"},
		{"long hex", APIKey{KeySHA256: sha256Hex("k") + "00", Tenant: "a", Actor: "b"}, "api_keys[1].key_sha256: want 64 hex digits"},
		{"key with a space", APIKey{Key: "k 1", Tenant: "a", Actor: "b"}, "api_keys[1].key: not a valid bearer token"},
		{"key too long", APIKey{Key: strings.Repeat("k", maxTokenBytes+1), Tenant: "a", Actor: "b"}, "api_keys[1].key: not a valid bearer token"},
		{"empty role", APIKey{Key: "k", Tenant: "a", Actor: "b", Roles: []string{"agent", ""}}, "api_keys[1].roles: empty role name"},
		{"duplicate plain key", APIKey{Key: "k0", Tenant: "a", Actor: "b"}, "api_keys[1]: same key as api_keys[0]"},
		{"duplicate as digest", APIKey{KeySHA256: sha256Hex("k0"), Tenant: "a", Actor: "b"}, "api_keys[1]: same key as api_keys[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewAPIKeys([]APIKey{ok, tt.key})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("NewAPIKeys error = %v, want one starting %q", err, tt.want)
			}
		})
	}
}

// BenchmarkAPIKeysAuthenticate authenticates one key among n configured:
// a server of many tenants holds thousands (B8's, 1,200), and every
// request and every stream's recheck asks.
func BenchmarkAPIKeysAuthenticate(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			cfg := make([]APIKey, n)
			for i := range cfg {
				cfg[i] = APIKey{Key: fmt.Sprintf("ck_%05d", i), Tenant: "t", Actor: "a"}
			}
			keys, err := NewAPIKeys(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			token := fmt.Sprintf("ck_%05d", n/2)
			for b.Loop() {
				if _, err := keys.Authenticate(ctx, token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
