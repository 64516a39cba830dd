package countersign

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/passkey"
	"github.com/countersign/countersign/store"
)

// Step-up for high-risk rules (docs/api.md Part 3, "Step-up for high-risk
// rules"; docs/design.md §19): a rule with StepUp "passkey" makes every
// approval of its proposals carry a fresh passkey assertion of the
// approver, made for that proposal and its input. The engine checks it in
// decide, whatever the channel, and spends it; a channel that cannot carry
// one answers *StepUpRequiredError with the proposal's inbox page, where a
// person can. Who may hold and change passkeys is in authority.go.

// Lifetimes of what step-up makes.
const (
	// StepUpTTL is how long a step-up challenge may be answered.
	StepUpTTL = 2 * time.Minute
	// EnrollmentTTL is how long an operator's enrollment link stands.
	EnrollmentTTL = 15 * time.Minute
	// registrationTTL is how long a passkey's creation may take.
	registrationTTL = passkey.RegistrationTimeout
	// maxPasskeyName bounds what a person calls a passkey.
	maxPasskeyName = 100
)

// ErrStepUpRequired: an approval needs a fresh passkey assertion it did not
// carry, or one that does not verify (*StepUpRequiredError).
var ErrStepUpRequired = errors.New("step-up required")

// StepUpRequiredError refuses an approval of a step-up proposal without a
// valid assertion (docs/api.md: 403 STEP_UP_REQUIRED). Nothing is decided.
// URL is the proposal's page in the inbox, under the public URL, where its
// approver can give one; empty when the engine has no public URL.
type StepUpRequiredError struct {
	ProposalID string
	URL        string
	Reason     string
}

func (e *StepUpRequiredError) Error() string {
	return fmt.Sprintf("proposal %s: %s", e.ProposalID, e.Reason)
}

// Is matches ErrStepUpRequired and ErrForbidden: a surface that knows no
// better refuses the approval.
func (e *StepUpRequiredError) Is(target error) bool {
	return target == ErrStepUpRequired || target == ErrForbidden
}

// ErrPasskeyLink: an enrollment link is unknown, used, expired or someone
// else's (*PasskeyLinkError).
var ErrPasskeyLink = errors.New("passkey enrollment link refused")

// PasskeyLinkError says why an enrollment link cannot be used. Nothing is
// stored.
type PasskeyLinkError struct {
	Reason string
}

func (e *PasskeyLinkError) Error() string { return "enrollment link: " + e.Reason }

// Is matches ErrPasskeyLink.
func (e *PasskeyLinkError) Is(target error) bool { return target == ErrPasskeyLink }

// ErrPasskeyRefused: a passkey ceremony's answer (an assertion to add or
// remove a passkey, a new passkey's attestation) is malformed, spent,
// expired or does not verify (*PasskeyRefusedError).
var ErrPasskeyRefused = errors.New("passkey refused")

// PasskeyRefusedError says why a passkey ceremony's answer was refused.
type PasskeyRefusedError struct {
	Reason string
}

func (e *PasskeyRefusedError) Error() string { return "passkey refused: " + e.Reason }

// Is matches ErrPasskeyRefused.
func (e *PasskeyRefusedError) Is(target error) bool { return target == ErrPasskeyRefused }

// PasskeyCeremony is a begun passkey ceremony: the options a browser's
// navigator.credentials call takes (the "publicKey" member, in the JSON
// form of PublicKeyCredential.parse*OptionsFromJSON), and when its
// challenge lapses.
type PasskeyCeremony struct {
	Options   json.RawMessage
	ExpiresAt time.Time
}

// PasskeyEnrollment is an operator's enrollment link: the one place the
// token is ever shown.
type PasskeyEnrollment struct {
	Actor     string
	URL       string
	ExpiresAt time.Time
}

// Passkey is one of an actor's passkeys as its owner sees it.
type Passkey struct {
	ID         string
	Name       string
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// stepUp is the engine's step-up state: the public URL and the relying
// party made from it (nil without one).
type stepUp struct {
	publicURL string
	rp        *passkey.RP
	// rpErr says why there is no relying party although there is a public
	// URL: WebAuthn binds a passkey to a domain name, so a URL whose host
	// is an IP address serves links and buttons but not passkeys.
	rpErr error
}

func newStepUp(publicURL string) (stepUp, error) {
	if publicURL == "" {
		return stepUp{}, nil
	}
	if u, err := url.Parse(publicURL); err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return stepUp{}, fmt.Errorf("countersign: Options.PublicURL %q: want an absolute http or https URL", publicURL)
	}
	st := stepUp{publicURL: strings.TrimSuffix(publicURL, "/")}
	if st.rp, st.rpErr = passkey.New(publicURL); st.rpErr != nil {
		st.rp = nil
	}
	return st, nil
}

