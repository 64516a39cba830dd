package countersign

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

// lateStore hides some events from listings until they are revealed, as a
// PostgreSQL transaction that commits after one with a higher event id does.
type lateStore struct {
	store.Store
	mu     sync.Mutex
	hidden map[int64]bool
}

func (s *lateStore) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*cstype.Event, error) {
	evs, err := s.Store.ListEvents(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(evs, func(ev *cstype.Event) bool { return s.hidden[ev.ID] }), err
}

func (s *lateStore) set(id int64, hidden bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hidden[id] = hidden
}

// proposeN stores n pending proposals of tenant t in thread th and returns
// the ids of their creation events.
func proposeN(t *testing.T, st store.Store, tenant string, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		p := &cstype.Proposal{
			ID: fmt.Sprintf("prp_%d", i), Tenant: tenant, Requester: "alice", ThreadID: "t1",
			ToolCallID: fmt.Sprint("call_", i), Action: "a", ActionVersion: "1",
			Input: json.RawMessage(`{}`), RawInput: json.RawMessage(`{}`), InputDigest: "sha256:x",
			Preview: "a", Confirmation: cstype.Confirmation{Title: "a"}, ConfirmationID: fmt.Sprint("cnf_", i),
			Mode: ModeWait, Approvers: []string{"requester"}, Quorum: 1,
			ExpiresAt: time.Now().Add(time.Hour), OperationID: fmt.Sprint("op_", i),
		}
		if _, err := st.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := st.ListEvents(ctx, &store.ListEventsParams{Tenant: tenant, Limit: n})
	if err != nil || len(evs) != n {
		t.Fatalf("events: %v, %d", err, len(evs))
	}
	ids := make([]int64, n)
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

// An event that commits after one with a higher id is still handed out,
// once, by a tail that had already passed its id.
func TestAuditTailSeesLateCommits(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Now())
	st := &lateStore{Store: memstore.New(&memstore.Options{Now: clock.Now}), hidden: map[int64]bool{}}
	ids := proposeN(t, st, "acme", 3)
	st.set(ids[1], true) // the middle event has not committed yet
	tail := newAuditTail(st, "acme", 0, clock.Now)
	got, _, err := tail.next(context.Background(), 0)
	if err != nil || len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[2] {
		t.Fatalf("first read: %v %v", err, got)
	}
	clock.Advance(time.Second) // within the window
	st.set(ids[1], false)
	got, _, err = tail.next(context.Background(), 0)
	if err != nil || len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("the late event: %v %v", err, got)
	}
	for range 3 {
		clock.Advance(tailWindow)
		if got, _, err := tail.next(context.Background(), 0); err != nil || len(got) != 0 {
			t.Fatalf("repeated: %v %v", err, got)
		}
	}
	if tail.floor != ids[2] || len(tail.seen) != 0 {
		t.Fatalf("after the window the floor is %d (want %d) and %d ids are remembered", tail.floor, ids[2], len(tail.seen))
	}
}

// A tail resuming far behind the newest event pages through the history
// once: events stamped long before the read cannot have late company, so
// the floor follows the reading instead of waiting for the window.
func TestAuditTailPagesThroughHistoryOnce(t *testing.T) {
	t.Parallel()
	const n, limit = 2000, 50
	past := storetest.NewClock(time.Now().Add(-time.Hour))
	st := memstore.New(&memstore.Options{Now: past.Now})
	proposeN(t, st, "acme", n)
	tail := newAuditTail(st, "acme", 0, time.Now)
	read := 0
	tail.scan = func(k int) bool { read += k; return true }
	handed := 0
	for {
		got, _, err := tail.next(context.Background(), limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		handed += len(got)
	}
	if handed != n {
		t.Fatalf("handed out %d events, want %d", handed, n)
	}
	// Each call may read one page past what it hands out.
	if bound := n + (n/limit+2)*tailPage; read > bound {
		t.Fatalf("read %d events from the store to hand out %d: history was re-read (bound %d)", read, n, bound)
	}
}

// A store notification (another process's change) wakes the feeds of the
// tenant it names; one that names no tenant (sent by an earlier version)
// wakes every tenant's.
func TestFeedChangesFromNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, err := New(Options{Store: memstore.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	feed := func(tenant string) *Feed {
		f, err := e.Feed(ctx, Identity{Tenant: tenant, Actor: "bob"}, FeedFromNow)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		return f
	}
	acme, other := feed("acme"), feed("other")
	woken := func(f *Feed) bool {
		select {
		case <-f.Changes():
			return true
		default:
			return false
		}
	}
	e.notified(store.Notification{Tenant: "acme", ProposalID: "prp_1"})
	if !woken(acme) || woken(other) {
		t.Error("a notification of acme's did not wake acme's feed alone")
	}
	e.notified(store.Notification{ProposalID: "prp_2"})
	if !woken(acme) || !woken(other) {
		t.Error("a notification naming no tenant did not wake every feed")
	}
	e.notified(store.Notification{Work: true})
	if woken(acme) || woken(other) {
		t.Error("a work notification woke a feed")
	}
}
