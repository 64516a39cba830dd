package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
)

// The pauses between attempts to reach the store at start: doubling from
// the first to the last.
const (
	storeWaitFirst = 250 * time.Millisecond
	storeWaitMax   = 5 * time.Second
)

// openStoreWaiting opens the configured store. While the store cannot be
// reached (cstype.ErrUnavailable: PostgreSQL still starting, a volume not
// yet mounted) it retries with backoff, logging each wait, for up to
// store.connect_timeout; any other error ends it at once.
func openStoreWaiting(ctx context.Context, cfg *config.Config, log *slog.Logger) (store.Store, error) {
	start := time.Now()
	deadline := start.Add(cfg.StoreConnectTimeout)
	pause := storeWaitFirst
	for attempt := 1; ; attempt++ {
		// Each attempt ends at the deadline, so that a server that never
		// answers (a black hole) cannot hold the start past it.
		actx, cancel := context.WithDeadline(ctx, deadline)
		st, err := openStore(actx, cfg.Store, cfg.AutoMigrate, cfg.Postgres.MaxConns)
		cancel()
		switch {
		case err == nil:
			if attempt > 1 {
				log.Info("the store is reachable; starting", "store", redact(cfg.Store),
					"waited", time.Since(start).Round(time.Millisecond), "attempts", attempt)
			}
			return st, nil
		case !errors.Is(err, cstype.ErrUnavailable) || ctx.Err() != nil:
			return nil, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("the store could not be reached within store.connect_timeout (%v, %d attempts): %w",
				cfg.StoreConnectTimeout, attempt, err)
		}
		wait := min(pause, left)
		log.Warn("waiting for the store: it cannot be reached", "store", redact(cfg.Store), "err", err,
			"attempt", attempt, "retry_in", wait, "gives_up_in", left.Round(time.Second))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		pause = min(2*pause, storeWaitMax)
	}
}
