package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// drainFeed reads f until it has nothing new, and returns the event ids.
func drainFeed(t *testing.T, f *countersign.Feed) []int64 {
	t.Helper()
	var ids []int64
	for {
		evs, err := f.Next(context.Background(), 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return ids
		}
		for _, ev := range evs {
			if ev.Proposal == nil || ev.Proposal.ID != ev.Event.ProposalID {
				t.Fatalf("event %d without its proposal", ev.Event.ID)
			}
			ids = append(ids, ev.Event.ID)
		}
	}
}

// A feed hands each event its identity may see out once, in id order, with
// the proposal as it stands now; what others may not see stays out.
func TestFeedDeliversEachVisibleEventOnce(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e := readEngine(t, open)
		var alices []string
		for i := range 3 {
			alices = append(alices, pendingRefund(t, e, fmt.Sprint("call_", i)).ID)
		}
		// dave asks in a thread of his own; finance may decide it.
		if _, err := e.Call(ctx, &countersign.Call{
			Identity: tDave, ThreadID: "dave-1", ToolCallID: "d1", Action: "payments.refund",
			Input: json.RawMessage(`{"amount": 1, "customer": "c_1"}`), Mode: countersign.ModeIndependent,
		}); err != nil {
			t.Fatal(err)
		}
		feeds := map[string]*countersign.Feed{}
		for _, who := range []countersign.Identity{tAlice, tBob, tDave, tEve} {
			f, err := e.Feed(ctx, who, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.Close)
			feeds[who.Actor] = f
		}
		want := map[string]int{"alice": 3, "bob": 4, "dave": 1, "eve": 0}
		for who, f := range feeds {
			ids := drainFeed(t, f)
			if len(ids) != want[who] {
				t.Fatalf("%s's feed: %d events, want %d", who, len(ids), want[who])
			}
			for i := 1; i < len(ids); i++ {
				if ids[i] <= ids[i-1] {
					t.Fatalf("%s's feed out of order: %v", who, ids)
				}
			}
		}
		// A decision is new to those who see the proposal, once.
		if _, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: alices[0], Verdict: countersign.Reject}); err != nil {
			t.Fatal(err)
		}
		for who, n := range map[string]int{"alice": 1, "bob": 1, "dave": 0, "eve": 0} {
			evs, err := feeds[who].Next(ctx, 0)
			if err != nil || len(evs) != n {
				t.Fatalf("%s after the decision: %v, %d events, want %d", who, err, len(evs), n)
			}
			if n == 1 && (evs[0].Event.Type != cstype.EventDecided || evs[0].Proposal.Status != cstype.StatusRejected) {
				t.Fatalf("%s got %s with the proposal %s", who, evs[0].Event.Type, evs[0].Proposal.Status)
			}
			if again := drainFeed(t, feeds[who]); len(again) != 0 {
				t.Fatalf("%s's feed repeats %v", who, again)
			}
		}
	})
}

// A feed starts after a position the tenant's log has reached, or now; a
// position beyond the newest event (a restored backup, another server) is an
// invalid cursor, not a silent stream.
func TestFeedPositions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		e := readEngine(t, open)
		pendingRefund(t, e, "call_1")
		all, err := e.Feed(ctx, tBob, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(all.Close)
		ids := drainFeed(t, all)
		if len(ids) != 1 {
			t.Fatalf("history: %v", ids)
		}
		newest := ids[0]
		for _, bad := range []int64{newest + 1, newest + 1000, -2} {
			if _, err := e.Feed(ctx, tBob, bad); !errors.Is(err, cstype.ErrInvalidCursor) {
				t.Fatalf("Feed after %d: %v, want ErrInvalidCursor", bad, err)
			}
		}
		now, err := e.Feed(ctx, tBob, countersign.FeedFromNow)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(now.Close)
		resumed, err := e.Feed(ctx, tBob, newest)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(resumed.Close)
		if got := drainFeed(t, now); len(got) != 0 {
			t.Fatalf("a feed from now replays %v", got)
		}
		second := pendingRefund(t, e, "call_2")
		for name, f := range map[string]*countersign.Feed{"from now": now, "resumed": resumed} {
			evs, err := f.Next(ctx, 0)
			if err != nil || len(evs) != 1 || evs[0].Proposal.ID != second.ID {
				t.Fatalf("%s: %v %v", name, err, evs)
			}
		}
	})
}

