package main

import "testing"

// useB8Sizes sets B8's sizes for one test.
func useB8Sizes(t *testing.T, s connectionSizes) {
	t.Helper()
	old := b8Sizes
	b8Sizes = s
	t.Cleanup(func() { b8Sizes = old })
}

// tinyB8 are sizes that only show B8 works: the figures mean nothing.
var tinyB8 = connectionSizes{LongPolls: 60, Streams: 6, Tenants: 3}
