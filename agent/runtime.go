package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/runhost"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// DefaultPollInterval is how often Work looks for runs to resume when
// nothing in this process signals one.
const DefaultPollInterval = time.Second

// callWait is how long a run's wait-mode call waits for a human before the
// run parks instead: long enough to take a decision that is already there,
// too short to hold anything.
const callWait = time.Millisecond

// maxDriven bounds the runs one Work loop drives at once.
const maxDriven = 16

// sweepEvery is how often Work's claim also looks at every parked run
// (RunHost.SweepRuns), for one that parked at the very moment its proposal
// was decided and so was not marked ready; the other claims cost the same
// whatever the number of parked runs.
const sweepEvery = 30 * time.Second

// RuntimeOptions configures a Runtime.
type RuntimeOptions struct {
	Engine *countersign.Engine
	Agents []*Agent
	// PollInterval is how often Work claims runs to resume. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	Logger       *slog.Logger
	// TracerProvider, if set, receives a span for each step of a run
	// (countersign.run_step), the parent of the step's tool calls' spans.
	// Default nil: none.
	TracerProvider trace.TracerProvider
}

// Runtime drives runs: it asks the run's agent's model for the next
// message, makes the model's tool calls through Engine.Call (with the
// run's thread, its id and the model's tool-call id), parks the run on a
// call that waits for a human, and ends it. Every step is written through
// the engine before the next begins, so that a run whose process dies goes
// on from its last step in another process, and a recorded tool call is
// replayed, never executed twice.
type Runtime struct {
	engine *countersign.Engine
	// host is the engine's side of runs that checks nobody (reading,
	// writing, claiming any run): the runtime acts for the engine.
	host   *countersign.RunHost
	agents map[string]*Agent
	poll   time.Duration
	log    *slog.Logger
	// tracer is nil when tracing is off.
	tracer trace.Tracer
}

// NewRuntime checks the agents and returns a Runtime.
func NewRuntime(opts RuntimeOptions) (*Runtime, error) {
	if opts.Engine == nil {
		return nil, errors.New("agent: runtime: an engine is required")
	}
	rt := &Runtime{engine: opts.Engine, host: opts.Engine.RunHost(runhost.Grant()), agents: map[string]*Agent{}, poll: opts.PollInterval, log: opts.Logger}
	if opts.TracerProvider != nil {
		rt.tracer = opts.TracerProvider.Tracer(countersign.TracerName)
	}
	if rt.poll <= 0 {
		rt.poll = DefaultPollInterval
	}
	if rt.log == nil {
		rt.log = slog.Default()
	}
	for _, a := range opts.Agents {
		if err := a.Validate(); err != nil {
			return nil, err
		}
		if _, dup := rt.agents[a.Name]; dup {
			return nil, fmt.Errorf("agent %s: defined twice", a.Name)
		}
		rt.agents[a.Name] = a
	}
	return rt, nil
}

// Agent returns the agent named name.
func (rt *Runtime) Agent(name string) (*Agent, bool) {
	a, ok := rt.agents[name]
	return a, ok
}

// errStop ends Drive's loop without an error: the run parked, ended, or
// is no longer this process's.
var errStop = errors.New("stop")

// Drive takes a run this process holds (as Engine.PostMessage or
// RunHost.ClaimRuns returned it) from step to step until it parks, ends, or
// stops being this process's (cancelled, or its lease taken over). It
// returns the run as it left it. An error means the run could not be
// written: it stays running under its lease, which lapses, and another
// process resumes it.
func (rt *Runtime) Drive(ctx context.Context, r *cstype.Run) (*cstype.Run, error) {
	if r.Lease == nil {
		return r, nil
	}
	d := &drive{rt: rt, fence: cstype.Fence{Token: r.Lease.Token, Generation: r.Lease.Generation}, run: r}
	for {
		err := d.tracedStep(ctx)
		switch {
		case errors.Is(err, errStop):
			return d.run, nil
		case errors.Is(err, cstype.ErrLeaseLost) || errors.Is(err, cstype.ErrConflict):
			return d.latest(ctx), nil
		case err != nil:
			return d.run, err
		}
	}
}

// drive is one Drive call's state.
type drive struct {
	rt    *Runtime
	fence cstype.Fence
	run   *cstype.Run
}

// latest rereads the run, for a caller that lost it.
func (d *drive) latest(ctx context.Context) *cstype.Run {
	st, err := d.rt.host.RunState(ctx, d.run.Tenant, d.run.ID)
	if err != nil {
		return d.run
	}
	return st.Run
}

// update writes a step; the lease is renewed with it.
func (d *drive) update(ctx context.Context, p *countersign.RunUpdate) error {
	p.Tenant, p.ID, p.Fence = d.run.Tenant, d.run.ID, d.fence
	if p.To == "" || p.To == cstype.RunRunning {
		p.LeaseDuration = d.rt.engine.LeaseDuration()
	}
	r, err := d.rt.host.UpdateRun(ctx, p)
	if err != nil {
		return err
	}
	d.run = r
	if r.Status != cstype.RunRunning {
		return errStop
	}
	return nil
}