// ProposalURL is p's page in the inbox under the public URL, or "" when the
// engine has none. Channels link to it; it never comes from a request.
func (e *Engine) ProposalURL(proposalID string) string {
	if e.step.publicURL == "" {
		return ""
	}
	return e.step.publicURL + "/proposals/" + url.PathEscape(proposalID)
}

// relyingParty is the passkey relying party, or an error saying that
// passkeys need a public URL.
func (e *Engine) relyingParty() (*passkey.RP, error) {
	switch {
	case e.step.rpErr != nil:
		return nil, fmt.Errorf("%w: passkeys need a public_url whose host is a domain name (localhost works for development): %v", ErrInvalidCall, e.step.rpErr)
	case e.step.rp == nil:
		return nil, fmt.Errorf("%w: passkeys need the server's public_url (Options.PublicURL)", ErrInvalidCall)
	}
	return e.step.rp, nil
}

func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// records are the credential records of an actor's passkeys.
func (e *Engine) passkeyRecords(ctx context.Context, tenant, actor string) ([]*store.Passkey, [][]byte, error) {
	ps, err := e.store.ListPasskeys(ctx, &store.ListPasskeysParams{Tenant: tenant, Actor: actor})
	if err != nil {
		return nil, nil, fmt.Errorf("list passkeys: %w", err)
	}
	recs := make([][]byte, len(ps))
	for i, p := range ps {
		recs[i] = p.Credential
	}
	return ps, recs, nil
}

// beginLogin starts an assertion ceremony for id and stores its challenge
// for purpose (bound to p when it is a step-up).
func (e *Engine) beginLogin(ctx context.Context, id Identity, purpose string, p *cstype.Proposal) (*PasskeyCeremony, error) {
	rp, err := e.relyingParty()
	if err != nil {
		return nil, err
	}
	_, recs, err := e.passkeyRecords(ctx, id.Tenant, id.Actor)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, &ForbiddenError{Actor: id.Actor, Reason: "you have no passkey: an operator makes you an enrollment link (countersign passkeys enroll)"}
	}
	c, err := rp.BeginLogin(id.Tenant, id.Actor, recs)
	if err != nil {
		return nil, fmt.Errorf("begin passkey assertion: %w", err)
	}
	now := e.clock()
	ch := &store.PasskeyChallenge{
		Hash: sha256Hex(c.Challenge), Tenant: id.Tenant, Actor: id.Actor, Purpose: purpose,
		Session: c.Session, CreatedAt: now, ExpiresAt: now.Add(StepUpTTL),
	}
	if p != nil {
		ch.ProposalID, ch.InputDigest = p.ID, p.InputDigest
	}
	if err := e.store.CreatePasskeyChallenge(ctx, &store.CreatePasskeyChallengeParams{Challenge: ch}); err != nil {
		return nil, fmt.Errorf("store passkey challenge: %w", err)
	}
	return &PasskeyCeremony{Options: c.Options, ExpiresAt: ch.ExpiresAt}, nil
}

// StepUpChallenge begins the step-up of id's approval of a proposal
// through channel via (docs/api.md: POST /v1/proposals/{id}/step-up): the
// options navigator.credentials.get takes, with a single-use challenge of
// StepUpTTL bound to the tenant, id's actor, the proposal and its input
// digest. Only someone who may approve the proposal now, through via, gets
// one (mayStepUp).
func (e *Engine) StepUpChallenge(ctx context.Context, id Identity, proposalID, via string) (*PasskeyCeremony, error) {
	if err := mayAct(id, ActDecide); err != nil {
		return nil, err
	}
	p, err := e.Proposal(ctx, id, proposalID)
	if err != nil {
		return nil, fmt.Errorf("step-up: %w", err)
	}
	if err := mayStepUp(ctx, p, id, via, e.clock(), e.canDecideHook(p)); err != nil {
		return nil, err
	}
	return e.beginLogin(ctx, id, store.PurposeStepUp, p)
}

