package maintenance

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/countersign/countersign/store"
)

// Service is one periodic job.
type Service interface {
	// Name names the job in logs ("expiry", "sealer", …).
	Name() string
	// Run does the job until ctx ends, then returns ctx's error. It
	// returns early only when the job cannot go on.
	Run(ctx context.Context) error
}

// Run runs every service in its own goroutine until ctx ends, and returns
// once all of them have stopped. It is the one start point: countersign's
// Worker calls it with the services its options ask for. A service that
// stops before ctx ends is logged to log.
func Run(ctx context.Context, log *slog.Logger, services ...Service) {
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Go(func() {
			if err := s.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error(s.Name()+" stopped", "err", err)
			}
		})
	}
	wg.Wait()
}

// Changed is told of each proposal a service moved (or marked: an
// escalation, a reminder), with the status it was in, so that the proposal's
// waiters wake, its observers see the transition and, for a settlement, the
// settled hooks run. countersign's Engine gives its own.
type Changed func(ctx context.Context, p *store.Proposal, from store.Status)

// jitterFraction is the share of an interval a loop's wait may be shortened
// by, at random: processes started together (a deployment) then drift apart
// rather than ask the store in step, and a job still runs at least once an
// interval, which the sealer's lease and the checkpoints' schedule rely on.
const jitterFraction = 10

// jittered is interval less a random part of up to a tenth of it.
func jittered(interval time.Duration) time.Duration {
	if j := interval / jitterFraction; j > 0 {
		return interval - rand.N(j)
	}
	return interval
}

// triggerQueue bounds the test triggers waiting for a loop that has not
// started yet.
const triggerQueue = 16

// loop is what every periodic service is built on: a name and a logger, a
// jittered interval, the outage pacing, and Trigger, the test hook that
// runs the job at once and says when it is done, so that tests neither sleep
// for an interval nor guess when a run happened. Its state belongs to the
// goroutine that calls run.
type loop struct {
	name     string
	interval time.Duration
	log      *slog.Logger
	out      Outage
	trigger  chan chan error
}

func newLoop(name string, interval time.Duration, log *slog.Logger) loop {
	if log == nil {
		log = slog.Default()
	}
	return loop{name: name, interval: interval, log: log,
		out: Outage{Log: log, What: name}, trigger: make(chan chan error, triggerQueue)}
}

// Name implements Service.
func (l *loop) Name() string { return l.name }

// Trigger asks the running loop to run its job now, and returns a channel
// that receives the run's error (nil: it did its work) once the run is over.
// The run starts after Trigger is called, so it sees everything written
// before. It is a test hook: a test triggers a run and asserts its effect on
// the store, with no sleep. Until the loop runs, the request waits in a queue
// of triggerQueue, and Trigger blocks once that is full.
func (l *loop) Trigger() <-chan error {
	done := make(chan error, 1)
	l.trigger <- done
	return done
}

// run calls work at once, then after each interval (jittered), and at once
// whenever Trigger asks, until ctx ends. While work fails because the store
// cannot be reached it backs off (Outage) rather than keep the interval;
// any other failure is logged, and the next run comes at the interval.
func (l *loop) run(ctx context.Context, work func(context.Context) error) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var asked []chan error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		case done := <-l.trigger:
			asked = append(asked, done)
		}
		// Every trigger queued so far is answered by this one run.
	queued:
		for {
			select {
			case done := <-l.trigger:
				asked = append(asked, done)
			default:
				break queued
			}
		}
		err := work(ctx)
		for _, done := range asked {
			done <- err
		}
		timer.Reset(l.next(ctx, err))
	}
}

// next accounts for a run's error and returns how long to wait before the
// next run.
func (l *loop) next(ctx context.Context, err error) time.Duration {
	switch {
	case err == nil:
		l.out.OK()
	case ctx.Err() != nil:
	default:
		if pause, down := l.out.Failed(err); down {
			return pause
		}
		l.log.Warn(l.name+" failed", "err", err)
	}
	return jittered(l.interval)
}
