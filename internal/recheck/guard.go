package recheck

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Guard holds open streams by key K, each with a value V its round judges
// it by (the identity a token opened it for). It is safe for concurrent
// use; the zero Guard is not: use New.
type Guard[K comparable, V any] struct {
	round func(keys []K)

	mu      sync.Mutex
	period  time.Duration
	streams map[K][]*stream[V]
	running bool
	// emptied wakes the goroutine when the last stream is removed, so
	// that it ends then rather than at its next round.
	emptied chan struct{}
}

type stream[V any] struct {
	v   V
	end func()
}

// New returns a Guard that calls round every period, while it holds any
// stream, with the keys it holds (each once, in no order). round runs on
// the Guard's goroutine, one call at a time; it ends streams with End.
func New[K comparable, V any](period time.Duration, round func(keys []K)) *Guard[K, V] {
	return &Guard[K, V]{round: round, period: period, streams: map[K][]*stream[V]{}, emptied: make(chan struct{}, 1)}
}

// SetPeriod changes the period from the next time the goroutine starts
// (tests shorten it before opening streams).
func (g *Guard[K, V]) SetPeriod(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.period = d
}

// Add guards a stream under key: end ends it, and v is what End's match
// judges it by. It returns the func that removes it, which the stream
// calls when it ends, whatever ended it; calling it twice is harmless.
func (g *Guard[K, V]) Add(key K, v V, end func()) (remove func()) {
	s := &stream[V]{v: v, end: end}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.streams[key] = append(g.streams[key], s)
	if !g.running {
		g.running = true
		go g.loop(g.period)
	}
	return func() { g.remove(key, s) }
}

func (g *Guard[K, V]) remove(key K, s *stream[V]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	set := g.streams[key]
	i := slices.Index(set, s)
	if i < 0 {
		return
	}
	set[i] = set[len(set)-1]
	set[len(set)-1] = nil
	set = set[:len(set)-1]
	if len(set) == 0 {
		delete(g.streams, key)
	} else {
		g.streams[key] = set
	}
	if len(g.streams) == 0 && g.running {
		select {
		case g.emptied <- struct{}{}:
		default:
		}
	}
}

// End ends the streams under key whose value match accepts (all of them
// when match is nil). Each stream's end runs without the Guard's lock.
func (g *Guard[K, V]) End(key K, match func(V) bool) {
	g.mu.Lock()
	var ended []func()
	for _, s := range g.streams[key] {
		if match == nil || match(s.v) {
			ended = append(ended, s.end)
		}
	}
	g.mu.Unlock()
	for _, end := range ended {
		end()
	}
}

// Running reports whether the goroutine runs, and how many keys the Guard
// holds.
func (g *Guard[K, V]) Running() (running bool, keys int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, len(g.streams)
}

// keys returns the keys held now; ok is false, and the goroutine must end,
// when there are none.
func (g *Guard[K, V]) keys() (keys []K, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.streams) == 0 {
		g.running = false
		return nil, false
	}
	return slices.Collect(maps.Keys(g.streams)), true
}

func (g *Guard[K, V]) loop(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-g.emptied:
		}
		keys, ok := g.keys()
		if !ok {
			return
		}
		g.round(keys)
	}
}
