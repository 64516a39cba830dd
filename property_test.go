package countersign_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

// TestStateMachineProperties drives random sequences of calls, decisions,
// cancellations, clock moves, sweeps, worker runs, operator resolutions,
// grant revocations, thread deletions and stale lease holders against a real
// Engine on memstore, and checks after every step, from the store itself, the
// state machine of docs/design.md §3 and the promises of §4–§7 (see checkStep in
// property_check_test.go for the list).
//
// Scenarios that expose open engine bugs run only on demand: see propExpose.
//
// A remembered approval (grant) is a legitimate approval: a call it matches
// while it is live gets a proposal created approved by one decision of actor
// "grant:<id>" via "grant" (whatever the rule's quorum, and wait for a
// two_phase mode), which the caller claims and executes at once; a replay of
// that tool call answers the recorded outcome.
//
// Everything runs on the test goroutine or on goroutines the engine starts
// and waits for (RunOnce, lease keepers), so a run is reproducible from its
// draws: the behaviour of each Execute and Reconcile is drawn before the
// step, as a script the hooks consume in order, and the worker claims one
// proposal at a time.
func TestStateMachineProperties(t *testing.T) {
	cov := &propCoverage{edges: map[string]int{}}
	defer cov.report(t)
	rapid.Check(t, func(rt *rapid.T) {
		h := newPropHarness(rt)
		h.cov = cov
		actions := map[string]func(*rapid.T){"": h.checkStep}
		for _, op := range h.ops() {
			// Repeat draws its actions uniformly: weight them by aliases.
			for i := range op.weight {
				actions[fmt.Sprintf("%s#%d", op.name, i)] = func(t *rapid.T) {
					if h.step >= propMaxSteps {
						h.idle = true // long enough: the rest of the run does nothing
						return
					}
					h.beginStep(op.name)
					op.run(t)
				}
			}
		}
		rt.Repeat(actions)
		cov.add(fmt.Sprintf("runs with %02d+ steps", h.step/10*10))
	})
}

const (
	propMaxSteps   = 50
	propTenant     = "acme"
	propLease      = 30 * time.Second
	propMaxAttempt = 3
	// propReconcileBackoff is the first pause after Reconcile answers
	// unknown, on the fake clock.
	propReconcileBackoff = time.Second
	// propWait bounds a wait-mode call: nobody decides while it waits, so it
	// returns pending at once unless the proposal is already decided.
	propWait = time.Millisecond
)

// The actions. transfer is a non-idempotent write without Reconcile; tag is
// idempotent; refund has a Reconcile hook.
const (
	actTransfer = "acct.transfer"
	actTag      = "acct.tag"
	actRefund   = "acct.refund"
)

var propActions = []string{actTransfer, actTag, actRefund}

var propIdentities = map[string]countersign.Identity{
	"alice": {Tenant: propTenant, Actor: "alice", Roles: []string{"agent"}},
	"erin":  {Tenant: propTenant, Actor: "erin", Roles: []string{"agent"}},
	"bob":   {Tenant: propTenant, Actor: "bob", Roles: []string{"finance"}},
	"carol": {Tenant: propTenant, Actor: "carol", Roles: []string{"finance"}},
	"dave":  {Tenant: propTenant, Actor: "dave"},
	"olga":  {Tenant: propTenant, Actor: "olga", Roles: []string{countersign.RoleOperator}},
	// An approver whose actor id looks like a grant's decision: the engine
	// must not mistake its approval for a remembered one.
	"grant:ops": {Tenant: propTenant, Actor: "grant:ops", Roles: []string{"finance"}},
}

// execBehaviour is what one Execute invocation does.
type execBehaviour string

const (
	execSucceed    execBehaviour = "succeed"
	execNotApplied execBehaviour = "not_applied" // countersign.NotApplied(err)
	execUncertain  execBehaviour = "uncertain"   // a plain error
	// execCancelCaller cancels the calling agent's context (it gave up, or
	// disconnected) and returns a plain error. In the worker it is uncertain.
	execCancelCaller execBehaviour = "cancel_caller"
	// execInterrupt simulates a stalled holder: it moves the clock past the
	// lease, lets the worker recover the proposal meanwhile, then reports
	// success; the stale holder must not be able to settle.
	execInterrupt execBehaviour = "interrupt"
)

var execBehaviours = []execBehaviour{execSucceed, execNotApplied, execUncertain, execCancelCaller, execInterrupt}

// reconAnswer is what one Reconcile invocation answers.
type reconAnswer string

const (
	reconApplied    reconAnswer = "applied"
	reconNotApplied reconAnswer = "not_applied"
	reconUnknown    reconAnswer = "unknown"
	reconError      reconAnswer = "error"
	// reconResolved: an operator resolves the proposal while Reconcile runs;
	// then it answers applied. The reconciler must not settle over it.
	reconResolved reconAnswer = "resolved_meanwhile"
)

var reconAnswers = []reconAnswer{reconApplied, reconNotApplied, reconUnknown, reconError, reconResolved}

// callInfo travels in the context of a Call, so that hooks know on whose
// behalf they run. Worker executions run under context.Background().
type callInfo struct {
	Thread, Tool, Actor, Evidence, Canon string
}

type callInfoKey struct{}

// propCall is a call made earlier in the run, that may be repeated.
type propCall struct {
	call  countersign.Call
	canon string // the canonical input; empty for an invalid input
}

// execRec is one Execute invocation.
type execRec struct {
	action     string
	opID       string
	proposalID string
	caller     *callInfo // nil in the worker
}

// propCoverage counts, across runs, the transitions the test saw, so that -v
// shows whether the interesting paths are reached.
type propCoverage struct {
	mu    sync.Mutex
	edges map[string]int
}

func (c *propCoverage) add(edge string) {
	c.mu.Lock()
	c.edges[edge]++
	c.mu.Unlock()
}

func (c *propCoverage) report(t *testing.T) {
	keys := make([]string, 0, len(c.edges))
	for k := range c.edges {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-40s %d", k, c.edges[k])
	}
	t.Logf("coverage over all runs:%s", b.String())
}

type propHarness struct {
	cov   *propCoverage
	clock *storetest.Clock
	st    *memstore.Store
	e     *countersign.Engine
	w     *countersign.Worker
	rules map[string]countersign.Rule // by action

	mu        sync.Mutex // guards the fields hooks touch
	execPlan  []execBehaviour
	reconPlan []reconAnswer
	execs     []execRec
	settled   map[string]int
	// preflighted and prepared record, by call (thread/tool call), that the
	// prepare-phase preflight ran and the state version Prepare named;
	// preflightedExec the proposals whose execute-phase preflight ran.
	preflighted     map[string]bool
	prepared        map[string]string
	preflightedExec map[string]bool
	stateVersions   int
	// settledCalls counts OnSettled invocations, to fail every other one.
	settledCalls int
	violations   []string
	fences       []propFence
	cancelCall   context.CancelFunc
	depth        int
	// during the current step
	interrupted, cancelled bool

	// the test goroutine's own state
	idle       bool // the run has reached propMaxSteps
	step       int
	stepName   string
	target     string // the proposal a decide, cancel or resolve step is about
	aliases    map[string]string
	aliasCount map[string]int
	order      []string // proposal ids, first seen first
	prev       map[string]*cstype.Proposal
	history    map[string][]cstype.Status
	calls      []*propCall
	nextTool   int
	grants     map[string]*cstype.Grant // as listed at the end of the previous step
	execsSeen  int
	opCounts   map[string]int
	opsByCall  map[string]map[string]bool // thread/tool call → operation ids
	reachedAt  map[string]int             // the step a proposal reached its status
	// threadAlive and threadBorn follow the threads' incarnations.
	threadAlive map[string]bool
	threadBorn  map[string]int
}

