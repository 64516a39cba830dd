package store

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
)

// SlackAnnouncement is cstype's record, aliased for the drivers.
type SlackAnnouncement = cstype.SlackAnnouncement

// SlackAnnouncements stores the Slack messages that announce proposals to
// their approvers (package channels/slack), one per proposal and actor (the
// empty actor: the configured channel's one post), so that a delivery the
// outbox retries never posts a second message for the same approver, and
// so that every message of a proposal can be updated when it changes.
//
// Posting is not atomic with recording: Slack's chat.postMessage takes no
// idempotency key. A post is therefore claimed first, under a lease, and
// recorded with the claim's token once Slack answered. A claim whose lease
// ran out without a record (the worker died, or Slack's answer was lost) is
// taken over with a new nonce, so that a message the lost attempt may have
// posted carries a nonce no click can spend.
type SlackAnnouncements interface {
	// ClaimSlackPost reserves the announcement of (Tenant, ProposalID,
	// Actor) for posting. With no announcement stored it stores one with
	// the params' nonce, claimed by Token until the store's clock plus
	// LeaseDuration: Claimed. An announcement already posted, or claimed by
	// a lease still running, is returned as it is, not Claimed. One whose
	// claim ran out unposted is taken over: it takes the params' nonce,
	// nonce version, Slack user and token, Claimed.
	ClaimSlackPost(ctx context.Context, params *ClaimSlackPostParams) (*SlackPostClaim, error)

	// RecordSlackPost records the posted message (Channel, TS) of an
	// announcement claimed with Token and clears the claim. A claim taken
	// over by another, or an announcement already posted, is an error
	// matching ErrConflict and ErrLeaseLost, and nothing is written; an
	// announcement not stored wraps ErrNotFound.
	RecordSlackPost(ctx context.Context, params *RecordSlackPostParams) (*SlackAnnouncement, error)

	// RotateSlackNonce replaces an announcement's nonce From with Nonce,
	// issued for NonceVersion, and keeps From as PrevNonce, as one
	// compare-and-set: when its nonce is no
	// longer From, or was issued for a later version than NonceVersion, the
	// error matches ErrConflict and nothing is written (the caller reads
	// the announcement again and uses the nonce it finds). An announcement
	// not stored wraps ErrNotFound.
	RotateSlackNonce(ctx context.Context, params *RotateSlackNonceParams) (*SlackAnnouncement, error)

	// RetireSlackNonce ends the life of an announcement's previous nonce
	// once the message shows Nonce: it clears PrevNonce when the
	// announcement's nonce is still Nonce, and changes nothing otherwise (a
	// later rotation's update retires its own). An announcement not stored
	// wraps ErrNotFound.
	RetireSlackNonce(ctx context.Context, params *RetireSlackNonceParams) error

	// GetSlackAnnouncement returns one announcement, or ErrNotFound.
	GetSlackAnnouncement(ctx context.Context, params *GetSlackAnnouncementParams) (*SlackAnnouncement, error)

	// ListSlackAnnouncements returns a proposal's announcements, posted or
	// not, ordered by actor (the channel's post, actor "", first).
	ListSlackAnnouncements(ctx context.Context, params *ListSlackAnnouncementsParams) ([]*SlackAnnouncement, error)
}

// ClaimSlackPostParams asks to post one announcement.
type ClaimSlackPostParams struct {
	Tenant     string
	ProposalID string
	Actor      string // empty: the configured channel's post
	SlackUser  string // empty for a channel post
	// Nonce and NonceVersion are the new announcement's (or the taken-over
	// one's): fresh random text, and the proposal's version.
	Nonce        string
	NonceVersion int64
	// Token fences the claim; LeaseDuration bounds it.
	Token         string
	LeaseDuration time.Duration
}

// SlackPostClaim is ClaimSlackPost's answer.
type SlackPostClaim struct {
	Announcement *SlackAnnouncement
	// Claimed: the caller holds the post and must post the message, then
	// RecordSlackPost with its token. Otherwise the announcement is posted
	// (Announcement.Posted) or another delivery is posting it.
	Claimed bool
}

// RecordSlackPostParams records a posted message.
type RecordSlackPostParams struct {
	Tenant     string
	ProposalID string
	Actor      string
	Token      string
	Channel    string
	TS         string
}

// RotateSlackNonceParams replaces an announcement's nonce.
type RotateSlackNonceParams struct {
	Tenant       string
	ProposalID   string
	Actor        string
	From         string
	Nonce        string
	NonceVersion int64
}

// RetireSlackNonceParams names the nonce a message now shows.
type RetireSlackNonceParams struct {
	Tenant     string
	ProposalID string
	Actor      string
	Nonce      string
}

