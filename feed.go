package countersign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// The one tail of the audit log (docs/design.md §11). Waiters, event streams and
// everything else that follows what happens to proposals read it through
// auditTail; nothing else re-scans a tenant's history.
//
// Event ids grow with every write, but they are not in commit order: on
// PostgreSQL a transaction may commit its event after another transaction
// committed one with a higher id. A reader that only moved forward would skip
// such a late event for good. So a tail keeps a floor below which every event
// is known to be committed and read, and reads again, above the floor, what
// it has already handed out, handing out only what is new. The floor rises
// on two grounds, whichever is higher:
//   - time at the tail: once a read reached the newest events, whatever it
//     saw had committed; a read tailWindow later finds committed everything
//     whose transaction was under way then;
//   - the events' own times: an event stamped more than twice tailWindow
//     before a read began came from a transaction that began that long ago,
//     and every event with a lower id was allocated earlier still, so all of
//     them have committed. This is what lets a reader that resumes from an
//     old position page forward through history once, without reading any
//     of it again.
// Both grounds assume that no transaction writing an event stays open longer
// than tailWindow (and that the processes' clocks agree to well within it).

// tailWindow is how long, at most, a transaction that wrote an audit event
// may stay open before it commits, for a tail to still see its event.
const tailWindow = 5 * time.Second

// tailPage is how many events a tail asks the store for at once.
const tailPage = 500

// auditTail is one reader's position in one tenant's audit log. It is not
// safe for concurrent use.
type auditTail struct {
	st     store.Store
	tenant string
	now    func() time.Time
	window time.Duration

	floor int64            // every event up to floor was read
	seen  map[int64]bool   // events above floor already handed out
	marks []tailMark       // the highest id of each read that reached the tail, oldest first
	scan  func(n int) bool // test hook: told how many events each store read returned
}

// tailMark is the highest event id a read that reached the newest events saw.
type tailMark struct {
	at   time.Time
	last int64
}

func newAuditTail(st store.Store, tenant string, after int64, now func() time.Time) *auditTail {
	return &auditTail{st: st, tenant: tenant, now: now, window: tailWindow, floor: after, seen: map[int64]bool{}}
}

// next returns up to limit events (ascending id) not handed out before, and
// whether it read up to the newest event. limit <= 0 means no limit:
// everything up to the newest event.
func (t *auditTail) next(ctx context.Context, limit int) (out []*cstype.Event, atTail bool, err error) {
	began := t.now()
	var (
		high    = t.floor
		dated   = t.floor // the highest id read whose time proves all below it committed
		settled = began.Add(-2 * t.window)
	)
	for after := t.floor; !atTail && (limit <= 0 || len(out) < limit); {
		evs, err := t.st.ListEvents(ctx, &store.ListEventsParams{Tenant: t.tenant, AfterID: after, Limit: tailPage})
		if err != nil {
			return out, false, fmt.Errorf("read audit events: %w", err)
		}
		if t.scan != nil {
			t.scan(len(evs))
		}
		atTail = len(evs) < tailPage
		for _, ev := range evs {
			if limit > 0 && len(out) >= limit {
				atTail = false // the rest of this page is read next time
				break
			}
			if !t.seen[ev.ID] {
				t.seen[ev.ID] = true
				out = append(out, ev)
			}
			after, high = ev.ID, max(high, ev.ID)
			if ev.At.Before(settled) {
				dated = ev.ID
			}
		}
	}
	if atTail {
		if n := len(t.marks); n == 0 || t.marks[n-1].last < high {
			t.marks = append(t.marks, tailMark{at: began, last: high})
		}
	}
	floor := max(t.floor, dated)
	for len(t.marks) > 0 && began.Sub(t.marks[0].at) > t.window {
		floor = max(floor, t.marks[0].last)
		t.marks = t.marks[1:]
	}
	if floor > t.floor {
		t.floor = floor
		for id := range t.seen {
			if id <= floor {
				delete(t.seen, id)
			}
		}
	}
	return out, atTail, nil
}

// FeedFromNow starts a Feed at the newest event: it returns only what
// happens from then on.
const FeedFromNow int64 = -1

// FeedEvent is one audit event and its proposal as it stands now (not as it
// stood at the event: a stream that replays history shows today's state).
type FeedEvent struct {
	Event    *cstype.Event
	Proposal *cstype.Proposal
}