func newPropHarness(t *rapid.T) *propHarness {
	h := &propHarness{
		clock:           storetest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		rules:           map[string]countersign.Rule{},
		settled:         map[string]int{},
		preflighted:     map[string]bool{},
		prepared:        map[string]string{},
		preflightedExec: map[string]bool{},
		prev:            map[string]*cstype.Proposal{},
		history:         map[string][]cstype.Status{},
		grants:          map[string]*cstype.Grant{},
		opCounts:        map[string]int{},
		opsByCall:       map[string]map[string]bool{},
		reachedAt:       map[string]int{},
		threadAlive:     map[string]bool{},
		threadBorn:      map[string]int{},
		aliases:         map[string]string{},
		aliasCount:      map[string]int{},
	}
	h.st = memstore.New(&memstore.Options{Now: h.clock.Now})

	modes := []countersign.Mode{countersign.ModeWait, countersign.ModeTwoPhase, countersign.ModeIndependent}
	// Transfers may always be remembered; tags and refunds sometimes, so
	// that grants meet idempotent retries and reconciliation too.
	remember := [][]countersign.Scope{nil, nil, {countersign.ScopeRun}, {countersign.ScopeThread}}
	rules := []countersign.Rule{
		{
			Match: actTransfer, Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			Quorum: rapid.IntRange(1, 2).Draw(t, "transfer.quorum"),
			Mode:   rapid.SampledFrom(modes).Draw(t, "transfer.mode"),
			TTL:    5 * time.Minute, Remember: []countersign.Scope{countersign.ScopeRun, countersign.ScopeThread},
			GrantAnyInput: rapid.Bool().Draw(t, "transfer.grantAnyInput"),
			GrantTTL:      rapid.SampledFrom([]time.Duration{0, 3 * time.Minute}).Draw(t, "transfer.grantTTL"),
		},
		{
			Match: actTag, Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			Quorum:   rapid.IntRange(1, 2).Draw(t, "tag.quorum"),
			Mode:     rapid.SampledFrom(modes).Draw(t, "tag.mode"),
			TTL:      5 * time.Minute,
			Channels: []string{"api", "web"},
			Remember: rapid.SampledFrom(remember).Draw(t, "tag.remember"),
		},
		{
			// A glob: the exact rules above outrank it for their actions.
			// Sometimes allowed: a write recorded and run without a human.
			Match:              "acct.*",
			Effect:             rapid.SampledFrom([]countersign.Effect{countersign.EffectAsk, countersign.EffectAsk, countersign.EffectAllow}).Draw(t, "refund.effect"),
			Approvers:          []string{"requester", "role:finance"},
			ForbidSelfApproval: true,
			Quorum:             rapid.IntRange(1, 2).Draw(t, "refund.quorum"),
			Mode:               rapid.SampledFrom(modes).Draw(t, "refund.mode"),
			TTL:                2 * time.Minute,
			Remember:           rapid.SampledFrom(remember).Draw(t, "refund.remember"),
		},
	}
	h.rules[actTransfer], h.rules[actTag], h.rules[actRefund] = rules[0], rules[1], rules[2]

	e, err := countersign.New(countersign.Options{
		Store:         h.st,
		Policy:        &countersign.Policy{Rules: rules},
		Actions:       []*countersign.Action{h.action(actTransfer, false, false), h.action(actTag, true, false), h.action(actRefund, false, true)},
		OnSettled:     []countersign.SettledFunc{h.onSettled},
		Now:           h.clock.Now,
		Logger:        slog.New(slog.DiscardHandler),
		LeaseDuration: propLease,
		MaxAttempts:   propMaxAttempt,
		// Real time. Short, but long enough that a caller's cancelled context
		// always wins the select against the backoff timer.
		RetryBackoff:     2 * time.Millisecond,
		ReconcileBackoff: propReconcileBackoff, // fake time
		Owner:            "prop",
	})
	if err != nil {
		h.fatalf(t, "New: %v", err)
	}
	h.e = e
	// One claim at a time keeps the runs reproducible: the hooks consume the
	// drawn script in a fixed order.
	h.w, err = e.NewWorker(countersign.WorkerOptions{PollInterval: time.Second, LeaseDuration: propLease, MaxConcurrency: 1})
	if err != nil {
		h.fatalf(t, "NewWorker: %v", err)
	}
	return h
}

const propSchema = `{"type":"object","properties":{"customer":{"type":"string"},"amount":{"type":"integer"}},"required":["customer","amount"],"additionalProperties":false}`

func (h *propHarness) action(name string, idempotent, reconcile bool) *countersign.Action {
	spec := countersign.RawActionSpec{
		Name: name, Kind: countersign.KindWrite, InputSchema: []byte(propSchema), Idempotent: idempotent,
		Confirmation: countersign.Confirmation{Title: name + " {amount} for {customer}"},
		Hooks:        countersign.Hooks{Execute: h.execute(name), Preflight: h.preflight, Prepare: h.prepare},
	}
	if name != actTag {
		spec.ReplacementKey = "{customer}"
	}
	if reconcile {
		spec.Hooks.Reconcile = h.reconcile
	}
	a, err := countersign.NewRawAction(spec)
	if err != nil {
		panic(err)
	}
	return a
}

// preflight lets every call and execution go on, and records that it ran:
// before Prepare for the call (thread/tool call) whose proposal it creates,
// and before the first Execute of a proposal.
func (h *propHarness) preflight(ctx context.Context, req *countersign.PreflightRequest) (*countersign.Preflight, error) {
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	var p *cstype.Proposal
	if req.ProposalID != "" {
		p, _ = h.st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: propTenant, ID: req.ProposalID})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch req.Phase {
	case countersign.PhasePrepare:
		if ci == nil || req.ProposalID != "" {
			h.violate("preflight of the prepare phase outside a call, or for proposal %s", req.ProposalID)
			break
		}
		h.preflighted[ci.Thread+"/"+ci.Tool] = true
	case countersign.PhaseExecute:
		if p == nil || p.Status != cstype.StatusExecuting || req.StateVersion != p.StateVersion {
			h.violate("preflight of the execute phase for proposal %q (%v) with state version %q", req.ProposalID, p != nil, req.StateVersion)
			break
		}
		h.preflightedExec[p.ID] = true
	default:
		h.violate("preflight in phase %q", req.Phase)
	}
	return &countersign.Preflight{Verdict: countersign.PreflightReady}, nil
}

// prepare names a fresh state version for every proposal a call creates, and
// records it by call (thread/tool call).
func (h *propHarness) prepare(ctx context.Context, req *countersign.PrepareRequest) (*countersign.Prepared, error) {
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stateVersions++
	sv := fmt.Sprintf("sv%d", h.stateVersions)
	switch {
	case ci == nil:
		h.violate("Prepare outside a call")
	case !h.preflighted[ci.Thread+"/"+ci.Tool]:
		h.violate("Prepare for call %s/%s before its preflight", ci.Thread, ci.Tool)
	default:
		h.prepared[ci.Thread+"/"+ci.Tool] = sv
	}
	return &countersign.Prepared{Preview: req.Action + " " + string(req.Input), StateVersion: sv}, nil
}

func (h *propHarness) violate(format string, args ...any) {
	h.violations = append(h.violations, fmt.Sprintf(format, args...))
}

func (h *propHarness) execute(action string) func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
	return func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
		ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
		// What the store says at the moment of execution.
		var p *cstype.Proposal
		if req.ProposalID != "" {
			var err error
			p, err = h.st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: propTenant, ID: req.ProposalID})
			if err != nil {
				h.mu.Lock()
				h.violate("Execute for proposal %s that the store does not have: %v", req.ProposalID, err)
				h.mu.Unlock()
			}
		}

		h.mu.Lock()
		b := execSucceed
		if len(h.execPlan) > 0 {
			b, h.execPlan = h.execPlan[0], h.execPlan[1:]
		}
		h.execs = append(h.execs, execRec{action: action, opID: req.OperationID, proposalID: req.ProposalID, caller: ci})
		var stale *cstype.Fence
		if p != nil {
			stale = h.staleFence(p)
			h.recordFence(p)
			h.checkExecution(action, req, p, ci)
		} else if req.ProposalID == "" && ci == nil {
			h.violate("Execute of %s without a proposal and outside any call (op %s)", action, req.OperationID)
		}
		if b == execInterrupt && h.depth > 0 {
			b = execUncertain
		}
		if b == execCancelCaller && (ci == nil || h.cancelCall == nil) {
			b = execUncertain
		}
		cancel := h.cancelCall
		if b == execInterrupt {
			h.depth++
			h.interrupted = true
		}
		if b == execCancelCaller {
			h.cancelled = true
		}
		h.mu.Unlock()

		if stale != nil {
			// A previous holder of this lease (stalled, now back) must be
			// fenced off while this one holds it.
			_, err := h.st.RenewLease(context.Background(), &store.RenewLeaseParams{Tenant: propTenant, ID: p.ID, Fence: *stale, LeaseDuration: propLease})
			if !errors.Is(err, cstype.ErrLeaseLost) {
				h.mu.Lock()
				h.violate("a stale holder renewed the lease on %s under its new holder: %v", p.ID, err)
				h.mu.Unlock()
			}
		}
		switch b {
		case execNotApplied:
			return nil, countersign.NotApplied(errors.New("declined by the backend"))
		case execUncertain:
			return nil, errors.New("connection reset")
		case execCancelCaller:
			cancel()
			return nil, errors.New("caller went away")
		case execInterrupt:
			// Stall past the lease; a worker takes the proposal over meanwhile.
			h.clock.Advance(propLease + time.Second)
			for range 2 {
				if _, err := h.w.RunOnce(context.Background()); err != nil {
					h.mu.Lock()
					h.violate("nested RunOnce: %v", err)
					h.mu.Unlock()
				}
			}
			h.mu.Lock()
			h.depth--
			h.mu.Unlock()
		}
		return &countersign.Receipt{ID: "rcpt_" + req.OperationID}, nil
	}
}

