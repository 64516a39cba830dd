package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// EmailLinks stores the decision links the email channel mails to
// approvers (channels/email): one link per approver, proposal and verdict,
// known to the store only by the SHA-256 of its token.
//
// A link is live while it is neither spent nor retired and its ExpiresAt
// is after the store's clock. Spending one of an approver's links spends
// all of that approver's links for the proposal, in one conditional write:
// whatever the number of concurrent spends, in any process, of any of
// them, exactly one succeeds.
//
// A token's plaintext is never stored, so a retried delivery of one
// notification cannot send the same links again: it issues new ones, and
// IssueEmailLinks retires the links an earlier attempt of that notification
// minted for the approver but never marked sent (see
// docs/decisions/0041-email-approvals.md).
type EmailLinks interface {
	// IssueEmailLinks stores the links of one message to one approver:
	// every link shares tenant, proposal, actor and notification, and has a
	// distinct verdict. In the same transaction it retires that approver's
	// unsent, unspent links of the same notification (an earlier attempt's).
	// When a link of that notification to that approver is already marked
	// sent, it stores and retires nothing and answers AlreadySent: the
	// approver has that message. Malformed links are ErrInvalidParams.
	IssueEmailLinks(ctx context.Context, params *IssueEmailLinksParams) (*IssueEmailLinksResult, error)

	// MarkEmailLinksSent records that the message carrying these links was
	// accepted for delivery, so that a later attempt of its notification
	// does not mail the approver again. Links already marked keep their
	// first time; unknown ones, or another tenant's, are left alone.
	MarkEmailLinksSent(ctx context.Context, params *MarkEmailLinksSentParams) error

	// GetEmailLink returns a tenant's link by the SHA-256 of its token,
	// with the spend of its approver's links if there is one. Another
	// tenant's link, like an unknown one, is ErrNotFound.
	GetEmailLink(ctx context.Context, params *GetEmailLinkParams) (*EmailLink, error)

	// SpendEmailLink spends a live link, and with it every link of the same
	// approver for the same proposal, at the store's clock, and returns the
	// link spent. An unknown link, or another tenant's, is ErrNotFound; a
	// link that is not live is an *EmailLinkNotLiveError (it matches
	// ErrConflict) carrying the link as found, and nothing is written.
	SpendEmailLink(ctx context.Context, params *SpendEmailLinkParams) (*EmailLink, error)

	// ListEmailLinks returns every link minted for a proposal of a tenant
	// (sent or not, live, spent, retired or expired), each with its
	// approver's spend, ordered by actor, then creation, then verdict,
	// then token digest: what the inbox shows as where the proposal was
	// mailed. Another tenant's proposal has none.
	ListEmailLinks(ctx context.Context, params *ListEmailLinksParams) ([]*EmailLink, error)
}

// EmailLink is one decision link: who may use it for what, until when, and
// whether it was used.
type EmailLink struct {
	// TokenSHA256 is the SHA-256 of the token, in lowercase hex; the token
	// itself is in the mail only.
	TokenSHA256    string
	Tenant         string
	ProposalID     string
	Actor          string
	Verdict        Verdict
	NotificationID string
	CreatedAt      time.Time
	ExpiresAt      time.Time
	// SentAt is when the message carrying the link was accepted for
	// delivery; zero until then.
	SentAt time.Time
	// RetiredAt is when a later attempt of the same notification replaced
	// the link before it was sent; zero if it was not.
	RetiredAt time.Time
	// Spend is the spend of the approver's links for the proposal, by this
	// link or another; nil while none was spent.
	Spend *EmailLinkSpend
}

// EmailLinkSpend records which of an approver's links for a proposal was
// used, and when. There is at most one per tenant, proposal and actor.
type EmailLinkSpend struct {
	TokenSHA256 string
	Verdict     Verdict
	At          time.Time
}

// Clone returns a deep copy.
func (l *EmailLink) Clone() *EmailLink {
	c := *l
	if l.Spend != nil {
		s := *l.Spend
		c.Spend = &s
	}
	return &c
}

// Live reports whether the link may still be spent at now.
func (l *EmailLink) Live(now time.Time) bool {
	return l.Spend == nil && l.RetiredAt.IsZero() && l.ExpiresAt.After(now)
}

// EmailLinkNotLiveError reports a spend refused because the link was
// spent (by itself or a sibling), retired or expired. Link is the link as
// the store found it.
type EmailLinkNotLiveError struct {
	Link *EmailLink
	// Now is the store's clock when it judged the link.
	Now time.Time
}

func (e *EmailLinkNotLiveError) Error() string {
	why := "expired"
	switch {
	case e.Link.Spend != nil:
		why = "spent"
	case !e.Link.RetiredAt.IsZero():
		why = "retired"
	}
	return fmt.Sprintf("email link for proposal %s: %s", e.Link.ProposalID, why)
}

// Is makes errors.Is(err, ErrConflict) hold: the spend changed nothing.
func (e *EmailLinkNotLiveError) Is(target error) bool { return target == ErrConflict }

// NotLive returns the error a spend of l answers when l is not live at now,
// or nil when it is. Every driver builds its refusal here.
func NotLive(l *EmailLink, now time.Time) error {
	if l.Live(now) {
		return nil
	}
	return &EmailLinkNotLiveError{Link: l, Now: now}
}

// IssueEmailLinksParams carries one message's links, fully formed; the
// driver stores them as given, times included (SentAt, RetiredAt and Spend
// must be unset).
type IssueEmailLinksParams struct {
	Links []*EmailLink
}

