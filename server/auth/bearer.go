package auth

import (
	"fmt"
	"net/http"
	"strings"
)

// maxTokenBytes bounds a bearer token. JWTs from common identity providers
// are well under it; anything longer is refused before any parsing.
const maxTokenBytes = 8 << 10

var (
	errNoAuthorization   = fmt.Errorf("%w: missing Authorization header", ErrUnauthenticated)
	errManyAuthorization = fmt.Errorf("%w: more than one Authorization header", ErrUnauthenticated)
	errNotBearer         = fmt.Errorf("%w: Authorization scheme is not Bearer", ErrUnauthenticated)
	errBadBearer         = fmt.Errorf("%w: malformed bearer token", ErrUnauthenticated)
	errLongBearer        = fmt.Errorf("%w: bearer token longer than %d bytes", ErrUnauthenticated, maxTokenBytes)
)

// BearerToken returns the token of the request's single
// "Authorization: Bearer <token>" header (RFC 6750 §2.1). The scheme is
// case-insensitive and separated from the token by spaces; the token is one
// b64token (letters, digits, "-._~+/", then optional "=" padding) of at most
// 8 KiB. Anything else, including a second Authorization header, is an error
// wrapping ErrUnauthenticated.
func BearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", errNoAuthorization
	case 1:
	default:
		return "", errManyAuthorization
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", errNotBearer
	}
	token = strings.TrimLeft(token, " ")
	if len(token) > maxTokenBytes {
		return "", errLongBearer
	}
	if !validToken(token) {
		return "", errBadBearer
	}
	return token, nil
}

// validToken reports whether s is one RFC 6750 b64token of at most
// maxTokenBytes: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func validToken(s string) bool {
	if len(s) > maxTokenBytes {
		return false
	}
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}