// checkExecution checks, under h.mu, that an Execute for a proposal runs only
// for a claimed proposal that a quorum approved, on behalf of the right call.
func (h *propHarness) checkExecution(action string, req *countersign.ExecuteRequest, p *cstype.Proposal, ci *callInfo) {
	if p.Status != cstype.StatusExecuting {
		h.violate("Execute of %s while it is %s", p.ID, p.Status)
	}
	if p.OperationID != req.OperationID || p.Action != action {
		h.violate("Execute of %s with operation %s (stored %s) and action %s (stored %s)", p.ID, req.OperationID, p.OperationID, action, p.Action)
	}
	if p.Attempt != req.Attempt {
		h.violate("Execute of %s as attempt %d; the store records attempt %d", p.ID, req.Attempt, p.Attempt)
	}
	if req.StateVersion != p.StateVersion {
		h.violate("Execute of %s with state version %q; Prepare named %q", p.ID, req.StateVersion, p.StateVersion)
	}
	if req.Attempt == 1 && !h.preflightedExec[p.ID] {
		h.violate("Execute of %s without its execute-phase preflight", p.ID)
	}
	if !quorumMet(p) && !h.allowedRecord(p) {
		h.violate("Execute of %s with %d valid approvals, quorum %d, and no grant decision", p.ID, approvedBy(p), p.Quorum)
	}
	_, byGrant := grantOf(p)
	if ci == nil {
		// The worker executes independent approvals that humans gave, and
		// otherwise only retries an idempotent action after recovering a
		// lapsed lease. A grant's approval is executed by its caller.
		if (p.Mode != countersign.ModeIndependent || byGrant) && req.Attempt < 2 {
			h.violate("the worker executed %s proposal %s (by grant: %v) on its first attempt", p.Mode, p.ID, byGrant)
		}
		return
	}
	if p.Mode == countersign.ModeIndependent && !byGrant {
		h.violate("a caller executed independent proposal %s, which no grant approved", p.ID)
	}
	if ci.Thread != p.ThreadID || ci.Actor != p.Requester {
		h.violate("call by %s in thread %s executed %s's proposal %s of thread %s", ci.Actor, ci.Thread, p.Requester, p.ID, p.ThreadID)
	}
	if ci.Tool != p.ToolCallID && ci.Evidence != p.ConfirmationID {
		h.violate("tool call %s (evidence %q) executed proposal %s of tool call %s", ci.Tool, ci.Evidence, p.ID, p.ToolCallID)
	}
	if ci.Evidence == p.ConfirmationID && ci.Tool != p.ToolCallID && p.Mode != countersign.ModeTwoPhase {
		h.violate("evidence spent on %s proposal %s", p.Mode, p.ID)
	}
	if ci.Canon != string(p.Input) {
		h.violate("call with input %s executed proposal %s approved for %s", ci.Canon, p.ID, p.Input)
	}
}

// allowedRecord reports whether p is the record of a write its rule allowed:
// nobody decides it (no approvers, quorum 0, no decisions).
func (h *propHarness) allowedRecord(p *cstype.Proposal) bool {
	return h.rules[p.Action].Effect == countersign.EffectAllow && len(p.Approvers) == 0 && p.Quorum == 0 && len(p.Decisions) == 0
}

// recordFence remembers, under h.mu, the lease an execution runs under, for
// opZombie to replay once it is stale.
func (h *propHarness) recordFence(p *cstype.Proposal) {
	if p.Lease != nil {
		h.fences = append(h.fences, propFence{proposalID: p.ID, fence: cstype.Fence{Token: p.Lease.Token, Generation: p.Lease.Generation}})
	}
}

// staleFence returns, under h.mu, an earlier lease on p other than its current one.
func (h *propHarness) staleFence(p *cstype.Proposal) *cstype.Fence {
	for i := len(h.fences) - 1; i >= 0; i-- {
		f := h.fences[i]
		if f.proposalID == p.ID && p.Lease != nil && f.fence.Token != p.Lease.Token {
			return &f.fence
		}
	}
	return nil
}

type propFence struct {
	proposalID string
	fence      cstype.Fence
}

func (h *propHarness) reconcile(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
	var p *cstype.Proposal
	if req.ProposalID != "" {
		p, _ = h.st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: propTenant, ID: req.ProposalID})
	}
	h.mu.Lock()
	a := reconUnknown
	if len(h.reconPlan) > 0 {
		a, h.reconPlan = h.reconPlan[0], h.reconPlan[1:]
	}
	if p != nil {
		h.recordFence(p)
	}
	if a == reconResolved {
		if p == nil {
			a = reconApplied
		} else {
			h.interrupted = true
		}
	}
	if p != nil && p.Status != cstype.StatusReconciling {
		h.violate("Reconcile of %s while it is %s", p.ID, p.Status)
	}
	if p != nil && p.OperationID != req.OperationID {
		h.violate("Reconcile of %s with operation %s, stored %s", p.ID, req.OperationID, p.OperationID)
	}
	h.mu.Unlock()
	switch a {
	case reconResolved:
		if _, err := h.e.Resolve(context.Background(), propIdentities["olga"], p.ID, cstype.StatusFailed, "", "resolved meanwhile", "cli"); err != nil {
			h.mu.Lock()
			h.violate("Resolve of reconciling %s during Reconcile: %v", p.ID, err)
			h.mu.Unlock()
		}
		return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "rcn_" + req.OperationID}, nil
	case reconApplied:
		return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: "rcn_" + req.OperationID}, nil
	case reconNotApplied:
		return &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}, nil
	case reconUnknown:
		return &countersign.Reconciliation{Status: countersign.ReconcileUnknown}, nil
	}
	return nil, errors.New("backend unavailable")
}

// onSettled counts the settlements. Every other one fails: a hook's error is
// logged and must change nothing (the settlement stands, and the hook is not
// run again).
func (h *propHarness) onSettled(ctx context.Context, p *cstype.Proposal) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.settled[p.ID]++
	if !p.Status.Terminal() {
		h.violate("OnSettled for %s in non-terminal status %s", p.ID, p.Status)
	}
	if h.settledCalls++; h.settledCalls%2 == 0 {
		return errors.New("the notification service is down")
	}
	return nil
}

// --- steps ---

type propOp struct {
	name   string
	weight int
	run    func(*rapid.T)
}

func (h *propHarness) ops() []propOp {
	return []propOp{
		{"call", 5, h.opCall},
		{"again", 2, h.opAgain},
		{"resume", 3, h.opResume},
		{"decide", 6, h.opDecide},
		{"cancel", 1, h.opCancel},
		{"clock", 2, h.opClock},
		{"worker", 3, h.opWorker},
		{"resolve", 1, h.opResolve},
		{"revoke", 1, h.opRevoke},
		{"delete-thread", 1, h.opDeleteThread},
		{"zombie", 1, h.opZombie},
	}
}

func (h *propHarness) beginStep(name string) {
	h.step++
	h.stepName = name
	h.target = ""
	h.mu.Lock()
	h.execPlan, h.reconPlan = nil, nil
	h.interrupted, h.cancelled = false, false
	h.mu.Unlock()
}

func (h *propHarness) logf(t *rapid.T, format string, args ...any) {
	t.Log(h.alias(fmt.Sprintf("step %d (%s): ", h.step, h.stepName) + fmt.Sprintf(format, args...)))
}

// fatalf fails the run at the first broken invariant. Messages name records
// by stable aliases (P1, C1, OP1, G1 in order of appearance) instead of their
// random ids, so that rapid sees the same failure when it replays a run, and
// can shrink it.
func (h *propHarness) fatalf(t *rapid.T, format string, args ...any) {
	t.Helper()
	t.Fatalf("after step %d (%s): %s", h.step, h.stepName, h.alias(fmt.Sprintf(format, args...)))
}

var propIDPattern = regexp.MustCompile(`(prp|cnf|op|grt)_[0-9a-f]{32}`)

func (h *propHarness) alias(s string) string {
	return propIDPattern.ReplaceAllStringFunc(s, func(id string) string {
		if a, ok := h.aliases[id]; ok {
			return a
		}
		kind := map[string]string{"prp": "P", "cnf": "C", "op": "OP", "grt": "G"}[id[:strings.IndexByte(id, '_')]]
		h.aliasCount[kind]++
		a := fmt.Sprintf("%s%d", kind, h.aliasCount[kind])
		h.aliases[id] = a
		return a
	})
}

