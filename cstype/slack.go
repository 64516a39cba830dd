package cstype

import "time"

// SlackAnnouncement is one Slack message that announces a proposal: a
// direct message to one approver (Actor set), or the one post of the
// configured channel (Actor empty). The message's buttons carry Nonce; a
// click counts only while it is the announcement's current one, so that a
// button of a message showing an older state of the proposal is stale.
//
// An announcement is reserved (a claim to post it, under a lease) before
// the message is posted, and records the message's channel and ts once
// Slack accepted it: TS is empty while it is being posted (or while a post
// that failed waits for its retry).
type SlackAnnouncement struct {
	Tenant     string
	ProposalID string
	// Actor is the approver the message was sent to; empty for the
	// configured channel's post.
	Actor string
	// SlackUser is the Slack user id the message was sent to; empty for a
	// channel post.
	SlackUser string
	// Channel and TS name the posted message (chat.update's arguments);
	// both empty until it is posted.
	Channel string
	TS      string
	// Nonce is what the message's buttons must carry for a click to count;
	// NonceVersion the proposal version it was issued for.
	Nonce        string
	NonceVersion int64
	// PrevNonce is the nonce Nonce replaced, still live while the message
	// shows it: from the rotation until the update that shows Nonce has
	// landed (RetireSlackNonce). Empty otherwise. So an approver who clicks
	// while another's decision is being shown is not refused.
	PrevNonce string
	// PostToken and PostUntil fence a post in progress: only the holder of
	// the token records the message, and another delivery takes the post
	// over only once PostUntil has passed. Both are empty once posted.
	PostToken string
	PostUntil time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Posted reports whether the announcement's message was posted.
func (a *SlackAnnouncement) Posted() bool { return a.TS != "" }

// Clone returns a copy.
func (a *SlackAnnouncement) Clone() *SlackAnnouncement {
	if a == nil {
		return nil
	}
	c := *a
	return &c
}