// Feed is one identity's view of its tenant's audit log, in event order,
// each event once, late commits included: the events of the proposals the
// identity may see. Event streams (SSE, AG-UI) read it, and wait on Changes
// between reads. It is not safe for concurrent use, except Changes.
type Feed struct {
	e           *Engine
	id          Identity
	tail        *auditTail
	changes     <-chan struct{}
	unsubscribe func()
	unwatch     func()
}

// Feed starts a feed for id after the event id after (0: from the first
// event; FeedFromNow: from the newest). An after beyond the newest event of
// the tenant, or below -1, is an error wrapping cstype.ErrInvalidCursor: a
// client resuming from a position this store never reached (a restored
// backup, another server) must start afresh rather than wait in silence.
//
// The caller must Close the feed when it is done with it.
func (e *Engine) Feed(ctx context.Context, id Identity, after int64) (*Feed, error) {
	if after < FeedFromNow {
		return nil, fmt.Errorf("feed after %d: %w", after, cstype.ErrInvalidCursor)
	}
	// Subscribed, and the tenant watched from the newest event, before the
	// first read, so that no change falls between a read and the wait that
	// follows it.
	changes, unsubscribe := e.hub.Subscribe(tenantChangesKey(id.Tenant), unnamedChangesKey)
	newest, err := e.store.LastEventID(ctx, &store.LastEventIDParams{Tenant: id.Tenant})
	if err != nil {
		unsubscribe()
		return nil, fmt.Errorf("feed: find the newest event: %w", err)
	}
	switch {
	case after == FeedFromNow:
		after = newest
	case after > newest:
		unsubscribe()
		return nil, fmt.Errorf("feed after %d: the newest event is %d: %w", after, newest, cstype.ErrInvalidCursor)
	}
	return &Feed{e: e, id: id, tail: newAuditTail(e.store, id.Tenant, after, e.clock), changes: changes,
		unsubscribe: unsubscribe, unwatch: e.watchFeed(id.Tenant, newest)}, nil
}

// Changes receives a value (coalesced) after a change to one of the feed's
// tenant's proposals: one this process made or learned of from the store's
// notifications at once, and, for every other, within a WaitPoll, when the
// engine's watcher (one read per followed tenant per WaitPoll, however many
// feeds follow it) finds the tenant's new events. It is the moment to call
// Next again. Changes in other tenants do not wake it. A stream may still
// call Next now and then without one, as a last resort.
func (f *Feed) Changes() <-chan struct{} { return f.changes }

// Close ends the feed's subscription to changes and its place in the
// engine's watcher. It is safe to call more than once.
func (f *Feed) Close() {
	if f.unsubscribe != nil {
		f.unsubscribe()
		f.unsubscribe = nil
	}
	if f.unwatch != nil {
		f.unwatch()
		f.unwatch = nil
	}
}

// Next returns up to limit new events (limit <= 0: all there are) that the
// feed's identity may see, with their proposals. It returns an empty slice
// when nothing happened; callers wait (Engine.Subscribe) and ask again.
// Events of proposals that no longer exist are skipped.
func (f *Feed) Next(ctx context.Context, limit int) ([]FeedEvent, error) {
	var out []FeedEvent
	read := map[string]*cstype.Proposal{}
	// Events the identity may not see are skipped: read on until there is
	// something to hand out or nothing more to read.
	for {
		evs, atTail, err := f.tail.next(ctx, limit-len(out))
		if err != nil && len(evs) == 0 {
			return out, err
		}
		for _, ev := range evs {
			p, ok := read[ev.ProposalID]
			if !ok {
				var gerr error
				p, gerr = f.e.store.GetProposal(ctx, &store.GetProposalParams{Tenant: f.id.Tenant, ID: ev.ProposalID})
				switch {
				case gerr == nil:
				case errors.Is(gerr, cstype.ErrNotFound):
					p = nil
				default:
					return out, fmt.Errorf("feed: read proposal %s: %w", ev.ProposalID, gerr)
				}
				read[ev.ProposalID] = p
			}
			if p != nil && canSee(f.id, p) {
				out = append(out, FeedEvent{Event: ev, Proposal: p})
			}
		}
		if err != nil || atTail || len(out) > 0 || len(evs) == 0 {
			return out, err
		}
	}
}
