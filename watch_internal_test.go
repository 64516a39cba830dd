package countersign

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// eventHidingStore hides one event from the first reads that could return it, as a
// PostgreSQL transaction that committed after one with a higher event id
// looks to a reader.
type eventHidingStore struct {
	store.Store
	mu     sync.Mutex
	hidden int64 // the event's id; 0: none
	reads  int   // reads left that do not see it
}

func (s *eventHidingStore) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*cstype.Event, error) {
	evs, err := s.Store.ListEvents(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hidden == 0 || s.reads == 0 {
		return evs, err
	}
	s.reads--
	out := evs[:0:0]
	for _, ev := range evs {
		if ev.ID != s.hidden {
			out = append(out, ev)
		}
	}
	return out, err
}

// The watcher reads the audit log through the engine's one tail, so an
// event that commits after a later one (a late PostgreSQL commit) still
// wakes its waiter, however many scans it was missing from.
func TestWatcherWakesOnLateCommittedEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := &eventHidingStore{Store: memstore.New(nil)}
	e, err := New(Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	create := func(id string) {
		t.Helper()
		p := &cstype.Proposal{ID: id, Tenant: "acme", Requester: "alice", ThreadID: "t", ToolCallID: id, Action: "noop",
			Mode: ModeIndependent, Approvers: []string{"role:finance"}, Quorum: 1, ExpiresAt: time.Now().Add(time.Hour), OperationID: "op_" + id}
		if _, err := st.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
			t.Fatal(err)
		}
	}
	approve := func(id string) {
		t.Helper()
		// Straight to the store: another process decides, nothing signals here.
		if _, err := st.Decide(ctx, &store.DecideParams{Tenant: "acme", ID: id, Actor: "bob", Verdict: cstype.VerdictApproved, Via: "api"}); err != nil {
			t.Fatal(err)
		}
	}
	create("p1")
	create("p2")
	wake, unsubscribe := e.hub.Subscribe("p1")
	defer unsubscribe()
	tw := &tenantWatch{waiters: map[string]int{"p1": 1}}
	e.startCursor(ctx, "acme", tw, "p1")
	<-wake // the cursor is set: waiters re-read

	approve("p1")
	approve("p2")
	evs, err := st.Store.ListEvents(ctx, &store.ListEventsParams{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	for _, ev := range evs {
		if ev.ProposalID == "p1" && ev.Type != cstype.EventCreated {
			st.hidden = ev.ID
		}
	}
	st.reads = 3
	st.mu.Unlock()
	for scan := 1; scan <= 3; scan++ {
		e.scanTenant(ctx, "acme", tw)
		select {
		case <-wake:
			t.Fatalf("scan %d woke the waiter of p1 before its event was visible", scan)
		default:
		}
	}
	e.scanTenant(ctx, "acme", tw) // now the late event is committed
	select {
	case <-wake:
	default:
		t.Fatal("the late event of p1 never woke its waiter")
	}
}
