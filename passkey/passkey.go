package passkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
)

// MaxResponseBytes bounds a browser's answer to a ceremony (an assertion or
// an attestation): real ones are a few kilobytes.
const MaxResponseBytes = 64 << 10

// Timeouts the browser is told for each ceremony. The engine's challenges
// live as long (StepUpTTL for a step-up).
const (
	LoginTimeout        = 2 * time.Minute
	RegistrationTimeout = 5 * time.Minute
)

// ErrInvalid: a browser's answer is malformed, or does not verify against
// the ceremony and the credentials it was checked with.
var ErrInvalid = errors.New("passkey: the response does not verify")

// RP is a WebAuthn relying party for one public URL. It is safe for
// concurrent use.
type RP struct {
	wa     *webauthn.WebAuthn
	origin string
}

// New returns the relying party of publicURL (an absolute http or https
// URL whose host is a domain name, not an IP address, as WebAuthn needs):
// its id is the URL's host without the port, its only origin the URL's
// scheme, host and port.
func New(publicURL string) (*RP, error) {
	u, err := url.Parse(publicURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("passkey: public URL %q: want an absolute http or https URL", publicURL)
	}
	origin := u.Scheme + "://" + u.Host
	wa, err := webauthn.New(&webauthn.Config{
		RPID:          u.Hostname(),
		RPDisplayName: "Countersign",
		RPOrigins:     []string{origin},
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:      protocol.ResidentKeyRequirementPreferred,
			UserVerification: protocol.VerificationRequired,
		},
		AttestationPreference: protocol.PreferNoAttestation,
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Enforce: true, Timeout: LoginTimeout, TimeoutUVD: LoginTimeout},
			Registration: webauthn.TimeoutConfig{Enforce: true, Timeout: RegistrationTimeout, TimeoutUVD: RegistrationTimeout},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("passkey: relying party for %s: %w", origin, err)
	}
	return &RP{wa: wa, origin: origin}, nil
}

// ID is the relying party's id: the public URL's host.
func (rp *RP) ID() string { return rp.wa.Config.RPID }

// Origin is the one origin ceremonies are accepted from.
func (rp *RP) Origin() string { return rp.origin }

// UserHandle is the WebAuthn user handle of an actor of a tenant: the
// SHA-256 of both, so that it is stable, names nobody to the authenticator,
// and differs between tenants.
func UserHandle(tenant, actor string) []byte {
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(actor))
	return h.Sum(nil)
}

// user is an actor as WebAuthn sees it.
type user struct {
	tenant, actor string
	creds         []webauthn.Credential
}

func (u *user) WebAuthnID() []byte                         { return UserHandle(u.tenant, u.actor) }
func (u *user) WebAuthnName() string                       { return u.actor }
func (u *user) WebAuthnDisplayName() string                { return u.actor }
func (u *user) WebAuthnCredentials() []webauthn.Credential { return u.creds }

func newUser(tenant, actor string, records [][]byte) (*user, error) {
	u := &user{tenant: tenant, actor: actor}
	for i, r := range records {
		var c webauthn.Credential
		if err := json.Unmarshal(r, &c); err != nil {
			return nil, fmt.Errorf("passkey: credential record %d: %w", i, err)
		}
		u.creds = append(u.creds, c)
	}
	return u, nil
}

// Ceremony is a begun ceremony: what the browser is sent, and what the
// server keeps until the answer comes.
type Ceremony struct {
	// Options is the JSON the browser's PublicKeyCredential
	// .parseCreationOptionsFromJSON or .parseRequestOptionsFromJSON takes
	// (the "publicKey" member of WebAuthn's options).
	Options json.RawMessage
	// Challenge is the ceremony's challenge, base64url: what the answer's
	// client data must carry.
	Challenge string
	// Session is the ceremony's state, to be kept server-side and handed
	// back to the Finish method.
	Session []byte
}

func ceremony(options any, s *webauthn.SessionData) (*Ceremony, error) {
	opts, err := json.Marshal(options)
	if err != nil {
		return nil, fmt.Errorf("passkey: encode options: %w", err)
	}
	sess, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("passkey: encode session: %w", err)
	}
	return &Ceremony{Options: opts, Challenge: s.Challenge, Session: sess}, nil
}

// BeginLogin begins an assertion by one of an actor's credentials (records
// as Credential.Record encodes them), user verification required.
func (rp *RP) BeginLogin(tenant, actor string, records [][]byte) (*Ceremony, error) {
	u, err := newUser(tenant, actor, records)
	if err != nil {
		return nil, err
	}
	if len(u.creds) == 0 {
		return nil, errors.New("passkey: the actor has no passkey")
	}
	a, s, err := rp.wa.BeginLogin(u, webauthn.WithUserVerification(protocol.VerificationRequired))
	if err != nil {
		return nil, fmt.Errorf("passkey: begin login: %w", err)
	}
	return ceremony(a.Response, s)
}

