package countersign

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// EmailLinkTokenBytes is the randomness of an email link's token: 256 bits
// from crypto/rand, written in the link as unpadded base64url (43
// characters).
const EmailLinkTokenBytes = 32

// EmailLinkState says whether an email link may still decide.
type EmailLinkState string

// The states of an email link.
const (
	// EmailLinkLive: neither spent, retired nor expired.
	EmailLinkLive EmailLinkState = "live"
	// EmailLinkSpent: this link, or another of the approver's links for
	// the proposal, was used.
	EmailLinkSpent EmailLinkState = "spent"
	// EmailLinkRetired: a later message about the same event replaced the
	// link before it was sent.
	EmailLinkRetired EmailLinkState = "retired"
	// EmailLinkExpired: past its ExpiresAt.
	EmailLinkExpired EmailLinkState = "expired"
)

// EmailLink is one decision link as a surface may show it: whose it is,
// for which proposal and verdict, and where it stands. It holds neither
// the token nor its digest.
type EmailLink struct {
	Tenant     string
	ProposalID string
	Actor      string
	Verdict    Verdict
	ExpiresAt  time.Time
	State      EmailLinkState
	// SpentAt and SpentVerdict say when the approver's links for the
	// proposal were spent and for which verdict; SpentHere that it was by
	// this link. Zero unless State is EmailLinkSpent.
	SpentAt      time.Time
	SpentVerdict Verdict
	SpentHere    bool
}

// ErrEmailLinkNotLive matches every *EmailLinkNotLiveError.
var ErrEmailLinkNotLive = errors.New("email link not live")

// EmailLinkNotLiveError reports a link that can no longer decide: spent,
// retired or expired (Link.State says which). Nothing was decided.
type EmailLinkNotLiveError struct {
	Link *EmailLink
}

func (e *EmailLinkNotLiveError) Error() string {
	return fmt.Sprintf("email link for proposal %s: %s", e.Link.ProposalID, e.Link.State)
}

// Is matches ErrEmailLinkNotLive.
func (e *EmailLinkNotLiveError) Is(target error) bool { return target == ErrEmailLinkNotLive }

// EmailLinkIssue asks for the links of one message to one approver.
type EmailLinkIssue struct {
	// Tenant and ProposalID name the proposal; the engine reads it afresh.
	Tenant     string
	ProposalID string
	// Approver is whom the message goes to, as the channel maps them.
	Approver Identity
	// NotificationID is the outbox notification whose delivery mails the
	// message: a retried delivery of it replaces the links it minted
	// before and did not send, and mails nobody twice.
	NotificationID string
	// TTL bounds the links' life; the proposal's expiry bounds it too.
	TTL time.Duration
}

// IssuedEmailLinks are the links of one message.
type IssuedEmailLinks struct {
	// AlreadySent: this notification's message to this approver was sent
	// already; there are no tokens and nothing is to be mailed.
	AlreadySent bool
	// Tokens are the links' tokens by verdict, in plaintext for the
	// message only: the store keeps their SHA-256. A verdict the approver
	// may not give through email has no token.
	Tokens map[Verdict]string
	// ExpiresAt is when the links expire.
	ExpiresAt time.Time
}