func (d *drive) fail(ctx context.Context, reason string) error {
	return d.update(ctx, &countersign.RunUpdate{To: cstype.RunFailed, Error: reason})
}

// tracedStep is step, in a span of its own when tracing is on.
func (d *drive) tracedStep(ctx context.Context) error {
	if d.rt.tracer == nil {
		return d.step(ctx)
	}
	ctx, span := d.rt.tracer.Start(ctx, "countersign.run_step", trace.WithAttributes(
		attribute.String("countersign.run.id", d.run.ID), attribute.String("countersign.thread.id", d.run.ThreadID),
		attribute.String("countersign.tenant", d.run.Tenant), attribute.String("gen_ai.agent.name", d.run.Agent),
		attribute.String("gen_ai.operation.name", "invoke_agent")))
	err := d.step(ctx)
	if err != nil && !errors.Is(err, errStop) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attribute.String("countersign.run.status", string(d.run.Status)))
	span.End()
	return err
}

// step takes one step: answer the tool calls of the run's last model
// message that have no result yet, or else ask the model.
func (d *drive) step(ctx context.Context) error {
	st, err := d.rt.host.RunState(ctx, d.run.Tenant, d.run.ID)
	if err != nil {
		return err
	}
	d.run = st.Run
	if d.run.Status != cstype.RunRunning || d.run.Lease == nil || d.run.Lease.Token != d.fence.Token {
		return errStop
	}
	a, ok := d.rt.agents[d.run.Agent]
	if !ok {
		return d.fail(ctx, fmt.Sprintf("agent %q is not configured", d.run.Agent))
	}
	calls, client := unanswered(st.Messages, d.run.ID)
	switch {
	case len(calls) > 0:
		return d.answer(ctx, st, calls, len(client) > 0)
	case len(client) > 0:
		// Only the caller's calls are left: the run ends with them
		// pending, and their results come with the thread's next message.
		return d.update(ctx, &countersign.RunUpdate{To: cstype.RunFinished})
	}
	if d.run.Steps >= a.Steps() {
		return d.fail(ctx, fmt.Sprintf("the agent made %d model calls, its max_steps", a.Steps()))
	}
	req := &Request{Instructions: a.Instructions, Messages: conversation(st.Messages), Tools: append(d.rt.tools(a), clientTools(d.run)...)}
	reply, err := a.Model.Generate(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // this process is going away; another resumes the run
		}
		return d.update(ctx, &countersign.RunUpdate{Steps: 1, To: cstype.RunFailed, Error: "model: " + err.Error()})
	}
	offered := map[string]bool{}
	for _, t := range req.Tools {
		offered[t.Name] = true
	}
	isClient := map[string]bool{}
	for _, t := range d.run.ClientTools {
		isClient[t.Name] = true
	}
	msg := &cstype.Message{ID: "msg_" + randomID(), Role: cstype.RoleAssistant, Text: reply.Text}
	ids := map[string]bool{}
	for _, c := range reply.ToolCalls {
		if !offered[c.Action] {
			return d.update(ctx, &countersign.RunUpdate{Steps: 1, To: cstype.RunFailed,
				Error: fmt.Sprintf("model: a tool call of %q (id %q), which was not offered", c.Action, c.ID)})
		}
		if c.ID == "" {
			// The id is what the proposal, the AG-UI events and the
			// model's next request name the call by: one the model did not
			// give is minted, as the scripted model mints its own.
			c.ID = NewToolCallID()
		}
		if ids[c.ID] {
			// Two calls of one reply under one id cannot each get their
			// own result: no provider does this, and nothing is called.
			return d.update(ctx, &countersign.RunUpdate{Steps: 1, To: cstype.RunFailed,
				Error: fmt.Sprintf("model: two tool calls with id %q in one reply", c.ID)})
		}
		ids[c.ID] = true
		msg.ToolCalls = append(msg.ToolCalls, cstype.ToolCall{ID: c.ID, Action: c.Action, Input: c.Input, Client: isClient[c.Action]})
	}
	p := &countersign.RunUpdate{Steps: 1, Messages: []*cstype.Message{msg}}
	if len(msg.ToolCalls) == 0 {
		p.To = cstype.RunFinished
	}
	return d.update(ctx, p)
}

// clientTools are the tools the run's caller executes, as its model is
// offered them.
func clientTools(r *cstype.Run) []Tool {
	out := make([]Tool, 0, len(r.ClientTools))
	for _, t := range r.ClientTools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out
}

