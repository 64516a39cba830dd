package store

import (
	"context"
	"slices"
	"time"

	"github.com/countersign/countersign/cstype"
)

// Passkeys stores the people's passkeys (WebAuthn credentials) that step-up
// rules ask for, the single-use links an operator makes to enrol an actor's
// first, and the single-use challenges of the passkey ceremonies.
//
// Nothing here is judged by the store but what makes a single use single:
// an enrollment link is spent with the passkey it enrols, and a challenge is
// spent by the one SpendPasskeyChallenge that finds it, in one transaction,
// however many ask at once. Signatures, counters and who may do what are the
// engine's (stepup.go). Times are the caller's, as for sessions.
type Passkeys interface {
	// CreatePasskeyEnrollment stores an enrollment link. A Hash already
	// stored is ErrInvalidParams. The actor's links that are spent or
	// expired at CreatedAt are removed in the same transaction, so they do
	// not pile up.
	CreatePasskeyEnrollment(ctx context.Context, params *CreatePasskeyEnrollmentParams) error

	// GetPasskeyEnrollment returns a link by its hash, spent or not, or
	// ErrNotFound.
	GetPasskeyEnrollment(ctx context.Context, params *GetPasskeyEnrollmentParams) (*PasskeyEnrollment, error)

	// CreatePasskey stores a passkey and its audit event. A credential ID
	// already stored, for any actor, is ErrInvalidParams. With
	// EnrollmentHash, that link is spent in the same transaction: it must be
	// of the passkey's tenant and actor, unspent, and not expired at Now,
	// else the error wraps ErrNotFound and nothing is stored.
	CreatePasskey(ctx context.Context, params *CreatePasskeyParams) error

	// ListPasskeys returns an actor's passkeys, oldest first.
	ListPasskeys(ctx context.Context, params *ListPasskeysParams) ([]*Passkey, error)

	// UpdatePasskey replaces a passkey's credential record (its signature
	// counter moved) and sets its LastUsedAt. A passkey not stored for the
	// tenant and actor is ErrNotFound.
	UpdatePasskey(ctx context.Context, params *UpdatePasskeyParams) error

	// DeletePasskey removes one of an actor's passkeys and writes its audit
	// event, in one transaction. One not stored for the tenant and actor is
	// ErrNotFound.
	DeletePasskey(ctx context.Context, params *DeletePasskeyParams) error

	// CreatePasskeyChallenge stores a ceremony's challenge. A Hash already
	// stored is ErrInvalidParams. The actor's challenges expired at
	// CreatedAt are removed in the same transaction.
	CreatePasskeyChallenge(ctx context.Context, params *CreatePasskeyChallengeParams) error

	// SpendPasskeyChallenge removes and returns the challenge with Hash when
	// it is bound to exactly the params' tenant, actor, purpose, proposal id
	// and input digest and has not expired at Now. Otherwise (spent, expired,
	// bound to anything else) the error wraps ErrNotFound and a challenge
	// bound to something else stays. Of concurrent spends of one challenge,
	// exactly one succeeds.
	SpendPasskeyChallenge(ctx context.Context, params *SpendPasskeyChallengeParams) (*PasskeyChallenge, error)
}

// The audit events of passkeys. They belong to no proposal (ProposalID is
// empty), so feeds of proposals pass them over; they are chained and
// exported with the tenant's other events.
const (
	EventPasskeyEnrolled cstype.EventType = "passkey.enrolled"
	EventPasskeyAdded    cstype.EventType = "passkey.added"
	EventPasskeyRemoved  cstype.EventType = "passkey.removed"
)

// The purposes a passkey challenge serves.
const (
	// PurposeStepUp: an assertion that approves one proposal.
	PurposeStepUp = "step_up"
	// PurposeRegister: the creation of a passkey, through an enrollment
	// link or after an assertion by an existing one.
	PurposeRegister = "register"
	// PurposeManage: an assertion that lets its actor add or remove a
	// passkey.
	PurposeManage = "manage"
)

