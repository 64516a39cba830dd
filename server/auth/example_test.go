package auth_test

import (
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/countersign/countersign/server/auth"
)

func ExampleChain() {
	keys, err := auth.NewAPIKeys([]auth.APIKey{
		{Key: "ck_dev_alice", Tenant: "acme", Actor: "alice", Roles: []string{"agent"}},
		// The SHA-256 of "ck_live_bob": the configuration holds no usable key.
		{KeySHA256: "b07cb36450da0991152185aaae02e2ff3a11503cbd00ea9da159051de990d92b", Tenant: "acme", Actor: "bob"},
	})
	if err != nil {
		panic(err)
	}
	// In a server this chain would also hold a *auth.JWT from auth.NewJWT.
	authn := auth.Chain(keys)

	for _, header := range []string{"Bearer ck_dev_alice", "Bearer ck_live_bob", "Basic YWxpY2U6cHc=", "Bearer ck_dev_mallory"} {
		r := httptest.NewRequest("GET", "/v1/proposals", nil)
		r.Header.Set("Authorization", header)
		token, err := auth.BearerToken(r)
		if err != nil {
			fmt.Println("401:", err)
			continue
		}
		id, err := authn.Authenticate(r.Context(), token)
		if errors.Is(err, auth.ErrUnauthenticated) {
			fmt.Println("401:", err)
			continue
		}
		fmt.Println(id.Tenant, id.Actor, id.Roles)
	}
	// Output:
	// acme alice [agent]
	// acme bob []
	// 401: unauthenticated: Authorization scheme is not Bearer
	// 401: unauthenticated: api key: unknown key
}
