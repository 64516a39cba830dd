package countersign

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// Slack announcements (docs/api.md Part 3, "Slack approvals"; package
// channels/slack). The channel posts and updates the messages; the engine
// keeps the record of each (one per proposal and approver, and one for the
// configured channel's post) and says who may get one: only an announcee
// (Announcees) is ever claimed a message, so that the channel never decides
// itself who gets a button.

// ErrStaleAnnouncement: a Slack button was clicked whose nonce is not its
// announcement's current one (the message showed an older state of the
// proposal, or was never recorded as posted). Nothing is decided.
var ErrStaleAnnouncement = errors.New("stale announcement")

// SlackPostClaim is ClaimSlackPost's answer: the announcement as stored,
// and whether the caller holds its post.
type SlackPostClaim struct {
	Announcement *cstype.SlackAnnouncement
	// Claimed: the caller posts the message now, then RecordSlackPost.
	// Otherwise it is posted already (Announcement.Posted) or another
	// delivery is posting it.
	Claimed bool
}

// slackNonce is a fresh nonce or claim token: 128 random bits in hex.
func slackNonce() string { return randomHex(16) }

// ClaimSlackPost reserves the announcement of p to approver to (its Slack
// user slackUser) for posting, under a claim of lease; to with an empty
// Actor (and slackUser "") is the configured channel's one post, which
// shows no input and no buttons. An approver must be an announcee of p
// through Slack (Announcees) or the answer is a *ForbiddenError and nothing
// is stored. A retried delivery gets the stored announcement back, not a
// second claim (store.SlackAnnouncements, ClaimSlackPost).
func (e *Engine) ClaimSlackPost(ctx context.Context, p *cstype.Proposal, to Identity, slackUser string, lease time.Duration) (*SlackPostClaim, error) {
	if to.Actor != "" {
		if to.Tenant != p.Tenant || len(e.Announcees(ctx, p, "slack", []Identity{to})) != 1 {
			return nil, &ForbiddenError{ProposalID: p.ID, Actor: to.Actor, Reason: "not an approver Slack may announce this proposal to"}
		}
	}
	c, err := e.store.ClaimSlackPost(ctx, &store.ClaimSlackPostParams{Tenant: p.Tenant, ProposalID: p.ID, Actor: to.Actor,
		SlackUser: slackUser, Nonce: slackNonce(), NonceVersion: p.Version, Token: slackNonce(), LeaseDuration: lease})
	if err != nil {
		return nil, fmt.Errorf("claim slack post: %w", err)
	}
	return &SlackPostClaim{Announcement: c.Announcement, Claimed: c.Claimed}, nil
}

// RecordSlackPost records the message posted for an announcement the
// caller claimed (a, as ClaimSlackPost returned it): Slack's channel id and
// message ts. A claim another delivery took over is an error matching
// cstype.ErrLeaseLost, and nothing is recorded.
func (e *Engine) RecordSlackPost(ctx context.Context, a *cstype.SlackAnnouncement, channel, ts string) (*cstype.SlackAnnouncement, error) {
	got, err := e.store.RecordSlackPost(ctx, &store.RecordSlackPostParams{Tenant: a.Tenant, ProposalID: a.ProposalID, Actor: a.Actor,
		Token: a.PostToken, Channel: channel, TS: ts})
	if err != nil {
		return nil, fmt.Errorf("record slack post: %w", err)
	}
	return got, nil
}