// Passkey is one of an actor's WebAuthn credentials.
type Passkey struct {
	Tenant string
	Actor  string
	// ID is the credential id, base64url without padding.
	ID string
	// Name is what its owner calls it.
	Name string
	// Credential is the credential record as package passkey encodes it
	// (public key, counter, flags): opaque to the store.
	Credential []byte
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// Clone returns a deep copy.
func (p *Passkey) Clone() *Passkey {
	c := *p
	c.Credential = slices.Clone(p.Credential)
	if p.LastUsedAt != nil {
		t := *p.LastUsedAt
		c.LastUsedAt = &t
	}
	return &c
}

// PasskeyEnrollment is a single-use link that enrols a passkey for Actor.
// Only the SHA-256 of the link's token is stored.
type PasskeyEnrollment struct {
	// Hash is the SHA-256 of the link's token, lowercase hex.
	Hash      string
	Tenant    string
	Actor     string
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	SpentAt   *time.Time
}

// Clone returns a deep copy.
func (e *PasskeyEnrollment) Clone() *PasskeyEnrollment {
	c := *e
	if e.SpentAt != nil {
		t := *e.SpentAt
		c.SpentAt = &t
	}
	return &c
}

// PasskeyChallenge is one ceremony's single-use challenge, bound to what it
// may be spent for.
type PasskeyChallenge struct {
	// Hash is the SHA-256 of the challenge, lowercase hex.
	Hash    string
	Tenant  string
	Actor   string
	Purpose string
	// ProposalID and InputDigest bind a step-up challenge to one proposal
	// and its input; empty for the other purposes.
	ProposalID  string
	InputDigest string
	// EnrollmentHash is the enrollment link a registration challenge was
	// made for; empty otherwise.
	EnrollmentHash string
	// Session is the ceremony's state as package passkey encodes it:
	// opaque to the store.
	Session   []byte
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Clone returns a deep copy.
func (c *PasskeyChallenge) Clone() *PasskeyChallenge {
	o := *c
	o.Session = slices.Clone(c.Session)
	return &o
}

// CreatePasskeyEnrollmentParams carries a fully formed link.
type CreatePasskeyEnrollmentParams struct {
	Enrollment *PasskeyEnrollment
}

// GetPasskeyEnrollmentParams names a link by its hash.
type GetPasskeyEnrollmentParams struct {
	Hash string
}

// CreatePasskeyParams stores a passkey.
type CreatePasskeyParams struct {
	Passkey *Passkey
	// EnrollmentHash, when set, is the link spent with this passkey; the
	// audit event is then EventPasskeyEnrolled, else EventPasskeyAdded.
	EnrollmentHash string
	// Now is when the link is spent and the event written.
	Now time.Time
	// Via is the channel recorded on the audit event ("web").
	Via string
}

// ListPasskeysParams names an actor.
type ListPasskeysParams struct {
	Tenant string
	Actor  string
}

// UpdatePasskeyParams records a use of a passkey.
type UpdatePasskeyParams struct {
	Tenant     string
	Actor      string
	ID         string
	Credential []byte
	UsedAt     time.Time
}

// DeletePasskeyParams removes one passkey.
type DeletePasskeyParams struct {
	Tenant string
	Actor  string
	ID     string
	// Now is when the event is written; Via its channel.
	Now time.Time
	Via string
}

// CreatePasskeyChallengeParams carries a fully formed challenge.
type CreatePasskeyChallengeParams struct {
	Challenge *PasskeyChallenge
}

// SpendPasskeyChallengeParams names a challenge and everything it must be
// bound to.
type SpendPasskeyChallengeParams struct {
	Hash        string
	Tenant      string
	Actor       string
	Purpose     string
	ProposalID  string
	InputDigest string
	Now         time.Time
}

// ValidatePasskeyEnrollment checks a link before it is stored.
func ValidatePasskeyEnrollment(e *PasskeyEnrollment) error {
	switch {
	case e == nil:
		return invalidParams("enrollment required")
	case !isSHA256Hex(e.Hash):
		return invalidParams("enrollment hash must be a SHA-256 in lowercase hex")
	case e.Tenant == "" || e.Actor == "" || e.CreatedBy == "":
		return invalidParams("enrollment tenant, actor and creator required")
	case e.CreatedAt.IsZero() || !e.ExpiresAt.After(e.CreatedAt):
		return invalidParams("enrollment must expire after its creation")
	case e.SpentAt != nil:
		return invalidParams("a new enrollment is not spent")
	}
	return nil
}

// ValidatePasskey checks a passkey before it is stored.
func ValidatePasskey(p *CreatePasskeyParams) error {
	switch {
	case p.Passkey == nil:
		return invalidParams("passkey required")
	case p.Passkey.Tenant == "" || p.Passkey.Actor == "":
		return invalidParams("passkey tenant and actor required")
	case p.Passkey.ID == "" || len(p.Passkey.ID) > 1400:
		return invalidParams("passkey id must be 1..1400 characters")
	case len(p.Passkey.Credential) == 0:
		return invalidParams("passkey credential record required")
	case p.Passkey.CreatedAt.IsZero() || p.Now.IsZero():
		return invalidParams("passkey times required")
	case p.EnrollmentHash != "" && !isSHA256Hex(p.EnrollmentHash):
		return invalidParams("enrollment hash must be a SHA-256 in lowercase hex")
	}
	return nil
}

// ValidatePasskeyChallenge checks a challenge before it is stored.
func ValidatePasskeyChallenge(c *PasskeyChallenge) error {
	switch {
	case c == nil:
		return invalidParams("challenge required")
	case !isSHA256Hex(c.Hash):
		return invalidParams("challenge hash must be a SHA-256 in lowercase hex")
	case c.Tenant == "" || c.Actor == "":
		return invalidParams("challenge tenant and actor required")
	case c.Purpose != PurposeStepUp && c.Purpose != PurposeRegister && c.Purpose != PurposeManage:
		return invalidParams("challenge purpose %q", c.Purpose)
	case c.Purpose == PurposeStepUp && (c.ProposalID == "" || c.InputDigest == ""):
		return invalidParams("a step-up challenge is bound to a proposal and its input digest")
	case c.Purpose != PurposeStepUp && (c.ProposalID != "" || c.InputDigest != ""):
		return invalidParams("only a step-up challenge is bound to a proposal")
	case c.EnrollmentHash != "" && (c.Purpose != PurposeRegister || !isSHA256Hex(c.EnrollmentHash)):
		return invalidParams("only a registration challenge names an enrollment, by its SHA-256")
	case len(c.Session) == 0:
		return invalidParams("challenge session required")
	case c.CreatedAt.IsZero() || !c.ExpiresAt.After(c.CreatedAt):
		return invalidParams("challenge must expire after its creation")
	}
	return nil
}

// ChallengeMatches reports whether c may be spent as params ask: the
// rule SpendPasskeyChallenge applies, for drivers that judge in Go.
func ChallengeMatches(c *PasskeyChallenge, params *SpendPasskeyChallengeParams) bool {
	return c.Hash == params.Hash && c.Tenant == params.Tenant && c.Actor == params.Actor &&
		c.Purpose == params.Purpose && c.ProposalID == params.ProposalID && c.InputDigest == params.InputDigest &&
		params.Now.Before(c.ExpiresAt)
}

// PasskeyEventDetail is the detail of a passkey's audit event: its name and
// id, which say which one without a key's material.
func PasskeyEventDetail(p *Passkey) string {
	return "passkey " + p.ID + " (" + p.Name + ")"
}
