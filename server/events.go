package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store"
)

// streamName maps an audit event to the stream's event name, or "" for the
// audit-only events (claims, retries). Cancellations and operator
// resolutions settle a proposal, so the stream calls them settled.
func streamName(t store.EventType) string {
	switch t {
	case store.EventCreated, store.EventDecided, store.EventSettled, store.EventExpired, store.EventSuperseded:
		return string(t)
	case store.EventCancelled, store.EventResolved:
		return string(store.EventSettled)
	}
	return ""
}

const (
	// eventPage is how many audit events the stream reads at once.
	eventPage = 500
	// eventWriteTimeout bounds writing one event to a slow client.
	eventWriteTimeout = 30 * time.Second
	// ownerCacheSize bounds a stream's cache of thread owners.
	ownerCacheSize = 4096
	// rereadWindow is how far back in time a stream re-reads the audit
	// events. Event ids grow in insertion order, which across concurrent
	// transactions (PostgreSQL) is not quite commit order: an event may
	// become visible after one with a higher id was read.
	rereadWindow = 5 * time.Second
)

// handleEvents streams the tenant's proposal events that the caller may see.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	var last int64
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return newError(http.StatusBadRequest, CodeInvalidCursor, "Last-Event-ID: want an event id from this stream")
		}
		last = n
	} else {
		n, err := s.eventTail(ctx, id.Tenant)
		if err != nil {
			return err
		}
		last = n
	}
	// Subscribe before the first read, so that no change falls between them.
	wake, unsubscribe := s.engine.Subscribe()
	defer unsubscribe()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // ask reverse proxies not to buffer
	w.WriteHeader(http.StatusOK)
	st := &stream{s: s, w: w, rc: rc, id: id, owners: map[string]string{}, floor: last, sent: map[int64]bool{}}
	if err := st.write("retry: 2000\n\n"); err != nil {
		return nil
	}
	poll := time.NewTicker(s.pollEvery)
	defer poll.Stop()
	keepAlive := time.NewTicker(s.keepAliveEvery)
	defer keepAlive.Stop()
	for {
		err := st.drain(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, errClientGone) {
				return nil
			}
			// The store failed: log it and try again at the next tick.
			s.log.LogAttrs(ctx, slog.LevelWarn, "event stream: read events", slog.String("tenant", id.Tenant), slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-poll.C:
		case <-keepAlive.C:
			if st.write(": keep-alive\n\n") != nil {
				return nil
			}
		}
	}
}

var errClientGone = errors.New("client gone")

// stream is one client's event stream.
type stream struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	id     countersign.Identity
	owners map[string]string // thread → owner ("" when the thread is gone)

	// floor is the position reads start after: where the stream was
	// rereadWindow ago (or where it began). sent holds the ids above it that
	// were already read, so a re-read delivers only late-committed events.
	floor int64
	sent  map[int64]bool
	marks []mark // positions reached, oldest first, within rereadWindow
}

// mark is the highest event id a stream had read at a time.
type mark struct {
	at   time.Time
	last int64
}

// write sends text and flushes it, with a deadline against stuck clients.
func (st *stream) write(text string) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
	if _, err := st.w.Write([]byte(text)); err != nil {
		return errClientGone
	}
	if err := st.rc.Flush(); err != nil {
		return errClientGone
	}
	return nil
}

// drain sends every event above the floor that was not sent yet and that
// the caller may see, then moves the floor to where the stream was
// rereadWindow ago.
func (st *stream) drain(ctx context.Context) error {
	after, high := st.floor, st.floor
	for {
		evs, err := st.s.store.ListEvents(ctx, &store.ListEventsParams{Tenant: st.id.Tenant, AfterID: after, Limit: eventPage})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if !st.sent[ev.ID] {
				if err := st.send(ctx, ev); err != nil {
					return err
				}
				st.sent[ev.ID] = true
			}
			after, high = ev.ID, max(high, ev.ID)
		}
		if len(evs) < eventPage {
			break
		}
	}
	now := time.Now()
	if n := len(st.marks); n == 0 || st.marks[n-1].last < high {
		st.marks = append(st.marks, mark{at: now, last: high})
	}
	// Positions older than the window become the floor.
	for len(st.marks) > 0 && now.Sub(st.marks[0].at) > rereadWindow {
		st.floor = max(st.floor, st.marks[0].last)
		st.marks = st.marks[1:]
	}
	for id := range st.sent {
		if id <= st.floor {
			delete(st.sent, id)
		}
	}
	return nil
}

// send writes one event if it is streamed and visible to the caller.
func (st *stream) send(ctx context.Context, ev *store.Event) error {
	name := streamName(ev.Type)
	if name == "" || ev.Tenant != st.id.Tenant {
		return nil
	}
	p, err := st.s.store.GetProposal(ctx, &store.GetProposalParams{Tenant: st.id.Tenant, ID: ev.ProposalID})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	owner, ok := st.owners[p.ThreadID]
	if !ok {
		t, err := st.s.store.GetThread(ctx, &store.GetThreadParams{Tenant: p.Tenant, ID: p.ThreadID})
		switch {
		case err == nil:
			owner = t.Owner
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if len(st.owners) >= ownerCacheSize {
			clear(st.owners)
		}
		st.owners[p.ThreadID] = owner
	}
	if !store.CanSee(p, owner, visibility(st.id)) {
		return nil
	}
	data, err := json.Marshal(wireProposal(p))
	if err != nil {
		return fmt.Errorf("encode proposal %s: %w", p.ID, err)
	}
	return st.write(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", ev.ID, name, data))
}

// eventTail returns the tenant's latest audit event id, so that a stream
// without Last-Event-ID starts now. The store can only list forwards, so the
// first stream of a tenant in this process reads its history once; later
// ones start from the cached tail.
func (s *Server) eventTail(ctx context.Context, tenant string) (int64, error) {
	s.tailsMu.Lock()
	last := s.tails[tenant]
	s.tailsMu.Unlock()
	const page = 1000
	for {
		evs, err := s.store.ListEvents(ctx, &store.ListEventsParams{Tenant: tenant, AfterID: last, Limit: page})
		if err != nil {
			return 0, fmt.Errorf("event stream: find the latest event: %w", err)
		}
		if len(evs) > 0 {
			last = evs[len(evs)-1].ID
		}
		if len(evs) < page {
			break
		}
	}
	s.tailsMu.Lock()
	s.tails[tenant] = max(s.tails[tenant], last)
	s.tailsMu.Unlock()
	return last, nil
}