// RefreshSlackNonce gives announcement a a new nonce when it was issued for
// an earlier version of its proposal than version, so that a button of the
// message as it was is stale once the message shows version. It returns
// the announcement with its current nonce, issued for version or a later
// one. Of concurrent refreshes of one announcement one wins each rotation;
// a loser whose winner rotated for an earlier version than its own rotates
// again from the winner's nonce. Were it to take the winner's nonce as its
// own, two deliveries of different versions would share one nonce version,
// and the older one's update, landing last, would not know it raced (it
// did: a Slack message once kept showing "approved" after it succeeded).
func (e *Engine) RefreshSlackNonce(ctx context.Context, a *cstype.SlackAnnouncement, version int64) (*cstype.SlackAnnouncement, error) {
	// Each conflict is another delivery's rotation, to a version of its
	// own: versions are finite, so this ends.
	for a.NonceVersion < version {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("refresh slack nonce: %w", err)
		}
		got, err := e.store.RotateSlackNonce(ctx, &store.RotateSlackNonceParams{Tenant: a.Tenant, ProposalID: a.ProposalID, Actor: a.Actor,
			From: a.Nonce, Nonce: slackNonce(), NonceVersion: version})
		if errors.Is(err, cstype.ErrConflict) {
			got, err = e.store.GetSlackAnnouncement(ctx, &store.GetSlackAnnouncementParams{Tenant: a.Tenant, ProposalID: a.ProposalID, Actor: a.Actor})
		}
		if err != nil {
			return nil, fmt.Errorf("refresh slack nonce: %w", err)
		}
		a = got
	}
	return a, nil
}

// RetireSlackNonce records that announcement a's message now shows a's
// nonce: the nonce it replaced is stale from now on.
func (e *Engine) RetireSlackNonce(ctx context.Context, a *cstype.SlackAnnouncement) error {
	if err := e.store.RetireSlackNonce(ctx, &store.RetireSlackNonceParams{Tenant: a.Tenant, ProposalID: a.ProposalID,
		Actor: a.Actor, Nonce: a.Nonce}); err != nil {
		return fmt.Errorf("retire slack nonce: %w", err)
	}
	return nil
}

// SlackAnnouncements lists p's announcements, posted or not: the messages a
// change of p updates.
func (e *Engine) SlackAnnouncements(ctx context.Context, p *cstype.Proposal) ([]*cstype.SlackAnnouncement, error) {
	out, err := e.store.ListSlackAnnouncements(ctx, &store.ListSlackAnnouncementsParams{Tenant: p.Tenant, ProposalID: p.ID})
	if err != nil {
		return nil, fmt.Errorf("list slack announcements: %w", err)
	}
	return out, nil
}

// SlackAnnouncement reads one announcement: p's to actor ("" for the
// channel's post), or an error wrapping ErrNotFound.
func (e *Engine) SlackAnnouncement(ctx context.Context, tenant, proposalID, actor string) (*cstype.SlackAnnouncement, error) {
	a, err := e.store.GetSlackAnnouncement(ctx, &store.GetSlackAnnouncementParams{Tenant: tenant, ProposalID: proposalID, Actor: actor})
	if err != nil {
		return nil, fmt.Errorf("get slack announcement: %w", err)
	}
	return a, nil
}

// CheckSlackNonce reports whether a Slack button carrying nonce, clicked by
// id on proposal proposalID, is live: nonce is the current one of id's
// announcement of it (posted, or being recorded: the nonce is in no other
// message, and a post taken over gets a new one), or the one it replaced while the message
// still shows that (until RetireSlackNonce). Otherwise it returns an error wrapping
// ErrStaleAnnouncement (none was posted to id, or the message showed an
// older state). It decides nothing: the click then decides through Decide,
// which judges whether id may.
func (e *Engine) CheckSlackNonce(ctx context.Context, id Identity, proposalID, nonce string) error {
	a, err := e.store.GetSlackAnnouncement(ctx, &store.GetSlackAnnouncementParams{Tenant: id.Tenant, ProposalID: proposalID, Actor: id.Actor})
	switch {
	case errors.Is(err, cstype.ErrNotFound):
		return fmt.Errorf("proposal %s was not announced to %s in Slack: %w", proposalID, id.Actor, ErrStaleAnnouncement)
	case err != nil:
		return fmt.Errorf("check slack nonce: %w", err)
	case id.Actor == "" || (subtle.ConstantTimeCompare([]byte(a.Nonce), []byte(nonce)) != 1 &&
		(a.PrevNonce == "" || subtle.ConstantTimeCompare([]byte(a.PrevNonce), []byte(nonce)) != 1)):
		return fmt.Errorf("the message of proposal %s showed an older state: %w", proposalID, ErrStaleAnnouncement)
	}
	return nil
}
