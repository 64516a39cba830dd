package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// countingStore counts the audit events its ListEvents returns.
type countingStore struct {
	store.Store
	mu     sync.Mutex
	reads  int
	events int
}

func (c *countingStore) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*cstype.Event, error) {
	evs, err := c.Store.ListEvents(ctx, p)
	c.mu.Lock()
	c.reads++
	c.events += len(evs)
	c.mu.Unlock()
	return evs, err
}

// take returns the counts so far and resets them.
func (c *countingStore) take() (reads, events int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reads, events = c.reads, c.events
	c.reads, c.events = 0, 0
	return reads, events
}

// TestEventStreamResumesWithoutRereading resumes a stream from an old
// Last-Event-ID over a long history: the stream pages forward through it
// once, and what happens next costs reads of the new events only, not of
// the history again.
func TestEventStreamResumesWithoutRereading(t *testing.T) {
	t.Parallel()
	const history = 1200
	var offset atomic.Int64 // the store's clock runs this far behind
	offset.Store(int64(time.Hour))
	counting := &countingStore{Store: memstore.New(&memstore.Options{Now: func() time.Time {
		return time.Now().Add(-time.Duration(offset.Load()))
	}})}
	h := newHarness(t, "mem", harnessOptions{engine: func(o *countersign.Options) { o.Store = counting }})
	ctx := context.Background()
	alice := identities["alice"]
	for i := range history {
		_, err := h.engine.Call(ctx, &countersign.Call{
			Identity: alice, ThreadID: "t_hist", ToolCallID: fmt.Sprintf("h%d", i), Action: "payments.refund",
			Input: json.RawMessage(fmt.Sprintf(`{"amount":1,"customer":"c_%d"}`, i)), Mode: countersign.ModeIndependent,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	offset.Store(0) // the history is an hour old; what follows is now
	evs, err := counting.Store.ListEvents(ctx, &store.ListEventsParams{Tenant: "acme", Limit: 10})
	if err != nil || len(evs) != 10 {
		t.Fatalf("history: %v, %d events", err, len(evs))
	}
	resumeAt := evs[9].ID
	counting.take()

	ch := h.stream(t, "bob", strconv.FormatInt(resumeAt, 10))
	for i := 10; i < history; i++ {
		ev := next(t, ch)
		if id, _ := strconv.ParseInt(ev.id, 10, 64); id <= resumeAt {
			t.Fatalf("event %d at or before Last-Event-ID %d", id, resumeAt)
		}
	}
	reads, read := counting.take()
	t.Logf("resuming over %d events: %d store reads, %d events read", history, reads, read)
	// The history after the position is paged through once (the position
	// itself is checked by one probe for the newest event), with a little
	// slack for the events the read that reached the tail sees again.
	if read > history+history/10 {
		t.Errorf("resuming read %d events of a history of %d", read, history)
	}

	// What happens next costs reads of what is new, not of the history.
	for i := range 5 {
		id := h.pending(fmt.Sprintf("new_%d", i), fmt.Sprintf("c_new%d", i))
		if got := next(t, ch).proposal(t)["id"]; got != id {
			t.Fatalf("next event for %v, want %s", got, id)
		}
	}
	reads, read = counting.take()
	t.Logf("five new events after the resume: %d store reads, %d events read", reads, read)
	if read >= history {
		t.Errorf("five new events cost %d events read: the stream re-read its history of %d", read, history)
	}
}

// TestEventStreamCursorAhead: a Last-Event-ID beyond the newest event (a
// restored backup, another server) answers 400 INVALID_CURSOR, so the
// client reconnects without it instead of hearing nothing.
func TestEventStreamCursorAhead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	h.pending("ahead_1", "c_ahead")
	resp := h.do(req{method: "GET", path: "/v1/events", token: "bob", header: map[string]string{"Last-Event-ID": "999999"}})
	if resp.status != 400 || resp.errorCode(t) != CodeInvalidCursor {
		t.Fatalf("Last-Event-ID ahead of the newest event: %d %s", resp.status, resp.body)
	}
}