// IssueEmailLinksResult says whether the links were stored.
type IssueEmailLinksResult struct {
	// AlreadySent: the approver's message for this notification was sent
	// already; nothing was stored.
	AlreadySent bool
	// Retired counts the earlier, unsent links retired.
	Retired int
}

// MarkEmailLinksSentParams names the links of one sent message.
type MarkEmailLinksSentParams struct {
	Tenant       string
	TokenSHA256s []string
}

// GetEmailLinkParams names one link.
type GetEmailLinkParams struct {
	Tenant      string
	TokenSHA256 string
}

// SpendEmailLinkParams names the link to spend.
type SpendEmailLinkParams struct {
	Tenant      string
	TokenSHA256 string
}

// ListEmailLinksParams names a proposal.
type ListEmailLinksParams struct {
	Tenant     string
	ProposalID string
}

// SortEmailLinks puts links in ListEmailLinks's order, for the drivers that
// do not sort in their query.
func SortEmailLinks(links []*EmailLink) {
	slices.SortFunc(links, func(a, b *EmailLink) int {
		return cmp.Or(cmp.Compare(a.Actor, b.Actor), a.CreatedAt.Compare(b.CreatedAt),
			cmp.Compare(a.Verdict, b.Verdict), cmp.Compare(a.TokenSHA256, b.TokenSHA256))
	})
}

// MaxEmailLinksPerMessage bounds the links of one message: one per verdict.
const MaxEmailLinksPerMessage = 2

// ValidateIssueEmailLinks checks a message's links before they are stored,
// for every driver.
func ValidateIssueEmailLinks(params *IssueEmailLinksParams) error {
	if params == nil || len(params.Links) == 0 {
		return invalidParams("email links required")
	}
	if len(params.Links) > MaxEmailLinksPerMessage {
		return invalidParams("%d email links in one message: at most %d", len(params.Links), MaxEmailLinksPerMessage)
	}
	first := params.Links[0]
	verdicts := map[Verdict]bool{}
	hashes := map[string]bool{}
	for i, l := range params.Links {
		switch {
		case l == nil:
			return invalidParams("email link %d: nil", i)
		case !isSHA256Hex(l.TokenSHA256):
			return invalidParams("email link %d: token must be a SHA-256 in lowercase hex", i)
		case hashes[l.TokenSHA256]:
			return invalidParams("email link %d: token given twice", i)
		case l.Tenant == "" || l.ProposalID == "" || l.Actor == "" || l.NotificationID == "":
			return invalidParams("email link %d: tenant, proposal, actor and notification required", i)
		case l.Tenant != first.Tenant || l.ProposalID != first.ProposalID || l.Actor != first.Actor || l.NotificationID != first.NotificationID:
			return invalidParams("email link %d: one message's links share tenant, proposal, actor and notification", i)
		case l.Verdict != VerdictApproved && l.Verdict != VerdictRejected:
			return invalidParams("email link %d: verdict %q: want approved or rejected", i, l.Verdict)
		case verdicts[l.Verdict]:
			return invalidParams("email link %d: verdict %q given twice", i, l.Verdict)
		case l.CreatedAt.IsZero() || l.ExpiresAt.IsZero():
			return invalidParams("email link %d: times required", i)
		case !l.ExpiresAt.After(l.CreatedAt):
			return invalidParams("email link %d: expires at %v, not after its creation at %v", i, l.ExpiresAt, l.CreatedAt)
		case !l.SentAt.IsZero() || !l.RetiredAt.IsZero() || l.Spend != nil:
			return invalidParams("email link %d: a new link is neither sent, retired nor spent", i)
		}
		verdicts[l.Verdict] = true
		hashes[l.TokenSHA256] = true
	}
	return nil
}

// ValidateMarkEmailLinksSent checks the links named as sent.
func ValidateMarkEmailLinksSent(params *MarkEmailLinksSentParams) error {
	if params == nil || params.Tenant == "" || len(params.TokenSHA256s) == 0 {
		return invalidParams("tenant and email links required")
	}
	if len(params.TokenSHA256s) > MaxEmailLinksPerMessage {
		return invalidParams("%d email links in one message: at most %d", len(params.TokenSHA256s), MaxEmailLinksPerMessage)
	}
	for i, h := range params.TokenSHA256s {
		if !isSHA256Hex(h) {
			return invalidParams("email link %d: token must be a SHA-256 in lowercase hex", i)
		}
	}
	return nil
}

// errEmailLinkNotFound is what a lookup of a malformed hash answers: no
// link can have it, so no driver need ask its database.
var errEmailLinkNotFound = fmt.Errorf("email link: %w", ErrNotFound)

// CheckEmailLinkKey answers ErrNotFound for a lookup no stored link can
// match (no tenant, a hash that is not lowercase hex SHA-256), nil
// otherwise.
func CheckEmailLinkKey(tenant, tokenSHA256 string) error {
	if tenant == "" || !isSHA256Hex(tokenSHA256) {
		return errEmailLinkNotFound
	}
	return nil
}

// IsEmailLinkNotLive reports whether err is a spend refused for a link that
// is not live, and returns the refusal.
func IsEmailLinkNotLive(err error) (*EmailLinkNotLiveError, bool) {
	var nl *EmailLinkNotLiveError
	ok := errors.As(err, &nl)
	return nl, ok
}
