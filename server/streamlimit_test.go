package server

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"
)

// openStream opens GET /v1/events as token and returns the status, the
// Retry-After header and a function that closes the stream.
func (h *harness) openStream(t *testing.T, token string) (int, string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := http.NewRequestWithContext(ctx, "GET", h.url+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.client.Do(r)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	closeIt := func() { cancel(); resp.Body.Close() }
	if resp.StatusCode != http.StatusOK {
		closeIt()
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), closeIt
}

// TestEventStreamsPerActorLimited opens more streams for one actor than the
// limit, concurrently: exactly the limit are served, the rest answer 429
// with Retry-After; other actors (and the same actor name in another
// tenant) are not affected; a closed stream frees its place.
func TestEventStreamsPerActorLimited(t *testing.T) {
	t.Parallel()
	const limit, tries = 3, 12
	h := newHarness(t, "mem", harnessOptions{server: func(o *Options) { o.MaxStreamsPerActor = limit }})
	var mu sync.Mutex
	var closers []func()
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for range tries {
		wg.Go(func() {
			status, retry, closeIt := h.openStream(t, "alice")
			mu.Lock()
			defer mu.Unlock()
			statuses[status]++
			if status == http.StatusOK {
				closers = append(closers, closeIt)
			} else if retry == "" {
				t.Errorf("429 without Retry-After")
			}
		})
	}
	wg.Wait()
	if statuses[http.StatusOK] != limit || statuses[http.StatusTooManyRequests] != tries-limit {
		t.Fatalf("statuses %v, want %d × 200 and %d × 429", statuses, limit, tries-limit)
	}
	resp := h.do(req{method: "GET", path: "/v1/events", token: "alice"})
	if resp.status != http.StatusTooManyRequests || resp.errorCode(t) != CodeTooManyRequests {
		t.Fatalf("one more stream: %d %s", resp.status, resp.body)
	}
	// Others stream regardless.
	for _, tok := range []string{"bob", "x_alice"} {
		if status, _, closeIt := h.openStream(t, tok); status != http.StatusOK {
			t.Errorf("%s's stream: %d", tok, status)
		} else {
			defer closeIt()
		}
	}
	// Closing one frees its place once the server has seen the client go.
	closers[0]()
	key := actorKey{"acme", "alice"}
	for h.srv.streams.held(key) == limit {
		time.Sleep(5 * time.Millisecond)
	}
	status, _, closeIt := h.openStream(t, "alice")
	if status != http.StatusOK {
		t.Fatalf("after closing one: %d", status)
	}
	closeIt()
	for _, c := range closers[1:] {
		c()
	}
	for h.srv.streams.held(key) != 0 {
		time.Sleep(5 * time.Millisecond)
	}
}
