package web

import (
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// The proposal page's audit trail: the proposal's events, each with its
// place in the tenant's audit chain and whether the chain verifies up to it,
// as the engine checked it (Engine.ProposalTrail).

// trailView is the audit trail as the page shows it.
type trailView struct {
	// Summary says what the chain's check covered and found.
	Summary string
	Events  []trailRow
}

// trailRow is one event of the trail.
type trailRow struct {
	Seq                              int64
	Type, Status, Actor, Via, Detail string
	At                               time.Time
	Hash, ShortHash                  string
	// Mark is the row's class: ok, broken, unsealed or unchecked; Verdict
	// says it in words.
	Mark, Verdict string
}

// newTrailView renders what the engine found.
func newTrailView(t *countersign.ProposalTrail) *trailView {
	c := t.Check
	v := &trailView{}
	switch {
	case c.To == 0:
		v.Summary = "Not in the audit chain yet: events are sealed into it about a second after they happen."
	case c.Break != nil:
		v.Summary = fmt.Sprintf("The audit chain does not verify: %s. No event from there on is verified.", c.Break.Error())
	case c.From == 1:
		v.Summary = fmt.Sprintf("The audit chain verifies from its start through seq %d.", c.Through)
	default:
		v.Summary = fmt.Sprintf("The audit chain verifies from seq %d through seq %d; countersign audit verify checks it from its start.", c.From, c.Through)
	}
	for _, te := range t.Events {
		r := trailRow{Seq: te.Seq, Type: string(te.Type), Status: string(te.Status), Actor: te.Actor, Via: te.Via,
			Detail: te.Detail, At: te.At, Hash: te.Hash, ShortHash: shortHash(te.Hash)}
		switch {
		case te.Seq == 0:
			r.Mark, r.Verdict = "unsealed", "not sealed yet"
		case te.Verified:
			r.Mark, r.Verdict = "ok", "verifies"
		case c.Break != nil && te.Seq >= c.Break.Seq:
			r.Mark, r.Verdict = "broken", fmt.Sprintf("does not verify (broken at seq %d)", c.Break.Seq)
		default:
			r.Mark, r.Verdict = "unchecked", "not checked on this page"
		}
		v.Events = append(v.Events, r)
	}
	if c.To > 0 && c.Break == nil {
		for _, te := range t.Events {
			if te.Seq > c.To {
				v.Summary += fmt.Sprintf(" Events after seq %d are beyond what this page checks.", c.To)
				break
			}
		}
	}
	return v
}

// shortHash is the first 12 hex digits of a hash, enough to compare by eye.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	return h
}
