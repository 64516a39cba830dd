package countersign

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// Where a proposal was announced (docs/channels.md, "Where a proposal was
// announced"): the Slack messages and the mails the approver channels sent
// about it, read from the records those channels keep (the Slack
// announcements, the email links), so that the inbox shows beside each
// decision's via where the proposal reached whom.

// AnnouncementState says how far an announcement got.
type AnnouncementState string

// The states of an announcement.
const (
	// AnnouncementPosted: the Slack message was posted; UpdatedAt says
	// when it last changed.
	AnnouncementPosted AnnouncementState = "posted"
	// AnnouncementPosting: a delivery holds the Slack post now.
	AnnouncementPosting AnnouncementState = "posting"
	// AnnouncementFailed: a Slack post whose delivery gave up (its claim
	// ran out) before Slack answered; the outbox may still retry it.
	AnnouncementFailed AnnouncementState = "failed"
	// AnnouncementMailed: the mail was accepted for delivery.
	AnnouncementMailed AnnouncementState = "mailed"
	// AnnouncementNotSent: the mail's links were minted and no SMTP server
	// accepted it yet: its delivery is under way, or failed (the outbox's
	// notification says which, and retries it).
	AnnouncementNotSent AnnouncementState = "not sent"
)

// Announcement is one message about a proposal on an approver channel.
type Announcement struct {
	// Channel is ViaSlack or ViaEmail.
	Channel string
	// Actor is whom it went to; empty for Slack's channel post (post: C…).
	Actor string
	// DirectMessage: a Slack message in the approver's direct messages.
	DirectMessage bool
	State         AnnouncementState
	// At is when it was first made; UpdatedAt when it last changed (a
	// Slack message updated, a mail sent).
	At        time.Time
	UpdatedAt time.Time
}

// Announcements lists where proposal proposalID was announced, as id may
// see it: whoever may see the proposal (mayReadAnnouncements) gets its
// Slack messages (the channel's post first, then by actor) and then its
// mails (by actor, one per message: the links minted for one notification
// make one mail). It holds no nonce, Slack id, token or digest.
func (e *Engine) Announcements(ctx context.Context, id Identity, proposalID string) ([]Announcement, error) {
	p, err := e.proposalOfTenant(ctx, id, proposalID)
	if err != nil {
		return nil, err
	}
	if !mayReadAnnouncements(id, p) {
		return nil, forbidden(id, proposalID, "you may not see this proposal")
	}
	now := e.clock()
	var out []Announcement
	slack, err := e.store.ListSlackAnnouncements(ctx, &store.ListSlackAnnouncementsParams{Tenant: p.Tenant, ProposalID: p.ID})
	if err != nil {
		return nil, fmt.Errorf("announcements: %w", err)
	}
	for _, a := range slack {
		an := Announcement{Channel: ViaSlack, Actor: a.Actor, DirectMessage: a.Actor != "", At: a.CreatedAt, UpdatedAt: a.UpdatedAt}
		switch {
		case a.Posted():
			an.State = AnnouncementPosted
		case a.PostUntil.After(now):
			an.State = AnnouncementPosting
		default:
			an.State = AnnouncementFailed
		}
		out = append(out, an)
	}
	links, err := e.store.ListEmailLinks(ctx, &store.ListEmailLinksParams{Tenant: p.Tenant, ProposalID: p.ID})
	if err != nil {
		return nil, fmt.Errorf("announcements: %w", err)
	}
	// One mail carries the links one notification minted for one
	// approver; links are listed by actor, then creation.
	seen := map[[2]string]int{}
	for _, l := range links {
		key := [2]string{l.Actor, l.NotificationID}
		i, ok := seen[key]
		if !ok {
			seen[key] = len(out)
			out = append(out, Announcement{Channel: ViaEmail, Actor: l.Actor, State: AnnouncementNotSent, At: l.CreatedAt, UpdatedAt: l.CreatedAt})
			i = len(out) - 1
		}
		// A retried delivery retires the links it did not send and mints
		// new ones: the mail is mailed when any of its links was sent.
		if !l.SentAt.IsZero() {
			out[i].State, out[i].UpdatedAt = AnnouncementMailed, l.SentAt
		}
	}
	return out, nil
}
