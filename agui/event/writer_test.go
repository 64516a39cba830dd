package event

import (
	"bufio"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// textRun is a short valid run: a text message, then RUN_FINISHED.
func textRun() []Event {
	return []Event{
		&RunStarted{ThreadID: "t1", RunID: "run_1", ProtocolVersion: ProtocolVersion},
		&TextMessageStart{MessageID: "msg_1", Role: RoleAssistant},
		&TextMessageContent{MessageID: "msg_1", Delta: "Hello."},
		&TextMessageEnd{MessageID: "msg_1"},
		&RunFinished{ThreadID: "t1", RunID: "run_1"},
	}
}

func TestWriterFramesAndHeaders(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := NewWriter(rec, nil)
	if len(rec.Header()) != 0 || rec.Flushed {
		t.Fatalf("NewWriter touched the response: headers %v, flushed %v", rec.Header(), rec.Flushed)
	}
	for _, e := range textRun() {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"X-Accel-Buffering": "no",
	} {
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if rec.Code != http.StatusOK || !rec.Flushed {
		t.Errorf("status %d, flushed %v", rec.Code, rec.Flushed)
	}
	want := `data: {"type":"RUN_STARTED","threadId":"t1","runId":"run_1","protocolVersion":"1.0"}

data: {"type":"TEXT_MESSAGE_START","messageId":"msg_1","role":"assistant"}

data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_1","delta":"Hello."}

data: {"type":"TEXT_MESSAGE_END","messageId":"msg_1"}

data: {"type":"RUN_FINISHED","threadId":"t1","runId":"run_1"}

`
	if got := rec.Body.String(); got != want {
		t.Errorf("body:\n%s\nwant:\n%s", got, want)
	}
}

// Each frame is flushed as it is written, not when the handler returns.
func TestWriterFlushesEachFrame(t *testing.T) {
	t.Parallel()
	fw := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	w := NewWriter(fw, nil)
	for i, e := range textRun()[:3] {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
		if fw.flushes != i+1 || fw.unflushed != 0 {
			t.Fatalf("after frame %d: %d flushes, %d bytes unflushed", i, fw.flushes, fw.unflushed)
		}
	}
	if err := w.Ping(); err != nil {
		t.Fatal(err)
	}
	if fw.flushes != 4 {
		t.Errorf("the ping was not flushed: %d flushes", fw.flushes)
	}
}

func TestWriterPing(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := NewWriter(rec, nil)
	if err := w.Ping(); err != nil {
		t.Fatal(err)
	}
	if rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Errorf("a first ping did not set the headers: %v", rec.Header())
	}
	if err := w.Write(textRun()[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Ping(); err != nil {
		t.Fatal(err)
	}
	body := rec.Body.String()
	if !strings.HasPrefix(body, ": ping\n\ndata: {") || !strings.HasSuffix(body, "}\n\n: ping\n\n") {
		t.Errorf("body %q", body)
	}
	// The heartbeats are comments: a reader sees only the event.
	events, err := Decode(strings.NewReader(body))
	if err != nil || len(events) != 1 {
		t.Errorf("decoded %d events (err %v), want 1", len(events), err)
	}
}

func TestWriterVerifies(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	v := new(Verifier)
	w := NewWriter(rec, &WriterOptions{Verifier: v})

	// Out of order: rejected, nothing written, not even the headers.
	err := w.Write(&TextMessageStart{MessageID: "msg_1"})
	var se *SequenceError
	if !errors.As(err, &se) || se.Index != 0 || !strings.Contains(se.Reason, "must begin with RUN_STARTED") {
		t.Fatalf("Write before RUN_STARTED: %v", err)
	}
	if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Fatalf("a rejected event was written: %q %v", rec.Body, rec.Header())
	}
	// The stream is still usable.
	for _, e := range textRun() {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.End(); err != nil {
		t.Error(err)
	}
	if err := w.Write(&TextMessageEnd{MessageID: "msg_1"}); !errors.As(err, &se) {
		t.Errorf("Write after RUN_FINISHED: %v", err)
	}
	events, err := Decode(rec.Body)
	if err != nil || len(events) != len(textRun()) {
		t.Errorf("the stream holds %d events (err %v), want %d", len(events), err, len(textRun()))
	}
}

// An event that does not marshal is not written, and the stream goes on.
func TestWriterMarshalError(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	v := new(Verifier)
	w := NewWriter(rec, &WriterOptions{Verifier: v})
	if err := w.Write(&Custom{Name: "x", Value: make(chan int)}); err == nil {
		t.Fatal("a channel marshalled")
	}
	if err := w.Write((*RunStarted)(nil)); err == nil {
		t.Fatal("a nil event was written")
	}
	if err := w.Write(nil); err == nil {
		t.Fatal("a nil event was written")
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("written: %q", rec.Body)
	}
	// Nor did the Verifier count them: RUN_STARTED may still come first.
	if err := w.Write(textRun()[0]); err != nil {
		t.Fatal(err)
	}
}

// A failed write breaks the stream: that error, and every later one.
func TestWriterWriteError(t *testing.T) {
	t.Parallel()
	gone := errors.New("connection reset")
	for _, c := range []struct {
		name string
		rw   http.ResponseWriter
		want error
	}{
		{"write", &failingWriter{ResponseRecorder: httptest.NewRecorder(), err: gone}, gone},
		{"flush", unflushable{httptest.NewRecorder()}, http.ErrNotSupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := NewWriter(c.rw, nil)
			err := w.Write(textRun()[0])
			if !errors.Is(err, c.want) {
				t.Fatalf("Write: %v, want %v", err, c.want)
			}
			if again := w.Write(textRun()[1]); again != err {
				t.Errorf("second Write: %v, want %v", again, err)
			}
			if again := w.Ping(); again != err {
				t.Errorf("Ping: %v, want %v", again, err)
			}
		})
	}
}

// Over a real connection: the client reads each event as it is flushed,
// while the handler is still running, and a client that goes away makes
// Write fail.
func TestWriterOverHTTP(t *testing.T) {
	t.Parallel()
	next := make(chan Event)
	result := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := NewWriter(rw, &WriterOptions{WriteTimeout: time.Minute})
		if err := w.Write(textRun()[0]); err != nil {
			result <- err
			return
		}
		for e := range next {
			if err := w.Write(e); err != nil {
				result <- err
				return
			}
		}
		// The client is gone: write until the connection says so.
		for {
			if err := w.Ping(); err != nil {
				result <- err
				return
			}
		}
	}))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := readFrame(br); err != nil {
		t.Fatal(err)
	}
	for _, e := range textRun()[1:3] {
		next <- e
		frame, err := readFrame(br)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(strings.NewReader(frame))
		if err != nil || len(got) != 1 || got[0].Type() != e.Type() {
			t.Fatalf("frame %q: %v %v", frame, got, err)
		}
	}
	resp.Body.Close()
	close(next)
	select {
	case err := <-result:
		if err == nil {
			t.Error("Write to a closed connection succeeded")
		}
	case <-time.After(hangGuard):
		t.Fatal("Write never noticed the client left")
	}
}

// hangGuard bounds a wait only so that a broken test fails instead of
// hanging; nothing is asserted about time.
const hangGuard = 2 * time.Minute

// readFrame reads up to and including the blank line that ends a frame.
func readFrame(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\n" {
			return b.String(), nil
		}
	}
}

// flushCounter counts flushes and the bytes written since the last one.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes, unflushed int
}

func (f *flushCounter) Write(b []byte) (int, error) {
	f.unflushed += len(b)
	return f.ResponseRecorder.Write(b)
}

func (f *flushCounter) Flush() {
	f.flushes++
	f.unflushed = 0
	f.ResponseRecorder.Flush()
}

// failingWriter fails every write with err.
type failingWriter struct {
	*httptest.ResponseRecorder
	err error
}

func (f *failingWriter) Write([]byte) (int, error) { return 0, f.err }

// unflushable is a ResponseWriter that cannot flush.
type unflushable struct{ rec *httptest.ResponseRecorder }

func (u unflushable) Header() http.Header         { return u.rec.Header() }
func (u unflushable) Write(b []byte) (int, error) { return u.rec.Write(b) }
func (u unflushable) WriteHeader(code int)        { u.rec.WriteHeader(code) }