// answer makes the calls the model asked for and records each result; a
// wait-mode call still waiting for a human parks the run, an independent
// one ends the turn once every call is answered, as calls left to the
// caller (clientLeft) do.
//
// A call's id is the model's own, and the proposal's tool_call_id: an id
// an earlier message of the thread already used gets the tool error
// TOOL_CALL_ID_REUSED and nothing is called, and the engine refuses a
// record of the id that another run made (Call.FreshToolCallID), so one
// id names one call of the thread while a call this run repeats after a
// crash still replays its own record.
func (d *drive) answer(ctx context.Context, st *countersign.RunState, calls []cstype.ToolCall, clientLeft bool) error {
	endTurn := clientLeft
	used := usedBefore(st.Messages, d.run.ID)
	for _, c := range calls {
		var (
			res *countersign.Result
			err error
		)
		if used[c.ID] {
			err = &countersign.ToolCallIDReusedError{ToolCallID: c.ID}
		} else {
			res, err = d.rt.engine.Call(ctx, &countersign.Call{
				Identity: st.Identity, ThreadID: d.run.ThreadID, RunID: d.run.ID, ToolCallID: d.recordedAs(ctx, st, c), FreshToolCallID: true,
				Action: c.Action, Input: c.Input, Evidence: evidenceFor(st.Messages, c.Action), WaitTimeout: callWait,
			})
		}
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		out, ok := toolResult(res, err)
		if !ok {
			return err // the store failed: leave the run to its lease
		}
		if res != nil && res.Status == countersign.ResultPending && res.Proposal != nil && res.Proposal.Mode == cstype.ModeWait {
			return d.update(ctx, &countersign.RunUpdate{To: cstype.RunParked, Awaiting: res.ProposalID, ProposalIDs: []string{res.ProposalID}})
		}
		if res != nil && res.Status == countersign.ResultPending {
			endTurn = true
		}
		body, _ := json.Marshal(out) // strings, bools and raw JSON only
		m := &cstype.Message{ID: "msg_" + randomID(), Role: cstype.RoleTool, ToolCallID: c.ID, Text: out.line(c.Action),
			Result: body, ProposalID: out.ProposalID}
		p := &countersign.RunUpdate{Messages: []*cstype.Message{m}}
		if out.ProposalID != "" {
			p.ProposalIDs = []string{out.ProposalID}
		}
		if err := d.update(ctx, p); err != nil {
			return err
		}
	}
	if endTurn {
		return d.update(ctx, &countersign.RunUpdate{To: cstype.RunFinished})
	}
	return nil
}

// recordedAs is the tool call id c is made with: the model's own, unless
// the run parked on c before this version, when its proposal was recorded
// as "RUN_ID/MODEL_ID"; that run goes on with that record (its approval
// executes, once) rather than proposing the call again. Only the run's
// last proposal can be that one: a parked run's is added last.
func (d *drive) recordedAs(ctx context.Context, st *countersign.RunState, c cstype.ToolCall) string {
	n := len(d.run.ProposalIDs)
	if n == 0 {
		return c.ID
	}
	legacy := d.run.ID + "/" + c.ID
	p, err := d.rt.engine.Proposal(ctx, st.Identity, d.run.ProposalIDs[n-1])
	if err == nil && p.RunID == d.run.ID && p.ToolCallID == legacy {
		return legacy
	}
	return c.ID
}

// tools are the actions the agent offers its model. An action executed by
// its caller is not one of them: this agent's calls run in the server,
// where nobody would run it.
func (rt *Runtime) tools(a *Agent) []Tool {
	var out []Tool
	for _, act := range rt.engine.Actions() {
		if a.Offers(act.Name()) && rt.engine.Offered(act.Name()) && !act.CallerExecuted() {
			out = append(out, Tool{Name: act.Name(), Description: act.Description(), InputSchema: act.InputSchema()})
		}
	}
	return out
}

// Work claims runs that are ready to go on (a parked run whose proposal
// was decided or expired, a run whose process died) and drives them, until
// ctx ends.
func (rt *Runtime) Work(ctx context.Context) error {
	changes, stop := rt.engine.Subscribe()
	defer stop()
	sem := make(chan struct{}, maxDriven)
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(rt.poll)
	defer t.Stop()
	var swept time.Time // never: the first claim sweeps
	for {
		if free := maxDriven - len(sem); free > 0 {
			claim := rt.host.ClaimRuns
			if time.Since(swept) >= sweepEvery {
				claim, swept = rt.host.SweepRuns, time.Now()
			}
			runs, err := claim(ctx, free)
			if err != nil && ctx.Err() == nil {
				rt.log.Warn("agent: claim runs", "err", err)
			}
			for _, r := range runs {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					if _, err := rt.Drive(ctx, r); err != nil && ctx.Err() == nil {
						rt.log.Warn("agent: run", "run", r.ID, "err", err)
					}
				})
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		case <-t.C:
		}
	}
}

// HasAgent reports whether an agent named name is configured.
func (rt *Runtime) HasAgent(name string) bool {
	_, ok := rt.agents[name]
	return ok
}
