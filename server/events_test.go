package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// sseEvent is one event of a stream; comment holds a comment line instead.
type sseEvent struct {
	id, name, data, comment string
}

func (e sseEvent) proposal(t *testing.T) map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(e.data), &p); err != nil {
		t.Fatalf("event data is not a JSON object: %v: %q", err, e.data)
	}
	return p
}

// stream opens GET /v1/events and delivers its events (and comments) until
// the test ends.
func (h *harness) stream(t *testing.T, token, lastEventID string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := http.NewRequestWithContext(ctx, "GET", h.url+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	if lastEventID != "" {
		r.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := h.client.Do(r)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET /v1/events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ch := make(chan sseEvent, 100)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				select {
				case ch <- sseEvent{comment: line}:
				default:
				}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[len("id: "):]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		wg.Wait()
	})
	return ch
}

// next returns the stream's next event, skipping comments.
func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.comment == "" {
				return ev
			}
		case <-deadline:
			t.Fatal("no event within 10s")
		}
	}
}

// twoPhaseFlow runs a two-phase refund by alice, approved by bob, to
// success, and returns the proposal id.
func (h *harness) twoPhaseFlow(t *testing.T, toolCall, customer string) string {
	t.Helper()
	body := refund(toolCall, customer, 5)
	body["mode"] = "two_phase"
	res := h.call("alice", body)
	id, _ := res["proposal_id"].(string)
	h.decide(200, "bob", id, "approve", nil, nil)
	body["evidence"] = res["confirmation_id"]
	if st := h.call("alice", body)["status"]; st != "succeeded" {
		t.Fatalf("two-phase retry: %v", st)
	}
	return id
}

func TestEventStream(t *testing.T) {
	t.Parallel()
	forEachStore(t, harnessOptions{}, func(t *testing.T, h *harness) {
		bob := h.stream(t, "bob", "")
		dave := h.stream(t, "dave", "")
		eve := h.stream(t, "x_eve", "")
		id := h.twoPhaseFlow(t, "sse_1", "c_sse")

		var seen []sseEvent
		for _, w := range []struct{ name, status string }{
			{"proposal.created", "pending"}, {"proposal.decided", "approved"}, {"proposal.settled", "succeeded"},
		} {
			ev := next(t, bob)
			if ev.name != w.name {
				t.Fatalf("event %q, want %q (%s)", ev.name, w.name, ev.data)
			}
			p := ev.proposal(t)
			want(t, "data.id", p["id"], id)
			// The data is the proposal as it is when the event is sent.
			if _, err := strconv.ParseInt(ev.id, 10, 64); err != nil {
				t.Errorf("event id %q: %v", ev.id, err)
			}
			seen = append(seen, ev)
		}
		if !(idOf(seen[0]) < idOf(seen[1]) && idOf(seen[1]) < idOf(seen[2])) {
			t.Errorf("event ids not increasing: %v %v %v", seen[0].id, seen[1].id, seen[2].id)
		}

		// Resume after the first event: the same later events, same ids.
		resumed := h.stream(t, "bob", seen[0].id)
		for _, w := range seen[1:] {
			ev := next(t, resumed)
			if ev.id != w.id || ev.name != w.name {
				t.Errorf("resumed event %s %s, want %s %s", ev.id, ev.name, w.id, w.name)
			}
		}

		// dave and another tenant saw nothing of it: their first events are
		// their own.
		d := h.call("dave", map[string]any{"thread_id": "dave_t", "tool_call_id": "d1", "action": "flaky.write", "input": map[string]any{}, "wait_seconds": 0})
		ev := next(t, dave)
		want(t, "dave's first event", ev.proposal(t)["id"], d["proposal_id"])
		x := h.call("x_alice", refund("x1", "c_x", 1))
		ev = next(t, eve)
		want(t, "eve's first event", ev.proposal(t)["id"], x["proposal_id"])
		want(t, "eve's tenant", ev.proposal(t)["tenant"], "globex")

		// A bad Last-Event-ID.
		resp := h.must(400, req{method: "GET", path: "/v1/events", token: "bob", header: map[string]string{"Last-Event-ID": "soon"}, invalid: true})
		if code := resp.errorCode(t); code != CodeInvalidCursor {
			t.Errorf("code %s", code)
		}
		h.must(401, req{method: "GET", path: "/v1/events"})
	})
}

