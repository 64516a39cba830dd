// Package slack is the Slack approver channel (docs/api.md Part 3, "Slack
// approvals"; docs/channels.md): it announces proposals to their approvers
// in Slack with Block Kit buttons, and turns a click into a decision.
//
// It is a surface: it translates Slack's protocol into engine calls and
// decides nothing itself. Who gets a message is the engine's
// (Engine.Announcees, Engine.ClaimSlackPost); whether a click decides is
// the engine's too (Engine.Decide, with via "slack"). The channel is bound
// to one tenant and maps Slack users to that tenant's actors explicitly;
// an unmapped user decides nothing.
//
// Deliveries go through the notification outbox: Channel returns a
// notifications.Channel that receives a proposal's events (created,
// decided, escalated, expired, settled, cancelled, superseded, resolved),
// each with the proposal as it stands at the attempt. On each, the channel
// posts a direct message to every approver who may now decide and has
// none yet (post: dm), or one post to the configured channel, and updates
// every message already posted (chat.update), so that a decided proposal
// shows no live button. A Slack API failure fails the delivery, which the
// outbox retries with backoff.
//
// A post is claimed in the store before it is made and recorded after it
// (Engine.ClaimSlackPost, Engine.RecordSlackPost), so a retried delivery
// never posts a second message to one approver. Every message carries a
// nonce in its buttons; the nonce is replaced whenever the message is
// updated to a newer state of its proposal, so a click on a message that
// showed an older state is stale and decides nothing.
//
// Handler serves POST /v1/slack/interactions: it checks Slack's signature
// (X-Slack-Signature, v0 HMAC-SHA256 over "v0:{timestamp}:{body}" with the
// signing secret) and that the timestamp is within five minutes (else
// 401), the team and app ids, and the button's nonce; maps the Slack user
// to its actor; and decides. A click that decides nothing (an unmapped
// user, one who may not decide, a stale button, a proposal decided
// already) gets an ephemeral reply through the interaction's response_url
// saying why. The HTTP answer to a signed block_actions request is an
// empty 200, as Slack expects.
package slack
