package maintenance

import (
	"errors"
	"log/slog"
	"time"

	"github.com/countersign/countersign/store"
)

// Pacing of a loop while the store cannot be reached.
const (
	// OutageBackoffMin is the first pause after a failure.
	OutageBackoffMin = 100 * time.Millisecond
	// OutageBackoffMax caps the pause: the store's return is noticed
	// within this long.
	OutageBackoffMax = 2 * time.Second
)

// Outage follows one background loop through the store's outages: the
// first failure that says the store cannot be reached (store.ErrUnavailable)
// is logged once, the loop then backs off, doubling its pause up to
// OutageBackoffMax, and the first success after it is logged once too.
// Errors of other kinds are not an outage: they are the caller's to log,
// each time. Every service's loop keeps one, and so does the worker's claim
// loop. It is not safe for concurrent use.
type Outage struct {
	// Log receives the two lines of an outage. Required.
	Log *slog.Logger
	// What names the loop in the log: "worker", "expiry", "sealer", …
	What string

	since time.Time
	pause time.Duration
	fails int
}

// Failed records a failure and reports whether it is an outage; then wait
// is how long the loop pauses before it tries again.
func (o *Outage) Failed(err error) (wait time.Duration, isOutage bool) {
	if !errors.Is(err, store.ErrUnavailable) {
		return 0, false
	}
	o.fails++
	if o.pause == 0 {
		o.since = time.Now()
		o.pause = OutageBackoffMin
		o.Log.Warn("the store cannot be reached; backing off until it is back",
			"loop", o.What, "err", err, "max_backoff", OutageBackoffMax)
	} else {
		o.pause = min(2*o.pause, OutageBackoffMax)
	}
	return o.pause, true
}

// OK records a success, ending the outage if there was one.
func (o *Outage) OK() {
	if o.pause == 0 {
		return
	}
	o.Log.Info("the store is reachable again", "loop", o.What,
		"outage", time.Since(o.since).Round(time.Millisecond), "failed_attempts", o.fails)
	o.pause, o.fails = 0, 0
}

// Down reports whether the loop is in an outage: its last attempt failed
// with store.ErrUnavailable and none has succeeded since.
func (o *Outage) Down() bool { return o.pause != 0 }