// tenantReads counts the store's reads of a tenant's audit log (ListEvents
// without a proposal): what following the tenant costs.
type tenantReads struct {
	store.Store
	n atomic.Int64
}

func (s *tenantReads) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*cstype.Event, error) {
	if p.ProposalID == "" {
		s.n.Add(1)
	}
	return s.Store.ListEvents(ctx, p)
}

// TestEventStreamsShareTheWatcher: idle streams of one tenant cost the store
// one read of the tenant per WaitPoll between them (the engine's watcher),
// not one each, and the watcher still wakes every one of them for a change
// another engine made (which cannot notify them); the streams' own recheck
// is off, and their keep-alives, frequent here, read nothing.
func TestEventStreamsShareTheWatcher(t *testing.T) {
	t.Parallel()
	const poll, streams = 50 * time.Millisecond, 30
	st := &tenantReads{Store: newStore(t, "sqlite", nil)}
	h := newHarness(t, "sqlite", harnessOptions{
		store:  st,
		engine: func(o *countersign.Options) { o.WaitPoll = poll },
		server: func(o *Options) { o.MaxStreamsPerActor = streams },
	})
	h.srv.recheckEvery = time.Hour
	h.srv.keepAliveEvery = poll
	chs := make([]<-chan sseEvent, streams)
	for i := range chs {
		chs[i] = h.stream(t, "bob", "")
	}
	// Every stream has read, delivered and gone idle.
	first := h.pending("sw1", "c_sw1")
	for _, ch := range chs {
		want(t, "id", next(t, ch).proposal(t)["id"], first)
	}
	time.Sleep(4 * poll) // the watcher's own scan of that change woke them once more

	st.n.Store(0)
	began := time.Now()
	time.Sleep(20 * poll)
	reads, elapsed := st.n.Load(), time.Since(began)
	// A ticker fires at most once per period: at most one scan per poll,
	// and one read of the tenant per scan (fewer than a page of events).
	if limit := int64(elapsed/poll) + 2; reads > limit {
		t.Errorf("%d idle streams made %d reads of their tenant in %s, want at most %d (one per WaitPoll)", streams, reads, elapsed, limit)
	}

	other, err := countersign.New(countersign.Options{Store: h.store, Policy: &testPolicy, Actions: testActions(t), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := other.Call(context.Background(), &countersign.Call{
		Identity: identities["alice"], ThreadID: "t1", ToolCallID: "sw2", Action: "payments.refund",
		Input: json.RawMessage(`{"amount":1,"customer":"c_sw2"}`), WaitTimeout: time.Nanosecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range chs {
		want(t, "id", next(t, ch).proposal(t)["id"], res.ProposalID)
	}
}

func idOf(e sseEvent) int64 {
	n, _ := strconv.ParseInt(e.id, 10, 64)
	return n
}

// TestEventStreamWakeAndPoll: the stream wakes on the engine's notification,
// and for changes made by another engine on the same store (which cannot
// notify it) on the engine's watcher, which reads the tenant every WaitPoll
// for all its streams: the stream's own recheck is off in both.
func TestEventStreamWakeAndPoll(t *testing.T) {
	t.Parallel()
	t.Run("wake", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "mem", harnessOptions{})
		h.srv.recheckEvery = time.Hour
		ch := h.stream(t, "bob", "")
		id := h.pending("wk1", "c_wk")
		ev := next(t, ch)
		want(t, "event", ev.name, "proposal.created")
		want(t, "id", ev.proposal(t)["id"], id)
	})
	t.Run("poll", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "sqlite", harnessOptions{})
		h.srv.recheckEvery = time.Hour
		other, err := countersign.New(countersign.Options{Store: h.store, Policy: &testPolicy, Actions: testActions(t), Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		ch := h.stream(t, "bob", "")
		res, err := other.Call(context.Background(), &countersign.Call{
			Identity: identities["alice"], ThreadID: "t1", ToolCallID: "other_1", Action: "payments.refund",
			Input: json.RawMessage(`{"amount":1,"customer":"c_o"}`), WaitTimeout: time.Nanosecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		ev := next(t, ch)
		want(t, "id", ev.proposal(t)["id"], res.ProposalID)
	})
	t.Run("keep-alive", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "mem", harnessOptions{})
		h.srv.keepAliveEvery = 20 * time.Millisecond
		ch := h.stream(t, "bob", "")
		deadline := time.After(5 * time.Second)
		for {
			select {
			case ev := <-ch:
				if ev.comment == ": keep-alive" {
					return
				}
			case <-deadline:
				t.Fatal("no keep-alive comment")
			}
		}
	})
}

// TestSlowHandlersOutliveReadTimeout: long-polls and streams are not cut by
// the server's ReadTimeout (an expiring read deadline would cancel them).
func TestSlowHandlersOutliveReadTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{http: func(s *http.Server) { s.ReadTimeout = 150 * time.Millisecond }})
	id := h.pending("rt1", "c_rt")
	start := time.Now()
	p := h.must(200, req{method: "GET", path: "/v1/proposals/" + id + "?wait_seconds=0.6", token: "bob"}).json(t)
	want(t, "status", p["status"], "pending")
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Errorf("the long-poll answered after %v", el)
	}
	body := refund("rt1", "c_rt", 40)
	body["wait_seconds"] = 0.6
	want(t, "call status", h.call("alice", body)["status"], "pending")

	ch := h.stream(t, "bob", "")
	time.Sleep(400 * time.Millisecond)
	h.decide(200, "bob", id, "reject", nil, nil)
	want(t, "event", next(t, ch).name, "proposal.decided")
}