// checkStepUp verifies and spends the assertion of d, an approval of p
// that needs one (needsStepUp). The challenge is spent first, bound to
// exactly this tenant, approver, proposal and input digest: a replayed
// assertion, or one made for another proposal or by another approver,
// finds none. Then the signature is verified against the approver's own
// passkeys, user verification required, and the passkey's counter stored.
// Every refusal is a *StepUpRequiredError, and nothing is decided.
func (e *Engine) checkStepUp(ctx context.Context, p *cstype.Proposal, d *Decision) error {
	refuse := func(reason string) error {
		return &StepUpRequiredError{ProposalID: p.ID, URL: e.ProposalURL(p.ID), Reason: reason}
	}
	if len(d.Assertion) == 0 {
		return refuse("this proposal's rule needs a passkey: approve it on its page in the inbox, which asks for one")
	}
	rp, err := e.relyingParty()
	if err != nil {
		return refuse("the server has no public_url, so it cannot check passkeys")
	}
	a, err := passkey.ParseAssertion(d.Assertion)
	if err != nil {
		return refuse("the assertion could not be read: " + err.Error())
	}
	now := e.clock()
	ch, err := e.store.SpendPasskeyChallenge(ctx, &store.SpendPasskeyChallengeParams{
		Hash: sha256Hex(a.Challenge()), Tenant: d.Identity.Tenant, Actor: d.Identity.Actor, Purpose: store.PurposeStepUp,
		ProposalID: p.ID, InputDigest: p.InputDigest, Now: now,
	})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return refuse("the assertion's challenge is used, expired, or was made for another proposal or approver: ask for a new one")
	case err != nil:
		return fmt.Errorf("spend step-up challenge: %w", err)
	}
	ps, recs, err := e.passkeyRecords(ctx, d.Identity.Tenant, d.Identity.Actor)
	if err != nil {
		return err
	}
	cred, err := rp.FinishLogin(d.Identity.Tenant, d.Identity.Actor, recs, ch.Session, a)
	if err != nil {
		return refuse("the assertion does not verify against your passkeys")
	}
	if err := e.recordPasskeyUse(ctx, d.Identity, ps, cred, now); err != nil {
		return err
	}
	return nil
}