// drawScript draws what the Execute and Reconcile hooks do during this step.
func (h *propHarness) drawScript(t *rapid.T) {
	ex := rapid.SliceOfN(rapid.SampledFrom(execBehaviours), 0, 4).Draw(t, "execScript")
	rc := rapid.SliceOfN(rapid.SampledFrom(reconAnswers), 0, 3).Draw(t, "reconScript")
	h.mu.Lock()
	h.execPlan, h.reconPlan = ex, rc
	h.mu.Unlock()
}

// proposals returns the last snapshot in first-seen order.
func (h *propHarness) proposals() []*cstype.Proposal {
	out := make([]*cstype.Proposal, 0, len(h.order))
	for _, id := range h.order {
		out = append(out, h.prev[id])
	}
	return out
}

// pickProposal draws a proposal, preferring those in the given statuses.
func (h *propHarness) pickProposal(t *rapid.T, label string, prefer ...cstype.Status) *cstype.Proposal {
	all := h.proposals()
	if len(all) == 0 {
		return nil
	}
	var preferred []*cstype.Proposal
	for _, p := range all {
		if slices.Contains(prefer, p.Status) {
			preferred = append(preferred, p)
		}
	}
	if len(preferred) > 0 {
		switch rapid.IntRange(0, 7).Draw(t, label+".preferred") {
		case 0: // any proposal
		case 1, 2, 3: // the newest preferred one
			return preferred[len(preferred)-1]
		default:
			return preferred[rapid.IntRange(0, len(preferred)-1).Draw(t, label)]
		}
	}
	return all[rapid.IntRange(0, len(all)-1).Draw(t, label)]
}

func propInput(customer string, amount int, canonicalOrder bool) (raw, canon string) {
	canon = fmt.Sprintf(`{"amount":%d,"customer":%q}`, amount, customer)
	if canonicalOrder {
		return canon, canon
	}
	return fmt.Sprintf(`{ "customer": %q, "amount": %d }`, customer, amount), canon
}

func (h *propHarness) drawInput(t *rapid.T) (raw, canon string) {
	if rapid.IntRange(0, 29).Draw(t, "invalidInput") == 0 {
		return `{"amount":"lots","customer":"c1"}`, ""
	}
	return propInput(
		rapid.SampledFrom([]string{"c1", "c2"}).Draw(t, "customer"),
		rapid.IntRange(1, 2).Draw(t, "amount"),
		rapid.Bool().Draw(t, "canonicalOrder"),
	)
}

