package countersign

import (
	"errors"
	"log/slog"
	"time"

	"github.com/countersign/countersign/store"
)

// Pacing of the background loops (the worker's claims, the sweeper, the
// sealer) while the store cannot be reached.
const (
	// outageBackoffMin is the first pause after a failure.
	outageBackoffMin = 100 * time.Millisecond
	// outageBackoffMax caps the pause: the store's return is noticed
	// within this long.
	outageBackoffMax = 2 * time.Second
)

// outage follows one background loop through the store's outages: the
// first failure that says the store cannot be reached (store.ErrUnavailable)
// is logged once, the loop then backs off, doubling its pause up to
// outageBackoffMax, and the first success after it is logged once too. Errors
// of other kinds are not an outage: they are the caller's to log, each time.
// The zero outage is ready; it is not safe for concurrent use.
type outage struct {
	log   *slog.Logger
	what  string // the loop, for the log: "worker", "sweeper", "sealer"
	since time.Time
	pause time.Duration
	fails int
}

// failed records a failure and reports whether it is an outage; then wait
// is how long the loop pauses before it tries again.
func (o *outage) failed(err error) (wait time.Duration, isOutage bool) {
	if !errors.Is(err, store.ErrUnavailable) {
		return 0, false
	}
	o.fails++
	if o.pause == 0 {
		o.since = time.Now()
		o.pause = outageBackoffMin
		o.log.Warn("the store cannot be reached; backing off until it is back",
			"loop", o.what, "err", err, "max_backoff", outageBackoffMax)
	} else {
		o.pause = min(2*o.pause, outageBackoffMax)
	}
	return o.pause, true
}

// ok records a success, ending the outage if there was one.
func (o *outage) ok() {
	if o.pause == 0 {
		return
	}
	o.log.Info("the store is reachable again", "loop", o.what,
		"outage", time.Since(o.since).Round(time.Millisecond), "failed_attempts", o.fails)
	o.pause, o.fails = 0, 0
}
