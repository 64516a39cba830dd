package web

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// TestLimiterBounded checks that the limiter tracks at most its maximum of
// clients: beyond it, new clients share one bucket, and clients whose
// buckets are full again are forgotten to make room.
func TestLimiterBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	l := newLimiter(1, time.Minute, 2, func() time.Time { return now })
	a, b, c, d := netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("192.0.2.2/32"),
		netip.MustParsePrefix("192.0.2.3/32"), netip.MustParsePrefix("192.0.2.4/32")
	for _, p := range []netip.Prefix{a, b} {
		if ok, _ := l.allow(p); !ok {
			t.Fatalf("%v: first attempt refused", p)
		}
	}
	if ok, _ := l.allow(c); !ok {
		t.Fatal("the first client beyond the table: refused, want the shared bucket's attempt")
	}
	if ok, wait := l.allow(d); ok || wait != time.Minute {
		t.Fatalf("the second client beyond the table: %v, wait %v; want refused for a minute", ok, wait)
	}
	if len(l.buckets) != 2 {
		t.Fatalf("%d clients tracked, want 2", len(l.buckets))
	}
	now = now.Add(time.Minute)
	// a and b are full again: forgotten, and d gets a bucket of its own.
	if ok, _ := l.allow(d); !ok {
		t.Fatal("after the interval, a new client was refused")
	}
	if _, tracked := l.buckets[d]; !tracked || len(l.buckets) != 1 {
		t.Fatalf("after the sweep: %d tracked (d: %v), want d alone", len(l.buckets), tracked)
	}
}

// TestLimiterRace takes attempts from many goroutines: exactly the burst
// is allowed.
func TestLimiterRace(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	l := newLimiter(25, time.Hour, 100, func() time.Time { return now })
	client := netip.MustParsePrefix("192.0.2.1/32")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		allowed int
	)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := l.allow(client); ok {
				mu.Lock()
				allowed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if allowed != 25 {
		t.Fatalf("%d attempts allowed, want the burst of 25", allowed)
	}
}