// opResume is the agent coming back for an approval its caller executes: it
// repeats the tool call of an approved wait or two-phase proposal, with the
// confirmation as evidence for two-phase (the same tool call id, or a new one).
func (h *propHarness) opResume(t *rapid.T) {
	var cands []*cstype.Proposal
	for _, p := range h.proposals() {
		if p.Status == cstype.StatusApproved && p.Mode.CallerExecutes() {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		h.stepName = "call"
		h.opCall(t)
		return
	}
	p := cands[rapid.IntRange(0, len(cands)-1).Draw(t, "resumeOf")]
	var pc *propCall
	for _, c := range h.calls {
		if c.call.ThreadID == p.ThreadID && c.call.ToolCallID == p.ToolCallID {
			cp := *c
			pc = &cp
			break
		}
	}
	if pc == nil {
		panic("no call for proposal " + p.ID)
	}
	if p.Mode == countersign.ModeTwoPhase {
		pc.call.Evidence = p.ConfirmationID
		if rapid.Bool().Draw(t, "newToolCall") {
			h.nextTool++
			pc.call.ToolCallID = fmt.Sprintf("tc%d", h.nextTool)
			h.calls = append(h.calls, pc)
		}
	}
	h.stepName = "call"
	if rapid.IntRange(0, 2).Draw(t, "late") == 0 {
		// The agent comes back at the deadline, or just before it: an
		// approval its caller never consumed lapses there.
		d := p.ExpiresAt.Sub(h.clock.Now()) - rapid.SampledFrom([]time.Duration{0, 0, time.Nanosecond}).Draw(t, "lateBy")
		if d > 0 {
			h.clock.Advance(d)
			h.logf(t, "advance %v, to the deadline of %s", d, p.ID)
		}
	}
	h.drawScript(t)
	h.doCall(t, pc)
}

// opAgain is the agent asking again, under a new tool call id, for what an
// approval that asked for a grant approved: the same requester, thread,
// action, and mostly the same run and input. While the grant is live, a
// match is approved by it.
func (h *propHarness) opAgain(t *rapid.T) {
	gs, err := h.st.ListGrants(context.Background(), &store.ListGrantsParams{Tenant: propTenant})
	if err != nil {
		h.fatalf(t, "ListGrants: %v", err)
	}
	var o *cstype.Proposal
	if len(gs) > 0 {
		o = h.prev[gs[rapid.IntRange(0, len(gs)-1).Draw(t, "againOf")].OriginProposalID]
	}
	h.stepName = "call"
	if o == nil {
		h.opCall(t)
		return
	}
	h.drawScript(t)
	h.nextTool++
	c := countersign.Call{
		Identity: propIdentities[o.Requester], ThreadID: o.ThreadID, RunID: o.RunID,
		ToolCallID: fmt.Sprintf("tc%d", h.nextTool), Action: o.Action, Input: o.RawInput,
		Mode: rapid.SampledFrom([]countersign.Mode{"", "", countersign.ModeWait, countersign.ModeTwoPhase, countersign.ModeIndependent}).Draw(t, "mode"),
	}
	canon := string(o.Input)
	if rapid.IntRange(0, 4).Draw(t, "otherRun") == 0 {
		c.RunID = map[string]string{"r1": "r2", "r2": "r1"}[c.RunID]
	}
	if rapid.IntRange(0, 4).Draw(t, "otherInput") == 0 {
		var raw string
		raw, canon = h.drawInput(t)
		c.Input = []byte(raw)
	}
	pc := &propCall{call: c, canon: canon}
	if canon != "" {
		h.calls = append(h.calls, pc)
	}
	h.doCall(t, pc)
}

func (h *propHarness) opCall(t *rapid.T) {
	h.drawScript(t)
	var pc *propCall
	if len(h.calls) > 0 && rapid.IntRange(0, 2).Draw(t, "repeat") == 0 {
		// A repeated tool call: the same call again, or (two-phase) the same
		// call carrying its own proposal's confirmation as evidence.
		prev := h.calls[rapid.IntRange(0, len(h.calls)-1).Draw(t, "prevCall")]
		cp := *prev
		pc = &cp
		if pc.call.Evidence == "" && rapid.Bool().Draw(t, "withOwnEvidence") {
			if p, err := h.st.GetProposalByToolCall(context.Background(), &store.GetProposalByToolCallParams{
				Tenant: propTenant, ThreadID: pc.call.ThreadID, ToolCallID: pc.call.ToolCallID,
			}); err == nil {
				pc.call.Evidence = p.ConfirmationID
			}
		}
	} else {
		h.nextTool++
		actor := "alice"
		if rapid.IntRange(0, 5).Draw(t, "erin") == 0 {
			actor = "erin"
		}
		raw, canon := h.drawInput(t)
		c := countersign.Call{
			Identity:   propIdentities[actor],
			ThreadID:   rapid.SampledFrom([]string{"t1", "t2"}).Draw(t, "thread"),
			RunID:      rapid.SampledFrom([]string{"r1", "r2"}).Draw(t, "run"),
			ToolCallID: fmt.Sprintf("tc%d", h.nextTool),
			Action:     rapid.SampledFrom(propActions).Draw(t, "action"),
			Input:      []byte(raw),
			Mode: rapid.SampledFrom([]countersign.Mode{"", "", countersign.ModeWait, countersign.ModeTwoPhase, countersign.ModeIndependent}).
				Draw(t, "mode"),
		}
		if len(h.calls) > 0 && rapid.IntRange(0, 3).Draw(t, "sameRequest") == 0 {
			// The agent asks for the same thing again under a new tool call
			// id: grants and replacement keys match.
			prev := h.calls[rapid.IntRange(0, len(h.calls)-1).Draw(t, "sameAs")].call
			c.Identity, c.ThreadID, c.RunID, c.Action, c.Input = prev.Identity, prev.ThreadID, prev.RunID, prev.Action, prev.Input
			canon = h.canonOf(prev)
		}
		switch rapid.IntRange(0, 4).Draw(t, "evidence") {
		case 0: // bogus
			c.Evidence = "cnf_bogus"
		case 1, 2: // an earlier confirmation, bound to the right call or not
			if p := h.pickProposal(t, "evidenceOf", cstype.StatusApproved, cstype.StatusPending); p != nil {
				c.Evidence = p.ConfirmationID
				c.ThreadID, c.Action, c.Identity = p.ThreadID, p.Action, propIdentities[p.Requester]
				raw, canon = string(p.RawInput), string(p.Input)
				c.Input = []byte(raw)
				switch rapid.IntRange(0, 5).Draw(t, "evidenceBinding") {
				case 0:
					c.ThreadID = otherThread(c.ThreadID)
				case 1:
					c.Identity = propIdentities[map[string]string{"alice": "erin", "erin": "alice"}[c.Identity.Actor]]
				case 2:
					raw, canon = h.drawInput(t)
					c.Input = []byte(raw)
				}
			}
		}
		pc = &propCall{call: c, canon: canon}
		if canon != "" {
			h.calls = append(h.calls, pc)
		}
	}
	h.doCall(t, pc)
}

func (h *propHarness) doCall(t *rapid.T, pc *propCall) {
	c := pc.call
	c.WaitTimeout = propWait
	ci := &callInfo{Thread: c.ThreadID, Tool: c.ToolCallID, Actor: c.Identity.Actor, Evidence: c.Evidence, Canon: pc.canon}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), callInfoKey{}, ci))
	h.mu.Lock()
	h.cancelCall = cancel
	h.mu.Unlock()
	now := h.clock.Now()
	// What the store held before the call: the tool call's own proposal, and
	// the proposal the evidence names.
	var existing, ev *cstype.Proposal
	for _, p := range h.proposals() {
		if p.ThreadID == c.ThreadID && p.ToolCallID == c.ToolCallID {
			existing = p
		}
		if c.Evidence != "" && p.ConfirmationID == c.Evidence {
			ev = p
		}
	}
	// A thread belongs to its first caller: a call in a thread another actor
	// owns, or a repeat of another actor's tool call (possible only once a
	// deleted thread was taken by someone else), is refused.
	th, terr := h.st.GetThread(context.Background(), &store.GetThreadParams{Tenant: propTenant, ID: c.ThreadID})
	foreign := terr == nil && th.Owner != c.Identity.Actor || existing != nil && existing.Requester != c.Identity.Actor
	before := len(h.proposals())
	res, err := h.e.Call(ctx, &c)
	cancel()
	h.mu.Lock()
	h.cancelCall = nil
	interrupted, cancelled := h.interrupted, h.cancelled
	h.mu.Unlock()

	desc := fmt.Sprintf("%s %s/%s by %s %s mode=%q evidence=%q", c.Action, c.ThreadID, c.ToolCallID, c.Identity.Actor, c.Input, c.Mode, c.Evidence)
	if err != nil {
		h.logf(t, "Call %s → error %v", desc, err)
		h.cov.add("call error: " + errClass(err))
	} else {
		h.logf(t, "Call %s → %s proposal=%s grant=%s", desc, res.Status, res.ProposalID, res.GrantID)
		h.cov.add(fmt.Sprintf("call → %s grant=%v", res.Status, res.GrantID != ""))
	}

	var forbidden *countersign.ForbiddenError
	switch {
	case foreign:
		h.cov.add("call in another actor's thread")
		if !errors.As(err, &forbidden) || res != nil {
			h.fatalf(t, "Call %s in a thread owned by %s: want *ForbiddenError and no result, got %+v, %v", desc, th.Owner, res, err)
		}
		if after := len(h.proposals()); after != before {
			h.fatalf(t, "Call %s in another actor's thread stored %d proposals", desc, after-before)
		}
		h.mu.Lock()
		for _, x := range h.execs[h.execsSeen:] {
			if x.caller == ci {
				h.violate("Call %s in another actor's thread executed operation %s", desc, x.opID)
			}
		}
		h.mu.Unlock()
		return
	case errors.As(err, &forbidden):
		h.fatalf(t, "Call %s by the thread's owner refused: %v", desc, err)
	}
	var (
		denied   *countersign.DeniedError
		evidence *countersign.EvidenceError
		invalid  *countersign.InvalidInputError
	)
	switch {
	case err == nil:
	case errors.As(err, &invalid):
		if pc.canon != "" {
			h.fatalf(t, "valid input %s refused: %v", c.Input, err)
		}
		return
	case errors.As(err, &denied), errors.As(err, &evidence):
	case cancelled && errors.Is(err, context.Canceled):
		// The caller gave up while an idempotent retry was pending.
	case interrupted && errors.Is(err, cstype.ErrLeaseLost):
		// A stalled holder whose lease was taken over, or a reconciler
		// whose proposal an operator resolved meanwhile.
	default:
		h.fatalf(t, "Call %s: unexpected error %v", desc, err)
	}
	if pc.canon == "" && err == nil {
		h.fatalf(t, "invalid input %s accepted: %s", c.Input, res.Status)
	}
	h.checkEvidence(t, c, pc.canon, existing, ev, now, res, err)
	h.checkReplay(t, c, existing, now, res, err)
	h.checkCreated(t, c, pc.canon, existing, res, err, interrupted || cancelled)
	if err == nil && res.ProposalID != "" {
		p, gerr := h.st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: propTenant, ID: res.ProposalID})
		if gerr != nil {
			h.fatalf(t, "Call answered for proposal %s that the store does not have: %v", res.ProposalID, gerr)
		}
		// The grant that approved the proposal (frozen at its creation) is
		// named by every answer that reports its outcome.
		if g, _ := grantOf(p); res.GrantID != g && (res.GrantID != "" || outcomeStatus(res.Status)) {
			h.fatalf(t, "Call answered %s for proposal %s with grant %q; the proposal was approved by grant %q", res.Status, p.ID, res.GrantID, g)
		}
		if interrupted || cancelled {
			return
		}
		want := []cstype.Status{cstype.Status(res.Status)}
		switch res.Status {
		case countersign.ResultPending:
			// Expired too: when a wait-mode call expires the proposal itself
			// (a lapsed approval, a due pending one) and its WaitTimeout
			// fires together with the wake-up, it answers from its stale copy.
			want = []cstype.Status{cstype.StatusPending, cstype.StatusApproved, cstype.StatusExecuting, cstype.StatusExpired}
		case countersign.ResultConfirmationRequired:
			want = []cstype.Status{cstype.StatusPending, cstype.StatusApproved}
		}
		if !slices.Contains(want, p.Status) {
			h.fatalf(t, "Call answered %s for proposal %s, which the store holds as %s", res.Status, p.ID, p.Status)
		}
	}
	if err != nil || res == nil {
		return
	}
	if res.GrantID != "" && res.ProposalID == "" {
		h.fatalf(t, "Call answered %s with grant %s and no proposal", res.Status, res.GrantID)
	}
	if res.Status == countersign.ResultConfirmationRequired {
		p, gerr := h.st.GetProposal(context.Background(), &store.GetProposalParams{Tenant: propTenant, ID: res.ProposalID})
		if gerr != nil || p.ConfirmationID != res.ConfirmationID || res.ConfirmationID == "" {
			h.fatalf(t, "confirmation %q for proposal %s does not match the store (%v)", res.ConfirmationID, res.ProposalID, gerr)
		}
	}
	if res.Status == countersign.ResultPending || res.Status == countersign.ResultConfirmationRequired {
		if res.Executed == nil || *res.Executed {
			h.fatalf(t, "a %s answer must say executed=false", res.Status)
		}
	}
}

// outcomeStatus reports whether a call's answer reports its proposal's
// outcome (terminal or reconciling), rather than a receipt or a confirmation.
func outcomeStatus(s countersign.ResultStatus) bool {
	return cstype.Status(s).Terminal() || s == countersign.ResultReconciling
}

