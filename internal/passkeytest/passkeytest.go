// Package passkeytest is a software WebAuthn authenticator for tests: it
// answers the options package passkey makes as a platform authenticator
// with user verification would, so that tests of the engine and the HTTP
// API can enrol passkeys and sign assertions without a browser. (The
// browser tests use Chromium's virtual authenticator instead.)
package passkeytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/fxamacker/cbor/v2"
)

// Authenticator holds credentials for one origin. It is safe for
// concurrent use.
type Authenticator struct {
	origin string

	mu    sync.Mutex
	creds map[string]*credential // by relying party id and user handle
	// UV, when false, makes the authenticator say it did not verify its
	// user.
	UV bool
}

type credential struct {
	id      []byte
	key     *ecdsa.PrivateKey
	user    []byte
	counter uint32
}

// New returns an authenticator that answers for origin (the public URL's
// scheme, host and port).
func New(origin string) *Authenticator {
	return &Authenticator{origin: origin, creds: map[string]*credential{}, UV: true}
}

var b64 = base64.RawURLEncoding

type creationOptions struct {
	Challenge string `json:"challenge"`
	RP        struct {
		ID string `json:"id"`
	} `json:"rp"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
}

type requestOptions struct {
	Challenge        string `json:"challenge"`
	RPID             string `json:"rpId"`
	AllowCredentials []struct {
		ID string `json:"id"`
	} `json:"allowCredentials"`
}

func (a *Authenticator) flags() byte {
	f := byte(0x01) // user present
	if a.UV {
		f |= 0x04
	}
	return f
}

func clientData(typ, challenge, origin string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "challenge": challenge, "origin": origin, "crossOrigin": false})
	return b
}

// Create answers navigator.credentials.create's options (their JSON, the
// "publicKey" member) with the new credential's JSON, as
// PublicKeyCredential.toJSON() gives it.
func (a *Authenticator) Create(options []byte) ([]byte, error) {
	var o creationOptions
	if err := json.Unmarshal(options, &o); err != nil {
		return nil, fmt.Errorf("passkeytest: creation options: %w", err)
	}
	user, err := b64.DecodeString(o.User.ID)
	if err != nil {
		return nil, fmt.Errorf("passkeytest: user id: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	c := &credential{id: make([]byte, 16), key: key, user: user}
	_, _ = rand.Read(c.id)
	pub, err := key.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		return nil, err
	}
	cose, err := cbor.Marshal(map[int]any{1: 2, 3: -7, -1: 1, -2: pub[1:33], -3: pub[33:65]})
	if err != nil {
		return nil, err
	}
	rpHash := sha256.Sum256([]byte(o.RP.ID))
	auth := append([]byte{}, rpHash[:]...)
	auth = append(auth, a.flags()|0x40) // attested credential data
	auth = binary.BigEndian.AppendUint32(auth, 0)
	auth = append(auth, make([]byte, 16)...) // AAGUID
	auth = binary.BigEndian.AppendUint16(auth, uint16(len(c.id)))
	auth = append(auth, c.id...)
	auth = append(auth, cose...)
	att, err := cbor.Marshal(map[string]any{"fmt": "none", "attStmt": map[string]any{}, "authData": auth})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.creds[o.RP.ID+"\x00"+string(c.id)] = c
	a.mu.Unlock()
	return json.Marshal(map[string]any{
		"id": b64.EncodeToString(c.id), "rawId": b64.EncodeToString(c.id), "type": "public-key",
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(clientData("webauthn.create", o.Challenge, a.origin)),
			"attestationObject": b64.EncodeToString(att),
			"transports":        []string{"internal"},
		},
		"clientExtensionResults": map[string]any{},
	})
}

// Get answers navigator.credentials.get's options with an assertion by the
// first credential they allow that this authenticator holds.
func (a *Authenticator) Get(options []byte) ([]byte, error) {
	var o requestOptions
	if err := json.Unmarshal(options, &o); err != nil {
		return nil, fmt.Errorf("passkeytest: request options: %w", err)
	}
	a.mu.Lock()
	var c *credential
	for _, ac := range o.AllowCredentials {
		id, err := b64.DecodeString(ac.ID)
		if err != nil {
			continue
		}
		if c = a.creds[o.RPID+"\x00"+string(id)]; c != nil {
			break
		}
	}
	if c == nil {
		a.mu.Unlock()
		return nil, fmt.Errorf("passkeytest: no credential the options allow")
	}
	c.counter++
	counter := c.counter
	a.mu.Unlock()
	cd := clientData("webauthn.get", o.Challenge, a.origin)
	rpHash := sha256.Sum256([]byte(o.RPID))
	auth := append([]byte{}, rpHash[:]...)
	auth = append(auth, a.flags())
	auth = binary.BigEndian.AppendUint32(auth, counter)
	cdHash := sha256.Sum256(cd)
	digest := sha256.Sum256(append(append([]byte{}, auth...), cdHash[:]...))
	sig, err := ecdsa.SignASN1(rand.Reader, c.key, digest[:])
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"id": b64.EncodeToString(c.id), "rawId": b64.EncodeToString(c.id), "type": "public-key",
		"response": map[string]any{
			"clientDataJSON":    b64.EncodeToString(cd),
			"authenticatorData": b64.EncodeToString(auth),
			"signature":         b64.EncodeToString(sig),
			"userHandle":        b64.EncodeToString(c.user),
		},
		"clientExtensionResults": map[string]any{},
	})
}