// ValidateRetireSlackNonce checks a retirement's parameters.
func ValidateRetireSlackNonce(p *RetireSlackNonceParams) error {
	if p == nil {
		return invalidParams("no parameters")
	}
	return slackFieldsValid(map[string]string{"tenant": p.Tenant, "proposal": p.ProposalID, "actor": p.Actor,
		"nonce": p.Nonce}, "tenant", "proposal", "nonce")
}

// GetSlackAnnouncementParams names one announcement.
type GetSlackAnnouncementParams struct {
	Tenant     string
	ProposalID string
	Actor      string
}

// ListSlackAnnouncementsParams names a proposal.
type ListSlackAnnouncementsParams struct {
	Tenant     string
	ProposalID string
}

// maxSlackField bounds every text an announcement stores: Slack's ids and
// timestamps are short, and the nonces and tokens are the engine's.
const maxSlackField = 255

func slackFieldsValid(fields map[string]string, required ...string) error {
	for _, name := range required {
		if fields[name] == "" {
			return invalidParams("slack announcement: %s required", name)
		}
	}
	for name, v := range fields {
		if len(v) > maxSlackField {
			return invalidParams("slack announcement: %s longer than %d bytes", name, maxSlackField)
		}
	}
	return nil
}

// ValidateClaimSlackPost checks a claim's parameters.
func ValidateClaimSlackPost(p *ClaimSlackPostParams) error {
	if p == nil {
		return invalidParams("no parameters")
	}
	if err := slackFieldsValid(map[string]string{"tenant": p.Tenant, "proposal": p.ProposalID, "actor": p.Actor,
		"slack user": p.SlackUser, "nonce": p.Nonce, "token": p.Token}, "tenant", "proposal", "nonce", "token"); err != nil {
		return err
	}
	switch {
	case p.LeaseDuration <= 0:
		return invalidParams("slack announcement: a claim needs a positive lease duration")
	case p.NonceVersion < 0:
		return invalidParams("slack announcement: negative nonce version")
	case (p.Actor == "") != (p.SlackUser == ""):
		return invalidParams("slack announcement: an approver's message names its Slack user, a channel post none")
	}
	return nil
}

// ValidateRecordSlackPost checks a record's parameters.
func ValidateRecordSlackPost(p *RecordSlackPostParams) error {
	if p == nil {
		return invalidParams("no parameters")
	}
	return slackFieldsValid(map[string]string{"tenant": p.Tenant, "proposal": p.ProposalID, "actor": p.Actor,
		"token": p.Token, "channel": p.Channel, "ts": p.TS}, "tenant", "proposal", "token", "channel", "ts")
}

// ValidateRotateSlackNonce checks a rotation's parameters.
func ValidateRotateSlackNonce(p *RotateSlackNonceParams) error {
	if p == nil {
		return invalidParams("no parameters")
	}
	if err := slackFieldsValid(map[string]string{"tenant": p.Tenant, "proposal": p.ProposalID, "actor": p.Actor,
		"from": p.From, "nonce": p.Nonce}, "tenant", "proposal", "from", "nonce"); err != nil {
		return err
	}
	if p.NonceVersion < 0 {
		return invalidParams("slack announcement: negative nonce version")
	}
	return nil
}

// ApplySlackClaim is ClaimSlackPost's rule, which every driver shares: given
// the stored announcement (nil: none) and the store's clock, the
// announcement to store and whether the claim was granted. A nil result
// with Claimed false means: leave the stored one as it is.
func ApplySlackClaim(stored *SlackAnnouncement, p *ClaimSlackPostParams, now time.Time) (next *SlackAnnouncement, claimed bool) {
	switch {
	case stored == nil:
		return &SlackAnnouncement{Tenant: p.Tenant, ProposalID: p.ProposalID, Actor: p.Actor, SlackUser: p.SlackUser,
			Nonce: p.Nonce, NonceVersion: p.NonceVersion, PostToken: p.Token, PostUntil: now.Add(p.LeaseDuration),
			CreatedAt: now, UpdatedAt: now}, true
	case stored.Posted() || stored.PostUntil.After(now):
		return nil, false
	}
	c := stored.Clone()
	c.SlackUser, c.Nonce, c.NonceVersion, c.PrevNonce = p.SlackUser, p.Nonce, p.NonceVersion, ""
	c.PostToken, c.PostUntil, c.UpdatedAt = p.Token, now.Add(p.LeaseDuration), now
	return c, true
}

// SlackPostConflict is RecordSlackPost's error for an announcement claimed
// by another token, or posted already.
func SlackPostConflict(proposalID, actor string) error {
	return fmt.Errorf("record slack post of proposal %s to %q: %w (%w): claimed by another delivery or posted already",
		proposalID, actor, ErrConflict, ErrLeaseLost)
}

// SlackNonceConflict is RotateSlackNonce's error for a nonce rotated by
// another delivery.
func SlackNonceConflict(proposalID, actor string) error {
	return fmt.Errorf("rotate slack nonce of proposal %s to %q: %w: rotated by another delivery", proposalID, actor, ErrConflict)
}