// recordPasskeyUse stores a verified passkey's record (its counter moved).
func (e *Engine) recordPasskeyUse(ctx context.Context, id Identity, ps []*store.Passkey, cred *passkey.Credential, now time.Time) error {
	for _, p := range ps {
		if p.ID == cred.ID {
			err := e.store.UpdatePasskey(ctx, &store.UpdatePasskeyParams{Tenant: id.Tenant, Actor: id.Actor, ID: p.ID, Credential: cred.Record, UsedAt: now})
			if err != nil {
				return fmt.Errorf("record passkey use: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("record passkey use: credential %s is not the actor's", cred.ID)
}

// CreatePasskeyEnrollment makes a single-use link, valid EnrollmentTTL,
// through which actor (of the operator's tenant) enrols a passkey
// (countersign passkeys enroll ACTOR). Only an operator may (mayEnroll).
// The link's token is shown only here; the store keeps its SHA-256.
func (e *Engine) CreatePasskeyEnrollment(ctx context.Context, id Identity, actor string) (*PasskeyEnrollment, error) {
	if err := mayEnroll(id); err != nil {
		return nil, err
	}
	if actor == "" || len(actor) > 200 || strings.ContainsFunc(actor, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("%w: actor: want 1..200 printable characters", ErrInvalidCall)
	}
	if e.step.publicURL == "" {
		return nil, fmt.Errorf("%w: enrollment links need the server's public_url (Options.PublicURL)", ErrInvalidCall)
	}
	// A link no passkey could be enrolled through is refused now, not when
	// its person opens it.
	if _, err := e.relyingParty(); err != nil {
		return nil, err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	token := base64.RawURLEncoding.EncodeToString(b)
	now := e.clock()
	en := &store.PasskeyEnrollment{
		Hash: sha256Hex(token), Tenant: id.Tenant, Actor: actor, CreatedBy: id.Actor, CreatedAt: now, ExpiresAt: now.Add(EnrollmentTTL),
	}
	if err := e.store.CreatePasskeyEnrollment(ctx, &store.CreatePasskeyEnrollmentParams{Enrollment: en}); err != nil {
		return nil, fmt.Errorf("create enrollment link: %w", err)
	}
	return &PasskeyEnrollment{Actor: actor, URL: e.step.publicURL + "/passkeys/enroll/" + token, ExpiresAt: en.ExpiresAt}, nil
}

// enrollment reads the link token names and checks that id may use it now.
func (e *Engine) enrollment(ctx context.Context, id Identity, token string) (*store.PasskeyEnrollment, error) {
	if len(token) > 100 {
		return nil, &PasskeyLinkError{Reason: "this is not an enrollment link"}
	}
	en, err := e.store.GetPasskeyEnrollment(ctx, &store.GetPasskeyEnrollmentParams{Hash: sha256Hex(token)})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return nil, &PasskeyLinkError{Reason: "this is not an enrollment link, or it was replaced by a newer one"}
	case err != nil:
		return nil, fmt.Errorf("read enrollment link: %w", err)
	}
	if err := mayUseEnrollment(id, en, e.clock()); err != nil {
		return nil, err
	}
	return en, nil
}

// CheckPasskeyEnrollment tells the page an enrollment link opens whether id
// may enrol through it now, without spending it.
func (e *Engine) CheckPasskeyEnrollment(ctx context.Context, id Identity, token string) error {
	if err := mayAct(id, ActRegisterPasskey); err != nil {
		return err
	}
	_, err := e.enrollment(ctx, id, token)
	return err
}

// BeginPasskeyEnrollment begins the creation of id's passkey through an
// enrollment link (the options navigator.credentials.create takes). The
// link is spent only when the passkey is stored (FinishPasskeyRegistration).
func (e *Engine) BeginPasskeyEnrollment(ctx context.Context, id Identity, token string) (*PasskeyCeremony, error) {
	if err := mayAct(id, ActRegisterPasskey); err != nil {
		return nil, err
	}
	en, err := e.enrollment(ctx, id, token)
	if err != nil {
		return nil, err
	}
	return e.beginRegistration(ctx, id, en.Hash)
}

// ManagePasskeysChallenge begins the assertion by one of id's passkeys
// that adding or removing a passkey needs.
func (e *Engine) ManagePasskeysChallenge(ctx context.Context, id Identity) (*PasskeyCeremony, error) {
	if err := mayAct(id, ActRegisterPasskey); err != nil {
		return nil, err
	}
	return e.beginLogin(ctx, id, store.PurposeManage, nil)
}

// verifyManage verifies and spends an assertion made for managing id's
// passkeys.
func (e *Engine) verifyManage(ctx context.Context, id Identity, assertion []byte) error {
	rp, err := e.relyingParty()
	if err != nil {
		return err
	}
	a, err := passkey.ParseAssertion(assertion)
	if err != nil {
		return &PasskeyRefusedError{Reason: "the assertion could not be read"}
	}
	now := e.clock()
	ch, err := e.store.SpendPasskeyChallenge(ctx, &store.SpendPasskeyChallengeParams{
		Hash: sha256Hex(a.Challenge()), Tenant: id.Tenant, Actor: id.Actor, Purpose: store.PurposeManage, Now: now,
	})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return &PasskeyRefusedError{Reason: "the assertion's challenge is used, expired or someone else's: start again"}
	case err != nil:
		return fmt.Errorf("spend passkey challenge: %w", err)
	}
	ps, recs, err := e.passkeyRecords(ctx, id.Tenant, id.Actor)
	if err != nil {
		return err
	}
	cred, err := rp.FinishLogin(id.Tenant, id.Actor, recs, ch.Session, a)
	if err != nil {
		return &PasskeyRefusedError{Reason: "the assertion does not verify against your passkeys"}
	}
	return e.recordPasskeyUse(ctx, id, ps, cred, now)
}

// BeginPasskeyAddition begins the creation of a further passkey of id's,
// once an assertion by an existing one (ManagePasskeysChallenge) verifies.
func (e *Engine) BeginPasskeyAddition(ctx context.Context, id Identity, assertion []byte) (*PasskeyCeremony, error) {
	if err := mayAct(id, ActRegisterPasskey); err != nil {
		return nil, err
	}
	if err := e.verifyManage(ctx, id, assertion); err != nil {
		return nil, err
	}
	return e.beginRegistration(ctx, id, "")
}

func (e *Engine) beginRegistration(ctx context.Context, id Identity, enrollmentHash string) (*PasskeyCeremony, error) {
	rp, err := e.relyingParty()
	if err != nil {
		return nil, err
	}
	_, recs, err := e.passkeyRecords(ctx, id.Tenant, id.Actor)
	if err != nil {
		return nil, err
	}
	c, err := rp.BeginRegistration(id.Tenant, id.Actor, recs)
	if err != nil {
		return nil, fmt.Errorf("begin passkey registration: %w", err)
	}
	now := e.clock()
	ch := &store.PasskeyChallenge{
		Hash: sha256Hex(c.Challenge), Tenant: id.Tenant, Actor: id.Actor, Purpose: store.PurposeRegister,
		EnrollmentHash: enrollmentHash, Session: c.Session, CreatedAt: now, ExpiresAt: now.Add(registrationTTL),
	}
	if err := e.store.CreatePasskeyChallenge(ctx, &store.CreatePasskeyChallengeParams{Challenge: ch}); err != nil {
		return nil, fmt.Errorf("store passkey challenge: %w", err)
	}
	return &PasskeyCeremony{Options: c.Options, ExpiresAt: ch.ExpiresAt}, nil
}

// FinishPasskeyRegistration verifies a new passkey's attestation against
// the registration id began (BeginPasskeyEnrollment or
// BeginPasskeyAddition), user verification required, and stores it under
// name, spending the enrollment link in the same transaction when one was
// used. The audit event says which.
func (e *Engine) FinishPasskeyRegistration(ctx context.Context, id Identity, name string, attestation []byte) (*Passkey, error) {
	if err := mayAct(id, ActRegisterPasskey); err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = "passkey"
	}
	if len(name) > maxPasskeyName || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("%w: name: want up to %d printable characters", ErrInvalidCall, maxPasskeyName)
	}
	rp, err := e.relyingParty()
	if err != nil {
		return nil, err
	}
	a, err := passkey.ParseAttestation(attestation)
	if err != nil {
		return nil, &PasskeyRefusedError{Reason: "the new passkey's answer could not be read"}
	}
	now := e.clock()
	ch, err := e.store.SpendPasskeyChallenge(ctx, &store.SpendPasskeyChallengeParams{
		Hash: sha256Hex(a.Challenge()), Tenant: id.Tenant, Actor: id.Actor, Purpose: store.PurposeRegister, Now: now,
	})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return nil, &PasskeyRefusedError{Reason: "the registration is used, expired or someone else's: start again"}
	case err != nil:
		return nil, fmt.Errorf("spend passkey challenge: %w", err)
	}
	_, recs, err := e.passkeyRecords(ctx, id.Tenant, id.Actor)
	if err != nil {
		return nil, err
	}
	cred, err := rp.FinishRegistration(id.Tenant, id.Actor, recs, ch.Session, a)
	if err != nil {
		return nil, &PasskeyRefusedError{Reason: "the new passkey does not verify (user verification is required)"}
	}
	pk := &store.Passkey{Tenant: id.Tenant, Actor: id.Actor, ID: cred.ID, Name: name, Credential: cred.Record, CreatedAt: now}
	err = e.store.CreatePasskey(ctx, &store.CreatePasskeyParams{Passkey: pk, EnrollmentHash: ch.EnrollmentHash, Now: now, Via: "web"})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return nil, &PasskeyLinkError{Reason: "the enrollment link was used or expired meanwhile"}
	case errors.Is(err, cstype.ErrInvalidParams):
		return nil, &PasskeyRefusedError{Reason: "this passkey is enrolled already"}
	case err != nil:
		return nil, fmt.Errorf("store passkey: %w", err)
	}
	return &Passkey{ID: pk.ID, Name: pk.Name, CreatedAt: now}, nil
}

