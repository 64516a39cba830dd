package slack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	slackapi "github.com/slack-go/slack"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// Events are the event types the channel receives: every change that
// announces a proposal to someone new or changes what its messages show.
// proposal.decided is each decision, a quorum's progress included.
var Events = []cstype.EventType{
	cstype.EventCreated, cstype.EventDecided, cstype.EventEscalated, cstype.EventExpired, cstype.EventSettled,
	cstype.EventCancelled, cstype.EventSuperseded, cstype.EventResolved,
}

// errRaced fails a delivery whose update may have landed after a newer
// state's: the outbox tries it again, with the proposal read afresh.
var errRaced = errors.New("a newer state of the proposal was shown meanwhile")

// Deliver brings p's Slack messages up to date with p as it stands: it
// posts to the approvers who may decide p now and have no message yet,
// and updates every message already posted. Its error fails the delivery,
// which the outbox tries again; what succeeded stays done (a retry never
// posts a message twice).
func (s *Slack) Deliver(ctx context.Context, p *cstype.Proposal) error {
	if p == nil || p.Tenant != s.tenant || !slices.Contains(p.Notify, "slack") {
		return nil // not announced through this channel
	}
	var errs []error
	posted := map[string]bool{} // the actors this call posted to, "" the channel
	if p.Status == cstype.StatusPending {
		errs = append(errs, s.announce(ctx, p, posted))
	}
	list, err := s.engine.SlackAnnouncements(ctx, p)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, a := range list {
		if !a.Posted() || posted[a.Actor] {
			continue
		}
		if err := s.update(ctx, p, a); err != nil {
			errs = append(errs, fmt.Errorf("update the message to %q: %w", a.Actor, err))
		}
	}
	return errors.Join(errs...)
}

// announce posts p to whoever may decide it now and has no message yet: a
// direct message to each (post: dm), or the channel's one post while
// anyone may.
func (s *Slack) announce(ctx context.Context, p *cstype.Proposal, posted map[string]bool) error {
	actors := make([]string, 0, len(s.users))
	for actor := range s.users {
		actors = append(actors, actor)
	}
	sort.Strings(actors)
	candidates := make([]countersign.Identity, 0, len(actors))
	for _, actor := range actors {
		candidates = append(candidates, s.identity(actor))
	}
	// The engine says who may be announced to: never the requester, never
	// an agent, only who may decide p now through Slack.
	announcees := s.engine.Announcees(ctx, p, "slack", candidates)
	if len(announcees) == 0 {
		return nil
	}
	if s.post != PostDM {
		return s.postOne(ctx, p, countersign.Identity{Tenant: p.Tenant}, "", s.post, posted)
	}
	var errs []error
	for _, id := range announcees {
		user := s.users[id.Actor].SlackID
		// A bot posts a direct message by naming the user as the channel;
		// Slack answers with the DM's channel id, which updates use.
		errs = append(errs, s.postOne(ctx, p, id, user, user, posted))
	}
	return errors.Join(errs...)
}

// postOne posts one announcement, once: claimed first, recorded after.
func (s *Slack) postOne(ctx context.Context, p *cstype.Proposal, to countersign.Identity, user, channel string, posted map[string]bool) error {
	c, err := s.engine.ClaimSlackPost(ctx, p, to, user, s.lease)
	if err != nil {
		return err
	}
	a := c.Announcement
	switch {
	case c.Claimed:
	case a.Posted():
		return nil // posted by an earlier attempt: Deliver updates it
	default:
		return fmt.Errorf("the message to %q is being posted by another delivery", to.Actor)
	}
	fallback, blocks := s.message(p, to.Actor != "", to.Actor != "", a.Nonce)
	ch, ts, err := s.api.PostMessageContext(ctx, channel, slackapi.MsgOptionText(fallback, false),
		slackapi.MsgOptionBlocks(blocks...), slackapi.MsgOptionDisableLinkUnfurl(), slackapi.MsgOptionDisableMediaUnfurl())
	if err != nil {
		// The claim runs out and a later attempt takes it over, with a new
		// nonce: a message this one may have posted unanswered is stale.
		return fmt.Errorf("chat.postMessage to %q: %w", to.Actor, err)
	}
	if _, err := s.engine.RecordSlackPost(ctx, a, ch, ts); err != nil {
		if errors.Is(err, cstype.ErrLeaseLost) {
			// Another delivery took the post over: its message stands, and
			// this one goes, so that the approver has one.
			_, _, derr := s.api.DeleteMessageContext(ctx, ch, ts)
			return errors.Join(err, derr)
		}
		return err
	}
	posted[to.Actor] = true
	return nil
}

// update rewrites one posted message to show p, with a nonce issued for
// p's version: a button of the message as it was is stale from now on.
func (s *Slack) update(ctx context.Context, p *cstype.Proposal, a *cstype.SlackAnnouncement) error {
	a, err := s.engine.RefreshSlackNonce(ctx, a, p.Version)
	if err != nil {
		return err
	}
	if a.NonceVersion > p.Version {
		return nil // a delivery of a newer state updates it
	}
	live := false
	if a.Actor != "" && p.Status == cstype.StatusPending {
		live = len(s.engine.Announcees(ctx, p, "slack", []countersign.Identity{s.identity(a.Actor)})) == 1
	}
	fallback, blocks := s.message(p, a.Actor != "", live, a.Nonce)
	if _, _, _, err := s.api.UpdateMessageContext(ctx, a.Channel, a.TS, slackapi.MsgOptionText(fallback, false),
		slackapi.MsgOptionBlocks(blocks...)); err != nil {
		return fmt.Errorf("chat.update: %w", err)
	}
	// The message shows a.Nonce now: the nonce it replaced, live until
	// here so that a click made while the update was on its way counts,
	// is stale from now on.
	if err := s.engine.RetireSlackNonce(ctx, a); err != nil {
		return err
	}
	// A delivery of a newer state may have updated the message before this
	// update landed: then this one is tried again, with p read afresh.
	now, err := s.engine.SlackAnnouncement(ctx, a.Tenant, a.ProposalID, a.Actor)
	if err != nil {
		return err
	}
	if now.NonceVersion > p.Version {
		return errRaced
	}
	return nil
}