// checkReplay checks a repeated tool call against the state before it: a
// settled proposal answers its recorded outcome without running anything,
// and a caller-executes approval that lapsed answers expired (the claim finds
// it past its deadline and expires it).
func (h *propHarness) checkReplay(t *rapid.T, c countersign.Call, existing *cstype.Proposal, now time.Time, res *countersign.Result, err error) {
	if existing == nil {
		return
	}
	switch {
	case c.Evidence != "" && c.Evidence == existing.ConfirmationID && existing.Mode == countersign.ModeTwoPhase &&
		slices.Contains([]cstype.Status{cstype.StatusRejected, cstype.StatusCancelled, cstype.StatusSuperseded}, existing.Status):
		// Evidence of a proposal a human (or a newer call) said no to is
		// denied, on its own tool call as on any other.
		h.cov.add("replay presenting its own denied evidence")
		var ee *countersign.EvidenceError
		if !errors.As(err, &ee) || ee.Reason != countersign.EvidenceDenied || res != nil {
			h.fatalf(t, "replay of tool call %s/%s with the evidence of its %s proposal %s: want denied evidence, got %+v, %v", c.ThreadID, c.ToolCallID, existing.Status, existing.ID, res, err)
		}
	case existing.Status.Terminal():
		h.cov.add("replay of a settled tool call")
		g, _ := grantOf(existing)
		if err != nil || res.ProposalID != existing.ID || res.Status != countersign.ResultStatus(existing.Status) || res.GrantID != g {
			h.fatalf(t, "replay of tool call %s/%s, whose proposal %s is %s (grant %q): got %+v, %v", c.ThreadID, c.ToolCallID, existing.ID, existing.Status, g, res, err)
		}
		if o := existing.Outcome; o != nil && (fmtBool(res.Executed) != fmtBool(o.Executed) || res.Receipt != o.Receipt) {
			h.fatalf(t, "replay of tool call %s/%s answered executed=%s receipt %q; recorded executed=%s receipt %q",
				c.ThreadID, c.ToolCallID, fmtBool(res.Executed), res.Receipt, fmtBool(o.Executed), o.Receipt)
		}
		h.mu.Lock()
		for _, x := range h.execs[h.execsSeen:] {
			if x.proposalID == existing.ID || x.opID == existing.OperationID {
				h.violate("replay of settled tool call %s/%s executed operation %s", c.ThreadID, c.ToolCallID, x.opID)
			}
		}
		h.mu.Unlock()
	case existing.Status == cstype.StatusApproved && store.Due(existing, now) &&
		(existing.Mode == countersign.ModeWait || existing.Mode == countersign.ModeTwoPhase && c.Evidence == existing.ConfirmationID):
		h.cov.add(fmt.Sprintf("resume of a lapsed approval (%s)", existing.Mode))
		if err != nil || res.ProposalID != existing.ID || res.Status != countersign.ResultExpired {
			h.fatalf(t, "%s tool call %s/%s resumed after its approval %s lapsed: want expired, got %+v, %v", existing.Mode, c.ThreadID, c.ToolCallID, existing.ID, res, err)
		}
	}
}

// checkCreated checks the proposal a call created: it freezes the call's
// requester, run, action and canonical input, and the call's mode (or its
// rule's). A grant's approval is never two_phase (wait instead): it was
// claimed and executed by the caller at once, and the answer is its outcome,
// naming the grant.
func (h *propHarness) checkCreated(t *rapid.T, c countersign.Call, canon string, existing *cstype.Proposal, res *countersign.Result, err error, disturbed bool) {
	if existing != nil {
		return
	}
	p, gerr := h.st.GetProposalByToolCall(context.Background(), &store.GetProposalByToolCallParams{
		Tenant: propTenant, ThreadID: c.ThreadID, ToolCallID: c.ToolCallID,
	})
	if gerr != nil {
		return
	}
	g, byGrant := grantOf(p)
	mode := c.Mode
	if mode == "" {
		mode = h.rules[c.Action].Mode
	}
	allowed := h.rules[c.Action].Effect == countersign.EffectAllow
	if byGrant && mode == countersign.ModeTwoPhase || allowed {
		mode = countersign.ModeWait // the caller executes at once
	}
	h.mu.Lock()
	sv, prepared := h.prepared[c.ThreadID+"/"+c.ToolCallID]
	h.mu.Unlock()
	if !prepared || p.StateVersion != sv || p.Preview != p.Action+" "+string(p.Input) {
		h.fatalf(t, "call %s/%s (grant %v) created proposal %s with state version %q and preview %q; its Prepare named %q (ran: %v)",
			c.ThreadID, c.ToolCallID, byGrant, p.ID, p.StateVersion, p.Preview, sv, prepared)
	}
	if p.Requester != c.Identity.Actor || p.RunID != c.RunID || p.Action != c.Action || string(p.Input) != canon || p.Mode != mode {
		h.fatalf(t, "call %s/%s by %s in run %s (%s %s, mode %s, grant %v) created proposal %s by %s in run %s (%s %s, mode %s)",
			c.ThreadID, c.ToolCallID, c.Identity.Actor, c.RunID, c.Action, canon, mode, byGrant, p.ID, p.Requester, p.RunID, p.Action, p.Input, p.Mode)
	}
	if allowed {
		// Recorded before it ran, and answered with its outcome.
		h.cov.add(fmt.Sprintf("allowed write → %s", p.Status))
		if !h.allowedRecord(p) || p.ConsumedBy != p.ToolCallID {
			h.fatalf(t, "allowed call %s/%s recorded %+v: want no approvers, no decisions, consumed by its own tool call", c.ThreadID, c.ToolCallID, p)
		}
		if err == nil && !disturbed && (res.ProposalID != p.ID || res.Proposal == nil || !outcomeStatus(res.Status) || res.Status != countersign.ResultStatus(p.Status)) {
			h.fatalf(t, "allowed call %s/%s answered %+v; its record %s is %s", c.ThreadID, c.ToolCallID, res, p.ID, p.Status)
		}
		return
	}
	if !byGrant {
		return
	}
	h.cov.add(fmt.Sprintf("grant call → %s (%s)", p.Status, p.Mode))
	if err != nil && disturbed {
		return // a stalled holder, or a caller who went away: checked by the caller
	}
	if err != nil || res.ProposalID != p.ID || res.GrantID != g || res.Proposal == nil || !outcomeStatus(res.Status) {
		h.fatalf(t, "call %s/%s approved by grant %s: want the outcome of proposal %s naming the grant, got %+v, %v", c.ThreadID, c.ToolCallID, g, p.ID, res, err)
	}
	if !disturbed && res.Status != countersign.ResultStatus(p.Status) {
		h.fatalf(t, "call %s/%s approved by grant %s answered %s; its proposal %s is %s", c.ThreadID, c.ToolCallID, g, res.Status, p.ID, p.Status)
	}
}

// checkEvidence checks docs/design.md §4's evidence rules against the state
// before the call: evidence from another thread or actor (or of a proposal
// that is not two-phase) is inert, and a refusal names the right reason.
func (h *propHarness) checkEvidence(t *rapid.T, c countersign.Call, canon string, existing, ev *cstype.Proposal, now time.Time, res *countersign.Result, err error) {
	if c.Evidence == "" || existing != nil {
		return // no evidence, or a repeated tool call: it resumes its own proposal
	}
	inert := ev == nil || ev.ThreadID != c.ThreadID || ev.Requester != c.Identity.Actor || ev.Mode != countersign.ModeTwoPhase
	var ee *countersign.EvidenceError
	refused := errors.As(err, &ee)
	switch {
	case inert && refused:
		h.fatalf(t, "inert evidence %s (of %v) refused: %v", c.Evidence, ev != nil, err)
	case inert && err == nil && ev != nil && res.ProposalID == ev.ID:
		h.fatalf(t, "inert evidence %s answered with its proposal %s", c.Evidence, ev.ID)
	case inert || ev == nil:
		return
	}
	mismatch := ev.Action != c.Action || string(ev.Input) != canon
	switch {
	case mismatch && !(refused && ee.Reason == countersign.EvidenceMismatch):
		h.fatalf(t, "evidence %s of %s for another input or action: want mismatch, got %v %v", c.Evidence, ev.ID, res, err)
	case mismatch:
	case refused && ee.Reason == countersign.EvidenceMismatch:
		h.fatalf(t, "evidence %s refused as a mismatch for the same action and input", c.Evidence)
	case refused && ee.Reason == countersign.EvidenceDenied &&
		!slices.Contains([]cstype.Status{cstype.StatusRejected, cstype.StatusCancelled, cstype.StatusSuperseded}, ev.Status):
		h.fatalf(t, "evidence %s refused as denied; its proposal was %s", c.Evidence, ev.Status)
	case refused && ee.Reason == countersign.EvidenceConsumed &&
		(ev.Status == cstype.StatusPending || slices.Contains(neverExecuted, ev.Status)):
		h.fatalf(t, "evidence %s refused as consumed; its proposal was %s", c.Evidence, ev.Status)
	case store.Due(ev, now):
	case ev.Status == cstype.StatusPending && (err != nil || res.Status != countersign.ResultConfirmationRequired || res.ProposalID != ev.ID):
		h.fatalf(t, "evidence %s of pending %s: want its confirmation again, got %v %v", c.Evidence, ev.ID, res, err)
	case ev.Status == cstype.StatusApproved && err == nil && res.ProposalID != ev.ID:
		h.fatalf(t, "evidence %s of approved %s answered for %s", c.Evidence, ev.ID, res.ProposalID)
	}
}

func errClass(err error) string {
	var (
		denied   *countersign.DeniedError
		evidence *countersign.EvidenceError
		invalid  *countersign.InvalidInputError
	)
	switch {
	case errors.As(err, &denied):
		return "denied " + denied.Code
	case errors.As(err, &evidence):
		return "evidence " + string(evidence.Reason)
	case errors.As(err, &invalid):
		return "invalid input"
	case errors.Is(err, context.Canceled):
		return "context canceled"
	case errors.Is(err, cstype.ErrLeaseLost):
		return "lease lost"
	case errors.Is(err, cstype.ErrConflict):
		return "conflict"
	}
	return "other"
}

