package web

import (
	"net/netip"
	"sync"
	"time"
)

// limiter is a token bucket per client: each client may try burst sign-ins
// at once, and one more every interval. It lives in memory: a restart
// forgets it, which costs an attacker a burst, not a key.
type limiter struct {
	burst    float64
	interval time.Duration
	now      func() time.Time
	max      int // clients tracked

	mu      sync.Mutex
	buckets map[netip.Prefix]*bucket
	swept   time.Time
	// overflow is the bucket every client shares once max clients are
	// tracked and none can be forgotten: memory stays bounded, and so do
	// the sign-ins of an attacker with many addresses.
	overflow bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(burst int, interval time.Duration, maxClients int, now func() time.Time) *limiter {
	return &limiter{
		burst: float64(burst), interval: interval, now: now, max: maxClients,
		buckets: map[netip.Prefix]*bucket{}, overflow: bucket{tokens: float64(burst), at: now()},
	}
}

// allow takes one attempt from client's bucket. When it is empty, it
// answers false and how long until the next attempt is allowed.
func (l *limiter) allow(client netip.Prefix) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[client]
	if !ok {
		if len(l.buckets) >= l.max {
			l.sweep(now)
		}
		if len(l.buckets) >= l.max {
			b = &l.overflow
		} else {
			b = &bucket{tokens: l.burst, at: now}
			l.buckets[client] = b
		}
	}
	b.refill(now, l.burst, l.interval)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) * float64(l.interval))
}

// sweep forgets the clients whose buckets are full again, which are as
// good as new; at most once an interval, so that a full table costs one
// pass per interval, not one per attempt.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < l.interval {
		return
	}
	l.swept = now
	for k, b := range l.buckets {
		b.refill(now, l.burst, l.interval)
		if b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
}

func (b *bucket) refill(now time.Time, burst float64, interval time.Duration) {
	if elapsed := now.Sub(b.at); elapsed > 0 {
		b.tokens = min(burst, b.tokens+float64(elapsed)/float64(interval))
		b.at = now
	}
}