// BeginRegistration begins the creation of a credential for an actor, none
// of whose existing credentials (records) the authenticator may make again.
func (rp *RP) BeginRegistration(tenant, actor string, records [][]byte) (*Ceremony, error) {
	u, err := newUser(tenant, actor, records)
	if err != nil {
		return nil, err
	}
	c, s, err := rp.wa.BeginRegistration(u, webauthn.WithExclusions(webauthn.Credentials(u.creds).CredentialDescriptors()))
	if err != nil {
		return nil, fmt.Errorf("passkey: begin registration: %w", err)
	}
	return ceremony(c.Response, s)
}

func session(b []byte) (webauthn.SessionData, error) {
	var s webauthn.SessionData
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("passkey: ceremony session: %w", err)
	}
	return s, nil
}

// Credential is a verified credential: its id and its record to store.
type Credential struct {
	// ID is the credential id, base64url without padding.
	ID string
	// Record is the credential's record (public key, counter, flags), to be
	// stored and handed back to later ceremonies.
	Record []byte
}

func credential(c *webauthn.Credential) (*Credential, error) {
	rec, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("passkey: encode credential: %w", err)
	}
	return &Credential{ID: base64.RawURLEncoding.EncodeToString(c.ID), Record: rec}, nil
}

// Assertion is a parsed assertion, not yet verified.
type Assertion struct {
	parsed *protocol.ParsedCredentialAssertionData
}

// ParseAssertion reads a browser's assertion (PublicKeyCredential.toJSON()
// of navigator.credentials.get's answer). A malformed one is ErrInvalid.
func ParseAssertion(body []byte) (*Assertion, error) {
	if len(body) == 0 || len(body) > MaxResponseBytes {
		return nil, fmt.Errorf("%w: an assertion is 1..%d bytes", ErrInvalid, MaxResponseBytes)
	}
	p, err := protocol.ParseCredentialRequestResponseBytes(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, describe(err))
	}
	return &Assertion{parsed: p}, nil
}

// Challenge is the challenge the assertion's client data carries: it names
// the ceremony it answers.
func (a *Assertion) Challenge() string { return a.parsed.Response.CollectedClientData.Challenge }

// CredentialID is the id of the credential that made the assertion,
// base64url without padding.
func (a *Assertion) CredentialID() string {
	return base64.RawURLEncoding.EncodeToString(a.parsed.RawID)
}

// FinishLogin verifies the assertion against the ceremony's session and the
// actor's credentials (records): signature, challenge, origin, relying
// party, user presence and verification, and the signature counter. It
// returns the credential that signed, its record updated. Anything that
// does not verify is ErrInvalid.
func (rp *RP) FinishLogin(tenant, actor string, records [][]byte, sess []byte, a *Assertion) (*Credential, error) {
	u, err := newUser(tenant, actor, records)
	if err != nil {
		return nil, err
	}
	s, err := session(sess)
	if err != nil {
		return nil, err
	}
	if s.UserVerification != protocol.VerificationRequired {
		return nil, errors.New("passkey: the ceremony did not require user verification")
	}
	c, err := rp.wa.ValidateLogin(u, s, a.parsed)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, describe(err))
	}
	if c.Authenticator.CloneWarning {
		return nil, fmt.Errorf("%w: the signature counter went back: the passkey may have been copied", ErrInvalid)
	}
	return credential(c)
}

// Attestation is a parsed attestation, not yet verified.
type Attestation struct {
	parsed *protocol.ParsedCredentialCreationData
}

// ParseAttestation reads a browser's answer to navigator.credentials.create
// (PublicKeyCredential.toJSON()). A malformed one is ErrInvalid.
func ParseAttestation(body []byte) (*Attestation, error) {
	if len(body) == 0 || len(body) > MaxResponseBytes {
		return nil, fmt.Errorf("%w: an attestation is 1..%d bytes", ErrInvalid, MaxResponseBytes)
	}
	p, err := protocol.ParseCredentialCreationResponseBytes(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, describe(err))
	}
	return &Attestation{parsed: p}, nil
}

// Challenge is the challenge the attestation's client data carries.
func (a *Attestation) Challenge() string { return a.parsed.Response.CollectedClientData.Challenge }

// FinishRegistration verifies the attestation against the ceremony's
// session, user verification required, and returns the new credential.
func (rp *RP) FinishRegistration(tenant, actor string, records [][]byte, sess []byte, a *Attestation) (*Credential, error) {
	u, err := newUser(tenant, actor, records)
	if err != nil {
		return nil, err
	}
	s, err := session(sess)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(s.UserID, u.WebAuthnID()) {
		return nil, fmt.Errorf("%w: the ceremony was begun for someone else", ErrInvalid)
	}
	c, err := rp.wa.CreateCredential(u, s, a.parsed)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, describe(err))
	}
	if !c.Flags.UserVerified {
		return nil, fmt.Errorf("%w: the authenticator did not verify its user", ErrInvalid)
	}
	return credential(c)
}

// describe is a protocol error's short text, with its details: what was
// wrong with the answer, never a key's material.
func describe(err error) string {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return strings.TrimSpace(pe.Type + ": " + pe.Details)
	}
	return err.Error()
}
