// Package passkey is Countersign's WebAuthn relying party: it makes the
// options a browser's navigator.credentials.create and .get take, and
// verifies what they answer, with github.com/go-webauthn/webauthn. User
// verification is required in every ceremony: a passkey proves that its
// person was there, not only their device.
//
// It holds no state and decides nothing: the engine (the root package's
// stepup.go) stores the ceremonies' state and the credential records this
// package encodes, binds every challenge to what it may be spent for, and
// decides who may enrol, add, remove and approve. The relying party's id
// and origin come from the server's public_url, never from a request.
//
// Everything a browser sends is hostile until verified: the parsers bound
// its size and answer a malformed body with an error, never a panic.
package passkey
