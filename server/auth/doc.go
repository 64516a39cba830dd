// Package auth turns a bearer token into the caller's identity: an API key
// from the configuration, or a JWT. The token alone fixes tenant, actor and
// roles; nothing in a request body can choose them.
//
// A server reads the token with [BearerToken] and resolves it with an
// [Authenticator], usually a [Chain] of [APIKeys] (tried first: a digest
// comparison is cheap) and [JWT]:
//
//	keys, err := auth.NewAPIKeys(cfg.APIKeys)
//	…
//	jwt, err := auth.NewJWT(auth.JWTConfig{Issuer: …, Audience: …, JWKSFile: …})
//	…
//	authn := auth.Chain(keys, jwt)
//
//	token, err := auth.BearerToken(r)
//	if err != nil { /* 401 */ }
//	id, err := authn.Authenticate(r.Context(), token)
//	if errors.Is(err, auth.ErrUnauthenticated) { /* 401 */ }
//
// Every failure wraps [ErrUnauthenticated], and no error message quotes the
// token or any part of it, so errors may be logged as they are.
//
// JWTs are verified with HS256 (a shared secret) or with RS256 and ES256
// (P-256) public keys read from a JWKS file at start-up; the token's "alg"
// must match the kind of key it selects, so a token cannot choose a weaker
// algorithm, "none", or an HMAC keyed with a public key. Keys are never
// fetched from a URL or taken from the token's header.
package auth
