package maintenance_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/internal/testlog"
	"github.com/countersign/countersign/store"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testlog.Buffer

// flaky fails its first calls as script says, then succeeds; each call is
// sent on calls.
type flaky struct {
	script []error
	calls  chan time.Time

	mu sync.Mutex
	n  int
}

func (f *flaky) ExpireDue(context.Context, *store.ExpireDueParams) ([]*store.Proposal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls <- time.Now()
	f.n++
	if f.n <= len(f.script) {
		return nil, f.script[f.n-1]
	}
	return nil, nil
}

// TestLoopBacksOffThroughAnOutage: a service whose store cannot be reached
// logs the outage once, waits 100ms, 200ms, 400ms between its tries instead
// of its 1ms interval, logs the return once, and then keeps its interval; a
// failure of another kind is logged each time and does not slow it down.
func TestLoopBacksOffThroughAnOutage(t *testing.T) {
	t.Parallel()
	f := &flaky{script: []error{errDown, errDown, errDown, errors.New("syntax error"), errors.New("syntax error")},
		calls: make(chan time.Time, 100)}
	var logs syncBuffer
	s := maintenance.NewExpiry(f, func(context.Context, *store.Proposal, store.Status) {},
		maintenance.SweepConfig{Interval: time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	start(t, s)
	var at []time.Time
	for len(at) < 8 {
		select {
		case c := <-f.calls:
			at = append(at, c)
		case <-time.After(30 * time.Second):
			t.Fatalf("%d calls within 30s", len(at))
		}
	}
	for i, want := range []time.Duration{maintenance.OutageBackoffMin, 2 * maintenance.OutageBackoffMin, 4 * maintenance.OutageBackoffMin} {
		if gap := at[i+1].Sub(at[i]); gap < want {
			t.Errorf("try %d came %v after the failure before it, want at least %v", i+2, gap, want)
		}
	}
	// After the outage the interval is 1ms again: the three calls after the
	// return (two of them failing otherwise) take well under a backoff.
	if gap := at[7].Sub(at[4]); gap >= maintenance.OutageBackoffMin {
		t.Errorf("after the outage, three runs took %v: the loop still backs off", gap)
	}
	out := logs.String()
	if n := strings.Count(out, "the store cannot be reached"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "the store is reachable again"); n != 1 {
		t.Errorf("the return was logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, `msg="expiry failed"`); n != 2 {
		t.Errorf("the other failures were logged %d times, want each (2):\n%s", n, out)
	}
}

// stopping is a service that returns err at once.
type stopping struct{ err error }

func (stopping) Name() string                    { return "broken" }
func (s stopping) Run(ctx context.Context) error { return s.err }

// waiting is a service that runs until ctx ends.
type waiting struct{ started chan struct{} }

func (waiting) Name() string { return "waiting" }
func (w waiting) Run(ctx context.Context) error {
	close(w.started)
	<-ctx.Done()
	return ctx.Err()
}

// TestRun: Run starts every service, logs one that stops early, and
// returns once ctx ended and every service stopped.
func TestRun(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	w := waiting{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		maintenance.Run(ctx, slog.New(slog.NewTextHandler(&logs, nil)), stopping{err: errors.New("no store")}, w)
	}()
	<-w.started
	select {
	case <-done:
		t.Fatal("Run returned while a service was running")
	case <-time.After(10 * time.Millisecond):
	}
	cancel()
	<-done
	if !strings.Contains(logs.String(), `msg="broken stopped" err="no store"`) {
		t.Errorf("the service that stopped early was not logged:\n%s", logs.String())
	}
}