// IssueEmailLinks mints one link per verdict Approver may give p through
// email (an approval only while p waits for their decision, a rejection
// while they may reject it), each with EmailLinkTokenBytes random bytes,
// bound to the tenant, the proposal, the approver and the verdict and
// expiring at the earlier of TTL from now and p's expiry. A proposal that
// may not be announced to Approver by email (Announcees) is a
// *ForbiddenError, and a proposal past pending leaves nothing to mint
// (ErrConflict): no link is ever minted for anyone the engine would not
// let decide.
func (e *Engine) IssueEmailLinks(ctx context.Context, req *EmailLinkIssue) (*IssuedEmailLinks, error) {
	id := req.Approver
	if err := mayAct(id, ActDecide); err != nil {
		return nil, err
	}
	if req.TTL <= 0 || req.NotificationID == "" || id.Tenant != req.Tenant {
		return nil, fmt.Errorf("%w: issue email links: a TTL, a notification and the proposal's tenant are required", ErrInvalidCall)
	}
	p, err := e.proposalOfTenant(ctx, id, req.ProposalID)
	if err != nil {
		return nil, fmt.Errorf("issue email links: %w", err)
	}
	now := e.clock()
	verdicts := emailLinkVerdicts(ctx, e, p, id, now)
	if len(verdicts) == 0 {
		if p.Status != cstype.StatusPending || store.Due(p, now) {
			return nil, fmt.Errorf("issue email links: proposal %s is %s: %w", p.ID, p.Status, ErrConflict)
		}
		return nil, forbidden(id, p.ID, "the proposal may not be announced to you by email")
	}
	expires := now.Add(req.TTL)
	if p.ExpiresAt.Before(expires) {
		expires = p.ExpiresAt
	}
	out := &IssuedEmailLinks{Tokens: map[Verdict]string{}, ExpiresAt: expires}
	links := make([]*store.EmailLink, 0, len(verdicts))
	for _, v := range verdicts {
		raw := make([]byte, EmailLinkTokenBytes)
		if _, err := rand.Read(raw); err != nil {
			return nil, fmt.Errorf("issue email links: %w", err)
		}
		out.Tokens[v] = base64.RawURLEncoding.EncodeToString(raw)
		links = append(links, &store.EmailLink{
			TokenSHA256: tokenDigest(raw), Tenant: p.Tenant, ProposalID: p.ID, Actor: id.Actor, Verdict: v,
			NotificationID: req.NotificationID, CreatedAt: now, ExpiresAt: expires,
		})
	}
	res, err := e.store.IssueEmailLinks(ctx, &store.IssueEmailLinksParams{Links: links})
	if err != nil {
		return nil, fmt.Errorf("issue email links: %w", err)
	}
	if res.AlreadySent {
		return &IssuedEmailLinks{AlreadySent: true}, nil
	}
	return out, nil
}

// MarkEmailLinksSent records that the message carrying tokens (as
// IssueEmailLinks returned them) was accepted for delivery, so that a
// retried delivery of its notification does not mail the approver again.
func (e *Engine) MarkEmailLinksSent(ctx context.Context, tenant string, tokens ...string) error {
	hashes := make([]string, 0, len(tokens))
	for _, t := range tokens {
		raw, ok := parseEmailToken(t)
		if !ok {
			return fmt.Errorf("%w: mark email links sent: a malformed token", ErrInvalidCall)
		}
		hashes = append(hashes, tokenDigest(raw))
	}
	if err := e.store.MarkEmailLinksSent(ctx, &store.MarkEmailLinksSentParams{Tenant: tenant, TokenSHA256s: hashes}); err != nil {
		return fmt.Errorf("mark email links sent: %w", err)
	}
	return nil
}

// EmailLink reads the link a token names in tenant. A malformed token, an
// unknown one and another tenant's all wrap ErrNotFound alike, so that the
// answer says nothing of other tenants.
func (e *Engine) EmailLink(ctx context.Context, tenant, token string) (*EmailLink, error) {
	raw, ok := parseEmailToken(token)
	if !ok || tenant == "" {
		return nil, fmt.Errorf("email link: %w", ErrNotFound)
	}
	l, err := e.store.GetEmailLink(ctx, &store.GetEmailLinkParams{Tenant: tenant, TokenSHA256: tokenDigest(raw)})
	if err != nil {
		return nil, fmt.Errorf("email link: %w", err)
	}
	return emailLinkOf(l, e.clock()), nil
}

// EmailDecision is the outcome of a decision through an email link.
type EmailDecision struct {
	// Link is the link, as it stood when the decision was asked for.
	Link *EmailLink
	// Result is the engine's answer, as Decide gives it.
	Result *DecideResult
	// Spent: the approver's links for the proposal were spent by this
	// request. A decision asked on a proposal past pending, or past its
	// deadline, answers without spending them.
	Spent bool
}

