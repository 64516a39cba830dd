package countersign

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/countersign/countersign/store"
)

// Worker defaults.
const (
	DefaultPollInterval   = time.Second
	DefaultMaxConcurrency = 4
)

// workKey is the hub key the worker listens on: it is published whenever an
// independent proposal is approved in this process.
const workKey = "\x00work"

// WorkerOptions configures a Worker. Zero fields take the defaults.
type WorkerOptions struct {
	// PollInterval is how often the worker looks for work when nothing wakes
	// it. Default 1s. Must be less than a third of LeaseDuration.
	PollInterval time.Duration
	// LeaseDuration is the execution lease. Default: the engine's (30s).
	LeaseDuration time.Duration
	// MaxConcurrency bounds the executions in flight. Default 4.
	MaxConcurrency int
	// SweepInterval is how often due proposals are expired. Default:
	// PollInterval.
	SweepInterval time.Duration
	// SweepBatch bounds one expiry batch. Default 500.
	SweepBatch int
}

// Worker executes approved independent proposals, recovers executions whose
// lease lapsed (their callers died), and reconciles uncertain outcomes. Many
// workers, in many processes, may share a store: they coordinate only through
// leases and compare-and-set.
type Worker struct {
	e    *Engine
	opts WorkerOptions
}

// NewWorker validates the options and returns a worker for the engine.
func (e *Engine) NewWorker(opts WorkerOptions) (*Worker, error) {
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = e.lease
	}
	if opts.MaxConcurrency == 0 {
		opts.MaxConcurrency = DefaultMaxConcurrency
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = opts.PollInterval
	}
	if opts.SweepBatch == 0 {
		opts.SweepBatch = DefaultSweepBatch
	}
	switch {
	case opts.PollInterval < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.PollInterval %v: must be positive", opts.PollInterval)
	case opts.LeaseDuration < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.LeaseDuration %v: must be positive", opts.LeaseDuration)
	case opts.MaxConcurrency < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.MaxConcurrency %d: must be positive", opts.MaxConcurrency)
	case opts.SweepInterval < 0 || opts.SweepBatch < 0:
		return nil, errors.New("countersign: WorkerOptions.SweepInterval and SweepBatch must be positive")
	case opts.PollInterval >= opts.LeaseDuration/3:
		return nil, fmt.Errorf("countersign: WorkerOptions.PollInterval %v: must be less than a third of LeaseDuration %v", opts.PollInterval, opts.LeaseDuration)
	}
	return &Worker{e: e, opts: opts}, nil
}

// Run works until ctx ends, then waits for the executions in flight and
// returns nil. Executions see a context that ends only when they are done, or
// when their lease is lost: cancellation cannot undo an external change.
func (w *Worker) Run(ctx context.Context) error {
	wake, unsubscribe := w.e.hub.Subscribe(workKey)
	defer unsubscribe()
	poll := time.NewTicker(w.opts.PollInterval)
	defer poll.Stop()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.e.RunSweeper(ctx, w.opts.SweepInterval, w.opts.SweepBatch); err != nil && ctx.Err() == nil {
			w.e.log.Error("sweeper stopped", "err", err)
		}
	}()

	slots := make(chan struct{}, w.opts.MaxConcurrency)
	freed := make(chan struct{}, 1)
	for {
		// Claim as many as there are free slots, in one batch.
		free := cap(slots) - len(slots)
		if free > 0 && ctx.Err() == nil {
			claimed, err := w.e.store.ClaimBatch(ctx, &store.ClaimBatchParams{
				Owner: w.e.owner, LeaseDuration: w.opts.LeaseDuration, Limit: free,
			})
			if err != nil && ctx.Err() == nil {
				w.e.log.Warn("claim failed", "err", err)
			}
			for _, cl := range claimed {
				slots <- struct{}{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() {
						<-slots
						select {
						case freed <- struct{}{}:
						default:
						}
					}()
					w.execute(context.WithoutCancel(ctx), cl)
				}()
			}
			if len(claimed) == free {
				continue // there may be more
			}
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-wake:
		case <-freed:
		case <-poll.C:
		}
	}
}

func (w *Worker) execute(ctx context.Context, cl *store.Claimed) {
	w.e.hub.Publish(cl.Proposal.ID)
	p, err := w.e.executeClaimed(ctx, cl, w.opts.LeaseDuration)
	if err != nil {
		w.e.log.Warn("execution ended without settling", "proposal", cl.Proposal.ID, "err", err)
		return
	}
	w.e.log.Debug("executed", "proposal", p.ID, "status", p.Status)
}

// RunOnce claims one batch (up to MaxConcurrency), executes it, and returns
// how many proposals it worked on. It is Run's step without the waiting, for
// tests and for callers that schedule work themselves.
func (w *Worker) RunOnce(ctx context.Context) (int, error) {
	claimed, err := w.e.store.ClaimBatch(ctx, &store.ClaimBatchParams{
		Owner: w.e.owner, LeaseDuration: w.opts.LeaseDuration, Limit: w.opts.MaxConcurrency,
	})
	if err != nil {
		return 0, fmt.Errorf("claim: %w", err)
	}
	var wg sync.WaitGroup
	for _, cl := range claimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.execute(context.WithoutCancel(ctx), cl)
		}()
	}
	wg.Wait()
	return len(claimed), nil
}