// RemovePasskey removes one of id's passkeys, once an assertion by one of
// them (ManagePasskeysChallenge) verifies.
func (e *Engine) RemovePasskey(ctx context.Context, id Identity, credentialID string, assertion []byte) error {
	if err := mayAct(id, ActRegisterPasskey); err != nil {
		return err
	}
	if err := e.verifyManage(ctx, id, assertion); err != nil {
		return err
	}
	err := e.store.DeletePasskey(ctx, &store.DeletePasskeyParams{Tenant: id.Tenant, Actor: id.Actor, ID: credentialID, Now: e.clock(), Via: "web"})
	if err != nil {
		return fmt.Errorf("remove passkey: %w", err)
	}
	return nil
}

// Passkeys lists id's own passkeys, oldest first.
func (e *Engine) Passkeys(ctx context.Context, id Identity) ([]*Passkey, error) {
	if err := mayAct(id, ActRegisterPasskey); err != nil {
		return nil, err
	}
	ps, _, err := e.passkeyRecords(ctx, id.Tenant, id.Actor)
	if err != nil {
		return nil, err
	}
	out := make([]*Passkey, len(ps))
	for i, p := range ps {
		out[i] = &Passkey{ID: p.ID, Name: p.Name, CreatedAt: p.CreatedAt, LastUsedAt: p.LastUsedAt}
	}
	return out, nil
}