// woken reports whether ch holds a wake-up, taking it.
func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A feed's Changes wakes for its own tenant's changes only: with many
// tenants' streams open on one server, a change must not make every stream
// read the store. (The engine's watcher, which finds other processes'
// changes, scans once an hour here, and the store's notifications are
// hidden from it, so that only this engine's own changes wake the feeds:
// on PostgreSQL the echo of acme's own decision, arriving at any moment
// through LISTEN, would wake acme's feed again while the test looks at the
// other tenant's call. TestFeedWatcher is the watcher's, notifications
// included.)
func TestFeedChangesWakeItsTenantOnly(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		quiet := func(t *testing.T, now func() time.Time) store.Store { return unnotified{open(t, now)} }
		e := readEngine(t, quiet, func(o *countersign.Options) { o.WaitPoll = time.Hour })
		acme, err := e.Feed(ctx, tBob, countersign.FeedFromNow)
		if err != nil {
			t.Fatal(err)
		}
		defer acme.Close()
		other, err := e.Feed(ctx, tEve, countersign.FeedFromNow)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()

		p := pendingRefund(t, e, "call_1")
		if !woken(acme.Changes()) {
			t.Error("acme's feed was not woken by an acme proposal")
		}
		if woken(other.Changes()) {
			t.Error("another tenant's feed was woken by an acme proposal")
		}
		if evs, err := acme.Next(ctx, 0); err != nil || len(evs) != 1 || evs[0].Proposal.ID != p.ID {
			t.Fatalf("acme's feed after the wake-up: %d events, %v", len(evs), err)
		}

		// A decision is a change of acme's too.
		if _, err := e.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: p.ID, Verdict: countersign.Reject, Reason: "no"}); err != nil {
			t.Fatal(err)
		}
		if !woken(acme.Changes()) || woken(other.Changes()) {
			t.Error("a decision in acme did not wake acme's feed alone")
		}

		// The other tenant's own call wakes its feed, not acme's.
		if _, err := e.Call(ctx, &countersign.Call{
			Identity: countersign.Identity{Tenant: "other", Actor: "oscar", Roles: []string{"agent"}}, ThreadID: "o1", ToolCallID: "o1",
			Action: "payments.refund", Input: json.RawMessage(`{"amount": 1, "customer": "c_o"}`), Mode: countersign.ModeIndependent,
		}); err != nil {
			t.Fatal(err)
		}
		if !woken(other.Changes()) || woken(acme.Changes()) {
			t.Error("a call in the other tenant did not wake its feed alone")
		}

		// Closed, a feed is woken no more; closing twice is harmless.
		acme.Close()
		acme.Close()
		pendingRefund(t, e, "call_2")
		if woken(acme.Changes()) {
			t.Error("a closed feed was woken")
		}
	})
}

// unnotified is a store whose notifications (store.Notifier) the engine
// cannot find: it has no Unwrap, so none of the store's optional
// interfaces is in reach.
type unnotified struct{ store.Store }

// The engine's watcher wakes a feed for a change another engine on the same
// store made (another process: its changes wake none of this one's feeds
// directly), and wakes the feeds of the changed tenant only.
func TestFeedWatcher(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		ctx := context.Background()
		st := open(t, nil)
		same := func(*testing.T, func() time.Time) store.Store { return st }
		e := readEngine(t, same)
		other := readEngine(t, same, func(o *countersign.Options) { o.WaitPoll = time.Hour })
		acme, err := e.Feed(ctx, tBob, countersign.FeedFromNow)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(acme.Close)
		elsewhere, err := e.Feed(ctx, countersign.Identity{Tenant: "other", Actor: "oscar"}, countersign.FeedFromNow)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(elsewhere.Close)

		p := pendingRefund(t, other, "call_w")
		select {
		case <-acme.Changes():
		case <-time.After(10 * time.Second):
			t.Fatal("another engine's change did not wake the feed within 10 s")
		}
		if evs, err := acme.Next(ctx, 0); err != nil || len(evs) != 1 || evs[0].Proposal.ID != p.ID {
			t.Fatalf("after the wake-up: %d events, %v", len(evs), err)
		}
		if woken(elsewhere.Changes()) {
			t.Error("a change in acme woke another tenant's feed")
		}
	})
}
