package countersign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// The engine's side of agent runs, for the runtime that drives them
// (package agent): it reads a run's state and writes its steps through the
// engine, so that the engine stays the one writer of the store. Runs are
// started by PostMessage; who may read or cancel them is decided there.

// RunState is what a runtime needs to take a run's next step.
type RunState struct {
	Run *store.Run
	// Identity is who the run's calls are made as: the thread's owner, with
	// the roles they had when the run started.
	Identity Identity
	// Messages is the thread's conversation, oldest first.
	Messages []*store.Message
}

// RunState reads a run, its thread and its conversation.
func (e *Engine) RunState(ctx context.Context, tenant, runID string) (*RunState, error) {
	r, err := e.store.GetRun(ctx, &store.GetRunParams{Tenant: tenant, ID: runID})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run: %w", err)
	}
	t, err := e.store.GetThread(ctx, &store.GetThreadParams{Tenant: tenant, ID: r.ThreadID})
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("run %q: thread %q: %w", runID, r.ThreadID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get thread: %w", err)
	}
	msgs, err := e.store.ListMessages(ctx, &store.ListMessagesParams{Tenant: tenant, ThreadID: r.ThreadID})
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	runs, err := e.store.ListRuns(ctx, &store.ListRunsParams{Tenant: tenant, ThreadID: r.ThreadID})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return &RunState{Run: r, Identity: Identity{Tenant: tenant, Actor: t.Owner, Roles: r.Roles, Kind: KindAgent}, Messages: heldOutcomes(msgs, runs)}, nil
}

// UpdateRun writes a step of a run its caller holds (store.ApplyRunUpdate).
// A lease that is no longer the caller's is an error wrapping
// store.ErrLeaseLost: another process has the run now.
func (e *Engine) UpdateRun(ctx context.Context, params *store.UpdateRunParams) (*store.Run, error) {
	r, err := e.store.UpdateRun(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("update run: %w", err)
	}
	e.hub.Publish(runKey(r))
	return r, nil
}

// ClaimRuns leases up to limit runs that are ready to go on (a parked run
// whose proposal was decided or expired, a run whose process died) to this
// engine's owner, for its lease duration.
func (e *Engine) ClaimRuns(ctx context.Context, limit int) ([]*store.Run, error) {
	return e.claimRuns(ctx, limit, false)
}

// SweepRuns is ClaimRuns that also looks at every parked run (see
// store.ClaimRunsParams.Sweep): a runtime calls it now and then, to find a
// run that parked at the very moment its proposal was decided.
func (e *Engine) SweepRuns(ctx context.Context, limit int) ([]*store.Run, error) {
	return e.claimRuns(ctx, limit, true)
}

func (e *Engine) claimRuns(ctx context.Context, limit int, sweep bool) ([]*store.Run, error) {
	runs, err := e.store.ClaimRuns(ctx, &store.ClaimRunsParams{Owner: e.owner, LeaseDuration: e.lease, Limit: limit, Sweep: sweep})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	for _, r := range runs {
		e.hub.Publish(runKey(r))
	}
	return runs, nil
}

// LeaseDuration is how long the engine's leases (executions, runs) last
// between renewals.
func (e *Engine) LeaseDuration() time.Duration { return e.lease }

// WatchRun signals on the channel when this process changes the run (a
// step, a claim, a cancellation); stop ends the watch. Changes made by
// other processes are not signalled: poll GetRun for those.
func (e *Engine) WatchRun(tenant, runID string) (changed <-chan struct{}, stop func()) {
	return e.hub.Subscribe(runKey(&store.Run{Tenant: tenant, ID: runID}))
}

func runKey(r *store.Run) string { return "run\x00" + r.Tenant + "\x00" + r.ID }