func (h *propHarness) canonOf(c countersign.Call) string {
	for _, pc := range h.calls {
		if string(pc.call.Input) == string(c.Input) {
			return pc.canon
		}
	}
	panic("unknown input " + string(c.Input))
}

func otherThread(th string) string {
	if th == "t1" {
		return "t2"
	}
	return "t1"
}

func (h *propHarness) opDecide(t *rapid.T) {
	p := h.pickProposal(t, "decideOn", cstype.StatusPending)
	if p == nil {
		h.logf(t, "no proposal to decide")
		return
	}
	h.target = p.ID
	deciders := []string{"bob", "carol", "bob", "carol", "bob", "carol", "bob", "carol", "dave", "alice", "grant:ops", "grant:ops"}
	actor := rapid.SampledFrom(deciders).Draw(t, "decider")
	verdict := countersign.Approve
	if rapid.IntRange(0, 3).Draw(t, "reject") == 0 {
		verdict = countersign.Reject
	}
	// Ask to remember often where the rule allows it, rarely elsewhere.
	var remember countersign.Scope
	if rapid.IntRange(0, 7).Draw(t, "askRemember") < map[bool]int{true: 4, false: 1}[len(p.RememberScopes) > 0] {
		remember = rapid.SampledFrom([]countersign.Scope{countersign.ScopeRun, countersign.ScopeThread}).Draw(t, "remember")
	}
	via := rapid.SampledFrom([]string{"", "", "web", "", "web", "text"}).Draw(t, "via")
	now := h.clock.Now()
	res, err := h.e.Decide(context.Background(), &countersign.Decision{
		Identity: propIdentities[actor], ProposalID: p.ID, Verdict: verdict, Via: via, Remember: remember,
	})
	if err != nil {
		h.logf(t, "Decide %s %s by %s via %q remember %q → error %v", p.ID, verdict, actor, via, remember, err)
	} else {
		h.logf(t, "Decide %s %s by %s via %q remember %q → %s (%s)", p.ID, verdict, actor, via, remember, res.Status, res.Proposal.Status)
	}

	// The answer docs/design.md §5 asks for.
	if remember != "" && verdict == countersign.Reject {
		if !errors.Is(err, countersign.ErrInvalidCall) {
			h.fatalf(t, "remember with a rejection: want ErrInvalidCall, got %v", err)
		}
		return
	}
	forbidden := !mayDecide(p, actor, verdict) || (via != "" && len(p.Channels) > 0 && !slices.Contains(p.Channels, via)) ||
		(via == "" && len(p.Channels) > 0 && !slices.Contains(p.Channels, "api"))
	// Past the decider's check: a scope the rule does not allow, or a run
	// grant of a proposal made outside a run, is INVALID_REMEMBER.
	invalidRemember := !forbidden && remember != "" &&
		(!slices.Contains(p.RememberScopes, remember) || (remember == countersign.ScopeRun && p.RunID == ""))
	var fe *countersign.ForbiddenError
	var ire *countersign.InvalidRememberError
	switch {
	case errors.As(err, &fe):
		h.cov.add("decide → forbidden")
	case errors.As(err, &ire):
		h.cov.add("decide → invalid remember")
	case err != nil:
		h.cov.add("decide → error")
	default:
		h.cov.add("decide → " + string(res.Status))
	}
	if forbidden != errors.As(err, &fe) || invalidRemember != errors.As(err, &ire) {
		h.fatalf(t, "Decide by %s (%s via %q remember %q) on %s: forbidden=%v invalid remember=%v, got %v", actor, verdict, via, remember, p.ID, forbidden, invalidRemember, err)
	}
	if forbidden || invalidRemember {
		return
	}
	if err != nil {
		h.fatalf(t, "Decide: unexpected error %v", err)
	}
	want := expectDecide(p, actor, verdict, now)
	if res.Status != want {
		h.fatalf(t, "Decide %s by %s on %s proposal %s (expires %v, now %v): got %s, want %s",
			verdict, actor, p.Status, p.ID, p.ExpiresAt, now, res.Status, want)
	}
}

// mayDecide reports whether actor may take the verdict on p (docs/design.md §5).
func mayDecide(p *cstype.Proposal, actor string, verdict countersign.Verdict) bool {
	id := propIdentities[actor]
	if verdict == countersign.Approve && p.ForbidSelfApproval && actor == p.Requester {
		return false
	}
	for _, a := range p.Approvers {
		switch {
		case a == "requester" && actor == p.Requester:
			return true
		case strings.HasPrefix(a, "role:") && slices.Contains(id.Roles, strings.TrimPrefix(a, "role:")):
			return true
		case strings.HasPrefix(a, "actor:") && strings.TrimPrefix(a, "actor:") == actor:
			return true
		}
	}
	return false
}

// propGrantActor prefixes the actor of the decision a grant takes.
const propGrantActor = "grant:"

// isGrantDecision reports whether d has the form of a grant's decision: an
// approval by "grant:<id>" via "grant".
func isGrantDecision(d cstype.Decision) bool {
	return strings.HasPrefix(d.Actor, propGrantActor) && len(d.Actor) > len(propGrantActor) &&
		d.Via == "grant" && d.Decision == cstype.VerdictApproved
}

// grantOf returns the grant that approved p when it was created: its first
// decision, in the form of a grant's. (checkGrants checks, in the step the
// proposal appears, that the grant was live and matched the call.)
func grantOf(p *cstype.Proposal) (string, bool) {
	if len(p.Decisions) == 0 || !isGrantDecision(p.Decisions[0]) {
		return "", false
	}
	return strings.TrimPrefix(p.Decisions[0].Actor, propGrantActor), true
}

// quorumMet reports whether p holds a valid approval: a grant's decision
// (which stands for the quorum, whatever the rule says), or a quorum of
// distinct approvals by allowed deciders.
func quorumMet(p *cstype.Proposal) bool {
	if _, ok := grantOf(p); ok {
		return true
	}
	return approvedBy(p) >= max(p.Quorum, 1)
}

// approvedBy counts the distinct actors who approved p and were allowed to.
func approvedBy(p *cstype.Proposal) int {
	seen := map[string]bool{}
	for _, d := range p.Decisions {
		if d.Decision == cstype.VerdictApproved && mayDecide(p, d.Actor, countersign.Approve) {
			seen[d.Actor] = true
		}
	}
	return len(seen)
}

func expectDecide(p *cstype.Proposal, actor string, verdict countersign.Verdict, now time.Time) countersign.DecideStatus {
	if store.Due(p, now) || p.Status == cstype.StatusExpired {
		return countersign.DecideExpired
	}
	switch p.Status {
	case cstype.StatusPending:
		if verdict == countersign.Approve && slices.ContainsFunc(p.Decisions, func(d cstype.Decision) bool {
			return d.Actor == actor && d.Decision == cstype.VerdictApproved
		}) {
			return countersign.DecideUnchanged
		}
		return countersign.DecideApplied
	case cstype.StatusRejected:
		if verdict == countersign.Reject {
			return countersign.DecideUnchanged
		}
		return countersign.DecideConflict
	case cstype.StatusSuperseded, cstype.StatusCancelled:
		return countersign.DecideConflict
	default: // approved and after
		if verdict == countersign.Approve {
			return countersign.DecideUnchanged
		}
		return countersign.DecideConflict
	}
}

func (h *propHarness) opCancel(t *rapid.T) {
	p := h.pickProposal(t, "cancelOf", cstype.StatusPending)
	if p == nil {
		h.logf(t, "no proposal to cancel")
		return
	}
	h.target = p.ID
	actor := p.Requester
	if rapid.IntRange(0, 3).Draw(t, "cancelByOther") == 0 {
		actor = rapid.SampledFrom([]string{"bob", "alice", "erin"}).Draw(t, "canceller")
	}
	now := h.clock.Now()
	got, err := h.e.Cancel(context.Background(), propIdentities[actor], p.ID, "api", "changed my mind")
	h.logf(t, "Cancel %s (%s) by %s → %v", p.ID, p.Status, actor, err)
	var fe *countersign.ForbiddenError
	switch {
	case actor != p.Requester:
		if !errors.As(err, &fe) {
			h.fatalf(t, "Cancel by %s of %s's proposal: want ForbiddenError, got %v", actor, p.Requester, err)
		}
	case p.Status == cstype.StatusCancelled:
		if err != nil || got.Status != countersign.DecideUnchanged || got.Proposal.Status != cstype.StatusCancelled {
			h.fatalf(t, "Cancel of a cancelled proposal: %+v, %v; want unchanged", got, err)
		}
	case store.Due(p, now):
		if !errors.Is(err, countersign.ErrConflict) {
			h.fatalf(t, "Cancel of a due proposal: want a conflict, got %v", err)
		}
	case p.Status == cstype.StatusPending:
		if err != nil || got.Status != countersign.DecideApplied || got.Proposal.Status != cstype.StatusCancelled {
			h.fatalf(t, "Cancel of a pending proposal: %+v, %v; want applied", got, err)
		}
	default:
		if !errors.Is(err, countersign.ErrConflict) {
			h.fatalf(t, "Cancel of a %s proposal: want a conflict, got %v", p.Status, err)
		}
	}
}