// TestShutdownEndsStreams: HTTPServer's Shutdown ends open streams rather
// than waiting for them.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "mem", harnessOptions{})
	ch := h.stream(t, "bob", "")
	h.srv.shutdown()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("the stream outlived shutdown")
		}
	}
}

// lateStore hides the first event above after until a read has returned a
// later event, as PostgreSQL may when a transaction that took an event id
// commits after one that took a higher id.
type lateStore struct {
	store.Store
	mu       sync.Mutex
	after    int64 // arm: hide the first event above this id
	armed    bool
	hidden   int64
	overtook bool // a read returned an event above the hidden one
}

func (l *lateStore) ListEvents(ctx context.Context, p *store.ListEventsParams) ([]*cstype.Event, error) {
	evs, err := l.Store.ListEvents(ctx, p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || !l.armed {
		return evs, err
	}
	// The hidden event "commits" on the first read after one that
	// returned a later event.
	hide := !l.overtook
	out := evs[:0:0]
	for _, ev := range evs {
		if l.hidden == 0 && ev.ID > l.after {
			l.hidden = ev.ID
		}
		if ev.ID == l.hidden && hide {
			continue
		}
		if l.hidden != 0 && ev.ID > l.hidden {
			l.overtook = true
		}
		out = append(out, ev)
	}
	return out, nil
}

// TestEventStreamLateCommit: an event that becomes visible after a later
// one was streamed is still delivered, once.
func TestEventStreamLateCommit(t *testing.T) {
	t.Parallel()
	late := &lateStore{Store: memstore.New(nil)}
	h := newHarness(t, "mem", harnessOptions{engine: func(o *countersign.Options) { o.Store = late }})
	ch := h.stream(t, "bob", "")
	evs, err := late.Store.ListEvents(context.Background(), &store.ListEventsParams{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	late.mu.Lock()
	if len(evs) > 0 {
		late.after = evs[len(evs)-1].ID
	}
	late.armed = true
	late.mu.Unlock()

	a := h.pending("late_a", "c_a")
	b := h.pending("late_b", "c_b")
	var got []string
	for range 2 {
		got = append(got, next(t, ch).proposal(t)["id"].(string))
	}
	if len(got) != 2 || got[0] != b || got[1] != a {
		t.Errorf("events for %v, want b (%s) then the late a (%s)", got, b, a)
	}
	// Nothing is delivered twice: the next event is a new one.
	time.Sleep(300 * time.Millisecond)
	c := h.pending("late_c", "c_c")
	want(t, "next event", next(t, ch).proposal(t)["id"], c)
}