// DecideByEmailLink decides through the link token names, as id (the
// link's approver, with the roles the channel maps them to), via
// ViaEmail. Before anything is written it checks what can refuse without
// deciding: an agent credential (*AgentCannotDecideError); an unknown,
// malformed or foreign token, or one that is not id's (ErrNotFound); a
// link that is not live (*EmailLinkNotLiveError); a proposal id may not
// decide (*ForbiddenError, from the same rules as Decide), an approval
// that needs a passkey step-up (*ForbiddenError: email carries no
// assertion). Then it spends the link, and with it the approver's other
// links for the proposal, in one conditional write (a concurrent spend
// of any of them wins or loses as a whole), and decides.
func (e *Engine) DecideByEmailLink(ctx context.Context, token string, id Identity) (*EmailDecision, error) {
	if err := mayAct(id, ActDecide); err != nil {
		return nil, err
	}
	raw, ok := parseEmailToken(token)
	if !ok || id.Tenant == "" {
		return nil, fmt.Errorf("decide by email link: %w", ErrNotFound)
	}
	hash := tokenDigest(raw)
	sl, err := e.store.GetEmailLink(ctx, &store.GetEmailLinkParams{Tenant: id.Tenant, TokenSHA256: hash})
	if err != nil {
		return nil, fmt.Errorf("decide by email link: %w", err)
	}
	now := e.clock()
	link := emailLinkOf(sl, now)
	if sl.Actor != id.Actor {
		return nil, fmt.Errorf("decide by email link: %w", ErrNotFound)
	}
	if link.State != EmailLinkLive {
		return nil, &EmailLinkNotLiveError{Link: link}
	}
	p, err := e.Proposal(ctx, id, sl.ProposalID)
	if err != nil {
		return nil, fmt.Errorf("decide by email link: %w", err)
	}
	decision := &Decision{Identity: id, ProposalID: p.ID, Verdict: sl.Verdict, Via: ViaEmail}
	out := &EmailDecision{Link: link}
	if p.Status != cstype.StatusPending || store.Due(p, now) {
		// Nothing is left to decide: the engine's answer (conflict,
		// unchanged, expired) says why, and the links stay as they are.
		out.Result, err = e.Decide(ctx, decision)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	if err := mayDecideByEmailLink(ctx, p, id, sl.Verdict, e.canDecideHook(p)); err != nil {
		return nil, err
	}
	spent, err := e.store.SpendEmailLink(ctx, &store.SpendEmailLinkParams{Tenant: id.Tenant, TokenSHA256: hash})
	if nl, ok := store.IsEmailLinkNotLive(err); ok {
		return nil, &EmailLinkNotLiveError{Link: emailLinkOf(nl.Link, nl.Now)}
	}
	if err != nil {
		return nil, fmt.Errorf("decide by email link: %w", err)
	}
	out.Link, out.Spent = emailLinkOf(spent, now), true
	if out.Result, err = e.Decide(ctx, decision); err != nil {
		return nil, err
	}
	return out, nil
}

// parseEmailToken decodes a token as IssueEmailLinks writes it: exactly
// EmailLinkTokenBytes bytes in unpadded base64url, in its one canonical
// spelling.
func parseEmailToken(token string) ([]byte, bool) {
	if len(token) != base64.RawURLEncoding.EncodedLen(EmailLinkTokenBytes) {
		return nil, false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) != EmailLinkTokenBytes {
		return nil, false
	}
	return raw, true
}

// tokenDigest is what the store knows of a token: the SHA-256 of its
// bytes, in lowercase hex.
func tokenDigest(raw []byte) string {
	d := sha256.Sum256(raw)
	return hex.EncodeToString(d[:])
}

func emailLinkOf(l *store.EmailLink, now time.Time) *EmailLink {
	out := &EmailLink{
		Tenant: l.Tenant, ProposalID: l.ProposalID, Actor: l.Actor, Verdict: l.Verdict, ExpiresAt: l.ExpiresAt,
		State: EmailLinkLive,
	}
	switch {
	case l.Spend != nil:
		out.State, out.SpentAt, out.SpentVerdict = EmailLinkSpent, l.Spend.At, l.Spend.Verdict
		out.SpentHere = l.Spend.TokenSHA256 == l.TokenSHA256
	case !l.RetiredAt.IsZero():
		out.State = EmailLinkRetired
	case !l.ExpiresAt.After(now):
		out.State = EmailLinkExpired
	}
	return out
}
