package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// streamName maps an audit event to the stream's event name, or "" for the
// audit-only events (claims, retries). Cancellations and operator
// resolutions settle a proposal, so the stream calls them settled.
func streamName(t cstype.EventType) string {
	switch t {
	case cstype.EventCreated, cstype.EventDecided, cstype.EventSettled, cstype.EventExpired, cstype.EventSuperseded:
		return string(t)
	case cstype.EventCancelled, cstype.EventResolved:
		return string(cstype.EventSettled)
	}
	return ""
}

const (
	// eventPage is how many events the stream takes from its feed at once.
	eventPage = 500
	// eventWriteTimeout bounds writing one event to a slow client.
	eventWriteTimeout = 30 * time.Second
)

// handleEvents streams the tenant's proposal events that the caller may see.
// The engine's feed decides what that is, hands out each event once (late
// commits included) and pages through history once for a stream that
// resumes from an old position.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, id countersign.Identity) error {
	// The limit comes first: a refused stream costs no store read.
	key := actorKey{id.Tenant, id.Actor}
	if !s.streams.acquire(key) {
		return errTooManyStreams(s.streams.max)
	}
	defer s.streams.release(key)
	ctx, cancel := s.guardStream(r, id)
	defer cancel()
	after := countersign.FeedFromNow
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return errEventCursor()
		}
		after = n
	}
	feed, err := s.engine.Feed(ctx, id, after)
	switch {
	case errors.Is(err, cstype.ErrInvalidCursor):
		return errEventCursor()
	case err != nil:
		return err
	}
	defer feed.Close()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // ask reverse proxies not to buffer
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w, rc: rc}
	if err := st.write("retry: 2000\n\n"); err != nil {
		return nil
	}
	// The feed's Changes wake the stream for this process's changes, the
	// store's notifications and the engine's watcher (which reads each
	// followed tenant once per WaitPoll, for all its streams): the stream
	// reads on its own only after a failed read, and now and then as a last
	// resort (at a random phase, so that streams opened together do not
	// read together).
	recheck := time.NewTicker(s.recheckEvery/2 + rand.N(s.recheckEvery/2+1))
	defer recheck.Stop()
	keepAlive := time.NewTicker(s.keepAliveEvery)
	defer keepAlive.Stop()
	outage := false            // the store could not be reached at the last drain
	read := true               // false after a keep-alive: nothing asked for a read
	var retry <-chan time.Time // nil: no failed read to retry
	for {
		if read {
			err := st.drain(ctx, feed)
			retry = nil
			switch {
			case err == nil:
				outage = false
			case ctx.Err() != nil || errors.Is(err, errClientGone):
				return nil
			case errors.Is(err, cstype.ErrUnavailable) && outage:
				// Logged when the outage began; the stream holds on.
				retry = time.After(s.retryEvery)
			default:
				// The store failed: log it and try again shortly.
				outage = errors.Is(err, cstype.ErrUnavailable)
				s.log.LogAttrs(ctx, slog.LevelWarn, "event stream: read events", slog.String("tenant", id.Tenant), slog.Any("err", err))
				retry = time.After(s.retryEvery)
			}
		}
		read = true
		select {
		case <-ctx.Done():
			return nil
		case <-feed.Changes():
		case <-retry:
		case <-recheck.C:
		case <-keepAlive.C:
			if st.write(": keep-alive\n\n") != nil {
				return nil
			}
			read = false
		}
	}
}

// streamRecheck bounds how long an event stream goes without reading its
// feed when nothing wakes it (each stream's period is drawn between half of
// it and all of it): a last resort, since the engine's watcher wakes it for
// every change it finds.
const streamRecheck = 30 * time.Second

// errEventCursor is the 400 of a Last-Event-ID this store never issued
// (malformed, or ahead of the newest event): the client reconnects without
// it rather than wait in silence.
func errEventCursor() *apiError {
	return newError(http.StatusBadRequest, CodeInvalidCursor, "Last-Event-ID: want an event id from this stream")
}

var errClientGone = errors.New("client gone")

// stream is one client's event stream.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
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

// drain sends whatever the feed has that the stream names, until the feed
// has nothing more.
func (st *stream) drain(ctx context.Context, feed *countersign.Feed) error {
	for {
		evs, err := feed.Next(ctx, eventPage)
		for _, fe := range evs {
			if werr := st.send(fe); werr != nil {
				return werr
			}
		}
		if err != nil || len(evs) == 0 {
			return err
		}
	}
}

// send writes one event, unless it is audit-only.
func (st *stream) send(fe countersign.FeedEvent) error {
	name := streamName(fe.Event.Type)
	if name == "" {
		return nil
	}
	data, err := json.Marshal(wireProposal(fe.Proposal))
	if err != nil {
		return fmt.Errorf("encode proposal %s: %w", fe.Proposal.ID, err)
	}
	return st.write(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", fe.Event.ID, name, data))
}
