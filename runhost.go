package countersign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/runhost"
	"github.com/countersign/countersign/store"
)

// The engine's side of agent runs. Two kinds of caller read them:
//
//   - the agent runtime (package agent), which drives runs and acts for the
//     engine, not for a person: RunHost's RunState, UpdateRun, ClaimRuns,
//     SweepRuns and WatchRun take a tenant and check nobody. They are the
//     runtime's only: a RunHost is had from Engine.RunHost with a
//     runhost.Key, which only the packages test/imports allows to import
//     internal/runhost (agent, cmd/countersign) can make.
//   - a surface that streams a run to its caller (the AG-UI endpoint, the
//     chat route's run stream): ThreadRunState and WatchThreadRun take the
//     caller's Identity and ask mayFollowRun (authority.go) first.
//
// Runs are started by PostMessage; who may read or cancel them is decided
// there and in Run and CancelRun.

// RunState is what a runtime needs to take a run's next step, and what a
// stream shows of a run.
type RunState struct {
	Run *cstype.Run
	// Identity is who the run's calls are made as: the thread's owner, with
	// the roles they had when the run started.
	Identity Identity
	// Messages is the thread's conversation, oldest first.
	Messages []*cstype.Message
}

// RunHost is the agent runtime's side of the engine: the run methods that
// check nobody. Engine.RunHost hands it out; see package internal/runhost
// for who may ask.
type RunHost struct{ e *Engine }

// RunHost returns the engine's RunHost. Its argument is the proof that the
// caller may import internal/runhost (the agent runtime, the composition
// root; test/imports checks who does): runhost.Grant(). Any other key
// panics, as a misuse of the engine rather than an input.
func (e *Engine) RunHost(k *runhost.Key) *RunHost {
	if !runhost.Valid(k) {
		panic("countersign: Engine.RunHost wants runhost.Grant()")
	}
	return &RunHost{e: e}
}

