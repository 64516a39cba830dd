package main

import (
	"context"
	"testing"
	"time"
)

// useB8Sizes sets B8's sizes for one test.
func useB8Sizes(t *testing.T, s connectionSizes) {
	t.Helper()
	old := b8Sizes
	b8Sizes = s
	t.Cleanup(func() { b8Sizes = old })
}

// tinyB8 are sizes that only show B8 works: the figures mean nothing.
var tinyB8 = connectionSizes{LongPolls: 60, Streams: 6, Tenants: 3, Idle: 200 * time.Millisecond}

// TestRetryLater checks which answers B8 repeats, and after how long.
func TestRetryLater(t *testing.T) {
	for _, c := range []struct {
		err  error
		want time.Duration
		ok   bool
	}{
		{&statusError{code: 503, retryAfter: "2"}, 2 * time.Second, true},
		{&statusError{code: 429, retryAfter: ""}, time.Second, true},
		{&statusError{code: 500, retryAfter: "1"}, 0, false},
		{&statusError{code: 400}, 0, false},
		{context.Canceled, 0, false},
	} {
		if d, ok := retryLater(c.err); d != c.want || ok != c.ok {
			t.Errorf("retryLater(%v) = %v, %v; want %v, %v", c.err, d, ok, c.want, c.ok)
		}
	}
}