var propAdvances = []time.Duration{time.Second, 10 * time.Second, propLease + time.Second, 61 * time.Second,
	2*time.Minute + time.Second, 5*time.Minute + time.Second, 11 * time.Minute}

func (h *propHarness) opClock(t *rapid.T) {
	d := rapid.SampledFrom(propAdvances).Draw(t, "advance")
	if rapid.IntRange(0, 3).Draw(t, "toDeadline") == 0 {
		// To a deadline exactly, or just before it.
		now := h.clock.Now()
		var ds []time.Duration
		for _, p := range h.proposals() {
			if (p.Status == cstype.StatusPending || p.Status == cstype.StatusApproved) && p.ExpiresAt.After(now) {
				ds = append(ds, p.ExpiresAt.Sub(now))
			}
		}
		if len(ds) > 0 {
			d = ds[rapid.IntRange(0, len(ds)-1).Draw(t, "deadlineOf")] - rapid.SampledFrom([]time.Duration{0, time.Nanosecond}).Draw(t, "beforeBy")
		}
	}
	h.clock.Advance(d)
	if rapid.Bool().Draw(t, "sweep") {
		h.stepName = "sweep"
		n, err := h.e.Sweep(context.Background(), 0)
		h.logf(t, "advance %v, sweep → %d, %v", d, n, err)
		if err != nil {
			h.fatalf(t, "Sweep: %v", err)
		}
		return
	}
	h.logf(t, "advance %v", d)
}

func (h *propHarness) opWorker(t *rapid.T) {
	h.drawScript(t)
	// Often the worker wakes when a reconciling proposal's next attempt is
	// due: exactly then, or just before (when it must leave it alone).
	var due []time.Time
	now := h.clock.Now()
	for _, p := range h.proposals() {
		if p.Status == cstype.StatusReconciling && p.NextAttemptAt != nil && p.NextAttemptAt.After(now) {
			due = append(due, *p.NextAttemptAt)
		}
	}
	if len(due) > 0 && rapid.Bool().Draw(t, "toNextAttempt") {
		d := due[rapid.IntRange(0, len(due)-1).Draw(t, "nextAttemptOf")].Sub(now) -
			rapid.SampledFrom([]time.Duration{0, 0, time.Nanosecond}).Draw(t, "nextAttemptBeforeBy")
		h.clock.Advance(d)
		h.logf(t, "advance %v, to a next attempt", d)
	}
	runs := rapid.IntRange(1, 3).Draw(t, "runs")
	total := 0
	for range runs {
		n, err := h.w.RunOnce(context.Background())
		if err != nil {
			h.fatalf(t, "RunOnce: %v", err)
		}
		total += n
	}
	h.logf(t, "RunOnce ×%d → %d claimed", runs, total)
}

func (h *propHarness) opResolve(t *rapid.T) {
	p := h.pickProposal(t, "resolveOf", cstype.StatusReconciling, cstype.StatusUnknown)
	if p == nil {
		h.logf(t, "no proposal to resolve")
		return
	}
	h.target = p.ID
	actor := "olga"
	if rapid.IntRange(0, 4).Draw(t, "resolveByNonOperator") == 0 {
		actor = "bob"
	}
	to := rapid.SampledFrom([]cstype.Status{cstype.StatusSucceeded, cstype.StatusFailed}).Draw(t, "resolveTo")
	got, err := h.e.Resolve(context.Background(), propIdentities[actor], p.ID, to, "rcpt_manual", "checked the ledger", "cli")
	h.logf(t, "Resolve %s (%s) to %s by %s → %v", p.ID, p.Status, to, actor, err)
	var fe *countersign.ForbiddenError
	switch {
	case actor != "olga":
		if !errors.As(err, &fe) {
			h.fatalf(t, "Resolve by a non-operator: want ForbiddenError, got %v", err)
		}
	case p.Status == cstype.StatusReconciling || p.Status == cstype.StatusUnknown:
		if err != nil || got.Status != to {
			h.fatalf(t, "Resolve of a %s proposal to %s: %v", p.Status, to, err)
		}
	default:
		if !errors.Is(err, countersign.ErrConflict) {
			h.fatalf(t, "Resolve of a %s proposal: want a conflict, got %v", p.Status, err)
		}
	}
}

func (h *propHarness) opRevoke(t *rapid.T) {
	gs, err := h.e.Grants(context.Background(), propIdentities["olga"], "")
	if err != nil {
		h.fatalf(t, "Grants: %v", err)
	}
	if len(gs) == 0 {
		h.logf(t, "no grant to revoke")
		return
	}
	g := gs[rapid.IntRange(0, len(gs)-1).Draw(t, "grant")]
	got, err := h.e.RevokeGrant(context.Background(), propIdentities["olga"], g.ID)
	h.logf(t, "Revoke %s (origin %s) → %v", g.ID, g.OriginProposalID, err)
	switch {
	case err != nil || got.RevokedAt == nil:
		h.fatalf(t, "RevokeGrant %s: %v (%+v)", g.ID, err, got)
	case g.RevokedAt != nil && !got.RevokedAt.Equal(*g.RevokedAt):
		h.fatalf(t, "RevokeGrant %s again moved its revocation from %v to %v", g.ID, *g.RevokedAt, *got.RevokedAt)
	}
}

// opDeleteThread deletes a thread: outcomes settled while it is gone are
// dropped, and a later proposal in it creates it afresh.
func (h *propHarness) opDeleteThread(t *rapid.T) {
	th := rapid.SampledFrom([]string{"t1", "t2"}).Draw(t, "thread")
	err := h.st.DeleteThread(context.Background(), &store.GetThreadParams{Tenant: propTenant, ID: th})
	h.logf(t, "DeleteThread %s → %v", th, err)
	if err != nil && !(errors.Is(err, cstype.ErrNotFound) && !h.threadAlive[th]) {
		h.fatalf(t, "DeleteThread %s: %v", th, err)
	}
}

// opZombie is an execution that lost its lease and comes back: it renews,
// retries or settles with a fence that is no longer current. The store must
// refuse with ErrLeaseLost and change nothing.
func (h *propHarness) opZombie(t *rapid.T) {
	h.mu.Lock()
	fences := slices.Clone(h.fences)
	h.mu.Unlock()
	if len(fences) == 0 {
		h.logf(t, "no lease to replay")
		return
	}
	f := fences[rapid.IntRange(0, len(fences)-1).Draw(t, "fence")]
	ctx := context.Background()
	p, err := h.st.GetProposal(ctx, &store.GetProposalParams{Tenant: propTenant, ID: f.proposalID})
	if err != nil {
		h.fatalf(t, "GetProposal %s: %v", f.proposalID, err)
	}
	if p.Lease != nil && p.Lease.Token == f.fence.Token && p.Lease.Generation == f.fence.Generation {
		h.logf(t, "the lease on %s is still current", p.ID)
		return
	}
	h.target = p.ID
	what := rapid.SampledFrom([]string{"settle", "renew", "retry"}).Draw(t, "zombieOp")
	switch what {
	case "settle":
		st := rapid.SampledFrom([]cstype.Status{cstype.StatusSucceeded, cstype.StatusFailed, cstype.StatusUnknown, cstype.StatusReconciling}).Draw(t, "zombieStatus")
		_, err = h.st.Settle(ctx, &store.SettleParams{Tenant: propTenant, ID: p.ID, Fence: f.fence, Status: st, Executed: new(bool)})
		what += " " + string(st)
	case "renew":
		_, err = h.st.RenewLease(ctx, &store.RenewLeaseParams{Tenant: propTenant, ID: p.ID, Fence: f.fence, LeaseDuration: propLease})
	case "retry":
		_, err = h.st.BeginRetry(ctx, &store.BeginRetryParams{Tenant: propTenant, ID: p.ID, Fence: f.fence, LeaseDuration: propLease})
	}
	h.logf(t, "stale %s on %s (%s) → %v", what, p.ID, p.Status, err)
	if !errors.Is(err, cstype.ErrLeaseLost) {
		h.fatalf(t, "stale %s on %s proposal %s: want ErrLeaseLost, got %v", what, p.Status, p.ID, err)
	}
}