// RunState reads a run, its thread and its conversation, checking nobody:
// it is the agent runtime's (package agent), which acts for the engine.
// A surface reads a run for its caller with Engine.ThreadRunState.
func (h *RunHost) RunState(ctx context.Context, tenant, runID string) (*RunState, error) {
	e := h.e
	r, err := e.store.GetRun(ctx, &store.GetRunParams{Tenant: tenant, ID: runID})
	if errors.Is(err, cstype.ErrNotFound) {
		return nil, fmt.Errorf("run %q: %w", runID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get run: %w", err)
	}
	t, err := e.store.GetThread(ctx, &store.GetThreadParams{Tenant: tenant, ID: r.ThreadID})
	if errors.Is(err, cstype.ErrNotFound) {
		return nil, fmt.Errorf("run %q: thread %q: %w", runID, r.ThreadID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get thread: %w", err)
	}
	return e.runState(ctx, t, r)
}

// ThreadRunState reads a run of thread threadID, the thread and its
// conversation, for id: only whoever may follow the thread's runs may
// (mayFollowRun: its owner, of either kind of credential). Another's
// thread is a *ForbiddenError; an unknown thread or run, or a run of
// another thread, wraps ErrNotFound. A stream calls it at each change it
// shows, so that it shows nothing the caller may not read.
func (e *Engine) ThreadRunState(ctx context.Context, id Identity, threadID, runID string) (*RunState, error) {
	t, r, err := e.followedRun(ctx, id, threadID, runID)
	if err != nil {
		return nil, err
	}
	return e.runState(ctx, t, r)
}

// WatchThreadRun is WatchRun for id, on a run of thread threadID: it
// checks what ThreadRunState checks, and only then watches. The channel
// signals changes this process makes to the run; a stream reads the run
// with ThreadRunState on each signal, and polls for changes other
// processes make.
func (e *Engine) WatchThreadRun(ctx context.Context, id Identity, threadID, runID string) (changed <-chan struct{}, stop func(), err error) {
	_, r, err := e.followedRun(ctx, id, threadID, runID)
	if err != nil {
		return nil, nil, err
	}
	changed, stop = e.hub.Subscribe(runKey(r))
	return changed, stop, nil
}

// followedRun reads a run of thread threadID that id may follow.
func (e *Engine) followedRun(ctx context.Context, id Identity, threadID, runID string) (*cstype.Thread, *cstype.Run, error) {
	t, err := e.thread(ctx, id, threadID)
	if err != nil {
		return nil, nil, err
	}
	if err := mayFollowRun(id, t); err != nil {
		return nil, nil, err
	}
	r, err := e.runOf(ctx, id.Tenant, threadID, runID)
	if err != nil {
		return nil, nil, err
	}
	return t, r, nil
}

// runState is run r of thread t with t's conversation.
func (e *Engine) runState(ctx context.Context, t *cstype.Thread, r *cstype.Run) (*RunState, error) {
	msgs, err := e.store.ListMessages(ctx, &store.ListMessagesParams{Tenant: r.Tenant, ThreadID: r.ThreadID})
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	runs, err := e.store.ListRuns(ctx, &store.ListRunsParams{Tenant: r.Tenant, ThreadID: r.ThreadID})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return &RunState{Run: r, Identity: Identity{Tenant: r.Tenant, Actor: t.Owner, Roles: r.Roles, Kind: KindAgent}, Messages: heldOutcomes(msgs, runs)}, nil
}

// RunUpdate is one step of a run, written by RunHost.UpdateRun.
type RunUpdate struct {
	Tenant string
	ID     string
	// Fence is the caller's lease.
	Fence cstype.Fence
	// Messages are appended to the thread, in order (Role assistant or
	// tool; ID, Text, ToolCalls, ToolCallID, Result, ProposalID). Their
	// RunID is the run's.
	Messages []*cstype.Message
	// ProposalIDs are added to the run's, each once.
	ProposalIDs []string
	// Steps is added to the run's step count.
	Steps int
	// To is the new status: "" or running (stay running), parked (with
	// Awaiting), finished or failed (with Error).
	To       cstype.RunStatus
	Awaiting string
	Error    string
	// LeaseDuration, when positive and the run stays running, renews the
	// lease to now + LeaseDuration.
	LeaseDuration time.Duration
}

// UpdateRun writes a step of a run its caller holds (store.ApplyRunUpdate).
// A lease that is no longer the caller's is an error wrapping
// cstype.ErrLeaseLost: another process has the run now. It is the agent
// runtime's: it checks nobody.
func (h *RunHost) UpdateRun(ctx context.Context, params *RunUpdate) (*cstype.Run, error) {
	e := h.e
	// RunUpdate is store.UpdateRunParams field for field (the conversion
	// fails to compile when they part).
	sp := store.UpdateRunParams(*params)
	r, err := e.store.UpdateRun(ctx, &sp)
	if err != nil {
		return nil, fmt.Errorf("update run: %w", err)
	}
	e.hub.Publish(runKey(r))
	return r, nil
}

// ClaimRuns leases up to limit runs that are ready to go on (a parked run
// whose proposal was decided or expired, a run whose process died) to this
// engine's owner, for its lease duration. It is the agent runtime's: it
// checks nobody.
func (h *RunHost) ClaimRuns(ctx context.Context, limit int) ([]*cstype.Run, error) {
	return h.e.claimRuns(ctx, limit, false)
}

// SweepRuns is ClaimRuns that also looks at every parked run (see
// store.ClaimRunsParams.Sweep): a runtime calls it now and then, to find a
// run that parked at the very moment its proposal was decided.
func (h *RunHost) SweepRuns(ctx context.Context, limit int) ([]*cstype.Run, error) {
	return h.e.claimRuns(ctx, limit, true)
}

func (e *Engine) claimRuns(ctx context.Context, limit int, sweep bool) ([]*cstype.Run, error) {
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
// other processes are not signalled: poll RunState for those. It is the
// agent runtime's and checks nobody; a surface watches a run for its
// caller with Engine.WatchThreadRun.
func (h *RunHost) WatchRun(tenant, runID string) (changed <-chan struct{}, stop func()) {
	return h.e.hub.Subscribe(runKey(&cstype.Run{Tenant: tenant, ID: runID}))
}

func runKey(r *cstype.Run) string { return "run\x00" + r.Tenant + "\x00" + r.ID }
