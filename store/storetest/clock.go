package storetest

import (
	"sync"
	"time"
)

// Clock is a fake clock that tests move by hand. It is safe for concurrent
// use, and always answers in UTC without a monotonic reading, as a stored
// time would come back.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads start until it is advanced.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start.UTC().Round(0)}
}

// Now returns the clock's current time. Its method value is what a Factory
// passes to the driver.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
