package server

import (
	"encoding/json"
	"time"

	"github.com/countersign/countersign/store"
)

// The records' JSON tags already follow API.md. Rendering only puts every
// time in UTC (API.md: RFC 3339 in UTC, whatever the store's clock) and
// turns nil lists into empty ones.

func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// renderProposal returns a copy of p ready to encode; nil stays nil.
func renderProposal(p *store.Proposal) *store.Proposal {
	if p == nil {
		return nil
	}
	c := p.Clone()
	c.CreatedAt, c.UpdatedAt, c.ExpiresAt = utc(c.CreatedAt), utc(c.UpdatedAt), utc(c.ExpiresAt)
	if c.Approvers == nil {
		c.Approvers = []string{}
	}
	if c.Decisions == nil {
		c.Decisions = []store.Decision{}
	}
	for i := range c.Decisions {
		c.Decisions[i].At = utc(c.Decisions[i].At)
	}
	c.Outcome = renderOutcome(c.Outcome)
	return c
}

func renderProposals(ps []*store.Proposal) []*store.Proposal {
	out := make([]*store.Proposal, len(ps))
	for i, p := range ps {
		out[i] = renderProposal(p)
	}
	return out
}

func renderOutcome(o *store.Outcome) *store.Outcome {
	if o == nil {
		return nil
	}
	c := o.Clone()
	c.At = utc(c.At)
	if len(c.Result) > 0 && !json.Valid(c.Result) {
		c.Result = nil // a misbehaving hook's result must not break every answer
	}
	return c
}

func renderThread(t *store.Thread) *store.Thread {
	c := *t
	c.CreatedAt = utc(c.CreatedAt)
	return &c
}

func renderMessages(ms []*store.Message) []*store.Message {
	out := make([]*store.Message, len(ms))
	for i, m := range ms {
		c := m.Clone()
		c.CreatedAt = utc(c.CreatedAt)
		c.Outcome = renderOutcome(c.Outcome)
		out[i] = c
	}
	return out
}

func renderGrant(g *store.Grant) *store.Grant {
	c := g.Clone()
	c.CreatedAt = utc(c.CreatedAt)
	c.ActivatedAt, c.ExpiresAt, c.RevokedAt = utcPtr(c.ActivatedAt), utcPtr(c.ExpiresAt), utcPtr(c.RevokedAt)
	return c
}

func renderEvents(es []*store.Event) []*store.Event {
	out := make([]*store.Event, len(es))
	for i, e := range es {
		c := *e
		c.At = utc(c.At)
		out[i] = &c
	}
	return out
}
