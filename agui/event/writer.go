package event

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// DefaultWriteTimeout bounds each write and flush of a Writer unless
// WriterOptions.WriteTimeout says otherwise: a client that stops reading
// fails the write instead of holding the run's goroutine.
const DefaultWriteTimeout = 30 * time.Second

// WriterOptions configures a Writer. A nil *WriterOptions means the
// defaults.
type WriterOptions struct {
	// Verifier, when set, checks every event before it is written: an event
	// out of order is not written, and Write returns the *SequenceError.
	// For tests and debugging; the caller owns it and calls its End when
	// the stream is over.
	Verifier *Verifier
	// WriteTimeout bounds each write and flush. Zero means
	// DefaultWriteTimeout; negative means no bound.
	WriteTimeout time.Duration
}

// Writer streams AG-UI events over server-sent events: each event one
// "data: {json}\n\n" frame, flushed as it is written, as AG-UI's HTTP
// binding frames them. The first write (an event or a Ping) sets the
// response's headers: Content-Type text/event-stream, Cache-Control
// no-cache, and X-Accel-Buffering no, which asks a reverse proxy not to
// buffer the stream.
//
// A Writer is not safe for concurrent use: a stream has one goroutine
// writing it, which also sends the heartbeats (selecting between the
// run's events and a ticker). Once a write fails (the client is gone, or
// stopped reading past the write timeout), the stream is broken and every
// later Write and Ping returns the same error.
type Writer struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	verifier *Verifier
	timeout  time.Duration
	started  bool
	err      error  // the first write error: the stream is broken
	buf      []byte // the frame being written, reused
}

// NewWriter returns a Writer that streams to w. Nothing is sent until the
// first Write or Ping, which sends the headers: the handler must not have
// written to w before (extra headers it sets on w beforehand go out too).
func NewWriter(w http.ResponseWriter, opts *WriterOptions) *Writer {
	if opts == nil {
		opts = &WriterOptions{}
	}
	timeout := opts.WriteTimeout
	if timeout == 0 {
		timeout = DefaultWriteTimeout
	}
	return &Writer{w: w, rc: http.NewResponseController(w), verifier: opts.Verifier, timeout: timeout}
}

// Write sends e as one frame and flushes it. An event that does not
// marshal, or that the Verifier rejects, is not sent and leaves the stream
// usable; a failed write or flush breaks it.
func (w *Writer) Write(e Event) error {
	if w.err != nil {
		return w.err
	}
	if isNil(e) {
		return fmt.Errorf("write AG-UI event: nil event")
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("write AG-UI event %s: %w", e.Type(), err)
	}
	if w.verifier != nil {
		if err := w.verifier.Check(e); err != nil {
			return err
		}
	}
	// encoding/json escapes control characters and compacts what a
	// Marshaler returns, so b is one line and the frame one data field.
	w.buf = append(append(append(w.buf[:0], "data: "...), b...), "\n\n"...)
	return w.send(w.buf)
}

// ping is the heartbeat frame: an SSE comment, which consumers ignore.
var ping = []byte(": ping\n\n")

// Ping sends a heartbeat comment (": ping") and flushes it, so that
// proxies and clients do not take a quiet run for a dead connection.
func (w *Writer) Ping() error {
	if w.err != nil {
		return w.err
	}
	return w.send(ping)
}

// send writes frame and flushes it, setting the headers first on the
// stream's first frame.
func (w *Writer) send(frame []byte) error {
	if !w.started {
		w.started = true
		h := w.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	}
	if w.timeout > 0 {
		// Not every ResponseWriter supports deadlines (httptest's does not);
		// without one the write is simply unbounded.
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	}
	if _, err := w.w.Write(frame); err != nil {
		w.err = fmt.Errorf("write AG-UI event stream: %w", err)
		return w.err
	}
	if err := w.rc.Flush(); err != nil {
		w.err = fmt.Errorf("flush AG-UI event stream: %w", err)
		return w.err
	}
	return nil
}
