package server

import (
	"strconv"
	"sync"
)

// DefaultMaxStreamsPerActor is how many event streams one actor may hold
// open at once in one process when Options.MaxStreamsPerActor is 0.
const DefaultMaxStreamsPerActor = 8

// streamRetryAfter is the Retry-After, in seconds, of a refused stream: about
// as long as a browser tab takes to close its old stream and open a new one.
const streamRetryAfter = 5

// actorKey names one actor of one tenant.
type actorKey struct{ tenant, actor string }

// streamLimit counts the open event streams of each actor (tenant and actor),
// so that one token cannot hold unbounded streams, each a goroutine and a
// connection that reads the tenant's events.
type streamLimit struct {
	max  int
	mu   sync.Mutex
	open map[actorKey]int
}

func newStreamLimit(limit int) *streamLimit {
	return &streamLimit{max: limit, open: map[actorKey]int{}}
}

// acquire takes one of key's streams, or reports false when key holds max.
// Each successful acquire must be followed by one release.
func (l *streamLimit) acquire(key actorKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= l.max {
		return false
	}
	l.open[key]++
	return true
}

func (l *streamLimit) release(key actorKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key) // keep the map as small as the actors streaming now
	}
}

// held is how many streams key holds.
func (l *streamLimit) held(key actorKey) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[key]
}

// errTooManyStreams is the 429 of an actor over its limit.
func errTooManyStreams(limit int) *apiError {
	e := newError(429, CodeTooManyRequests,
		"you hold %d event streams, as many as an actor may: close one, or retry after %d seconds", limit, streamRetryAfter)
	e.header = map[string][]string{"Retry-After": {strconv.Itoa(streamRetryAfter)}}
	return e
}
