package countersign

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/internal/notify"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/textdecision"
	"go.opentelemetry.io/otel/trace"
)

// Identity is who is acting: a tenant, an actor, the actor's roles and the
// kind of credential that speaks for the actor (a person's, or the actor's
// agent's: authority.go). Every record belongs to one tenant.
type Identity struct {
	Tenant string
	Actor  string
	Roles  []string
	// Kind is KindHuman (or empty: human) or KindAgent.
	Kind CredentialKind
}

// ActorResolver re-resolves a requester before its approved call executes, so
// that an actor who was removed, or moved to another tenant, does not act.
type ActorResolver interface {
	// ResolveActor returns the actor's current identity, or an error wrapping
	// ErrNotFound when the actor is gone.
	ResolveActor(ctx context.Context, tenant, actor string) (*Identity, error)
}

// Observer receives what the engine does, for metrics and tracing. Its
// methods are called synchronously on the engine's paths: they must be fast
// and must not block.
type Observer interface {
	// Transition reports a proposal this process moved from one status to
	// p.Status; from is empty for a new proposal.
	Transition(p *cstype.Proposal, from cstype.Status)
	// Executed reports one call of an action's Execute hook and its error.
	Executed(action string, d time.Duration, err error)
	// LeaseLost reports an execution that lost its lease and stopped.
	LeaseLost(proposalID string)
}

// changesKey is the hub key published on every proposal change this process
// sees (see Subscribe).
const changesKey = "\x00changes"

// unnamedChangesKey is published for a change whose tenant a notification
// did not name (a process of an earlier version sent it): every tenant's
// feed listens to it as well as to its own tenantChangesKey.
const unnamedChangesKey = "\x00changes\x00"

// tenantChangesKey is the hub key published on every change of one
// tenant's proposals: feeds wake for their own tenant only. (No proposal id
// holds a NUL, so the keys cannot meet.)
func tenantChangesKey(tenant string) string { return unnamedChangesKey + tenant }

// Subscribe returns a channel that receives a value (coalesced) after any
// proposal change this process makes or, while a Worker listens to the store,
// learns of, in any tenant; and a function that ends the subscription. An
// event stream waits on its Feed's Changes instead, which wakes for its own
// tenant's changes only.
func (e *Engine) Subscribe() (<-chan struct{}, func()) { return e.hub.Subscribe(changesKey) }

// SettledFunc is called once per settlement, by the process that settled.
// Its error is logged and never retried: a hook cannot fail a settlement.
type SettledFunc func(ctx context.Context, p *cstype.Proposal) error

// Defaults for Options.
const (
	DefaultLeaseDuration    = 30 * time.Second
	DefaultMaxAttempts      = 5
	DefaultRetryBackoff     = 100 * time.Millisecond
	DefaultReconcileBackoff = time.Second
	DefaultWaitPoll         = time.Second
	DefaultSweepBatch       = 500
)

// Options configures an Engine. Zero fields take the documented defaults.
type Options struct {
	// Store keeps proposals, decisions, grants and outcomes. Required.
	Store store.Store
	// Policy decides which calls need approval. Default: an empty policy
	// (read actions allowed, write actions ask their requester).
	Policy *Policy
	// Actions are registered at start; Register adds more.
	Actions []*Action
	// ActorResolver, if set, re-resolves requesters before execution.
	ActorResolver ActorResolver
	// Observer, if set, receives transitions, executions and lease losses.
	Observer Observer
	// OnSettled hooks run once per settlement, by the process that settled,
	// in order. Their errors (and panics) are logged, never retried.
	OnSettled []SettledFunc
	// Now is the clock. Default time.Now. Give the store the same clock.
	Now func() time.Time
	// Logger receives the engine's logs. Default slog.Default().
	Logger *slog.Logger
	// LeaseDuration is how long an execution lease lasts between renewals.
	// Default 30s.
	LeaseDuration time.Duration
	// MaxAttempts bounds the executions of an idempotent action whose outcome
	// stays uncertain. Default 5.
	MaxAttempts int
	// RetryBackoff is the first pause between idempotent retries; it doubles.
	// Default 100ms.
	RetryBackoff time.Duration
	// ReconcileBackoff is the first pause before reconciling again after an
	// unknown answer; it doubles. Default 1s.
	ReconcileBackoff time.Duration
	// WaitPoll is how often the engine looks for changes that other
	// processes made to the proposals its calls wait on: one read of each
	// waiting tenant's audit events per WaitPoll, whatever the number of
	// waiters. Default 1s.
	WaitPoll time.Duration
	// Owner names this process in leases. Default host:pid:random.
	Owner string
	// TextDecisions is the vocabulary that reads a message as a decision
	// ("yes", "sim"). Default: the English preset.
	TextDecisions *textdecision.Vocabulary
	// PublicURL is where people reach the server (the configuration's
	// public_url): the passkey relying party's id and origin, and the base
	// of the links the engine gives (a step-up proposal's inbox page, an
	// enrollment link). Default none: then step-up proposals cannot be
	// approved and no enrollment link is made.
	PublicURL string
	// TracerProvider, if set, receives a span for each call, decision,
	// claim, execution, settlement and reconciliation, each about one
	// proposal and in the trace of the call that made it
	// (docs/tracing.md). Default nil: no spans, at the cost of a nil check.
	TracerProvider trace.TracerProvider
}

func (o *Options) validate() error {
	switch {
	case o.Store == nil:
		return errors.New("countersign: Options.Store is required")
	case o.LeaseDuration < 0:
		return fmt.Errorf("countersign: Options.LeaseDuration %v: must be positive", o.LeaseDuration)
	case o.MaxAttempts < 0:
		return fmt.Errorf("countersign: Options.MaxAttempts %d: must be positive", o.MaxAttempts)
	case o.RetryBackoff < 0 || o.ReconcileBackoff < 0 || o.WaitPoll < 0:
		return errors.New("countersign: Options.RetryBackoff, ReconcileBackoff and WaitPoll must be positive")
	}
	return nil
}

// Engine runs calls through policy, proposals, decisions and execution. It is
// safe for concurrent use; many engines (in many processes) may share a store.
type Engine struct {
	store         store.Store
	policy        Policy
	resolver      ActorResolver
	observer      Observer
	onSettled     []SettledFunc
	now           func() time.Time
	log           *slog.Logger
	lease         time.Duration
	maxAttempts   int
	retryBackoff  time.Duration
	reconcileBack time.Duration
	waitPoll      time.Duration
	owner         string
	hub           notify.Hub
	waits         waitWatch
	vocab         *textdecision.Vocabulary
	step          stepUp // stepup.go
	// tracer is nil when Options.TracerProvider is: tracing is off.
	tracer     trace.Tracer
	trailCheck int64 // MaxTrailCheck, less in tests
	// checkpointBudget is DefaultCheckpointBudget, less in tests.
	checkpointBudget int64
	// sessionSweep is startSessionSweep, less in tests.
	sessionSweep int

	mu      sync.RWMutex
	actions map[string]*Action
	// rules holds, for each registered action, the rules that may govern
	// it (see actionRules).
	rules map[string]*actionRules
}

// New validates the options and returns an Engine.
func New(opts Options) (*Engine, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	step, err := newStepUp(opts.PublicURL)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		trailCheck:    MaxTrailCheck,
		store:         opts.Store,
		resolver:      opts.ActorResolver,
		observer:      opts.Observer,
		onSettled:     slices.Clone(opts.OnSettled),
		now:           opts.Now,
		log:           opts.Logger,
		lease:         cmp.Or(opts.LeaseDuration, DefaultLeaseDuration),
		maxAttempts:   cmp.Or(opts.MaxAttempts, DefaultMaxAttempts),
		retryBackoff:  cmp.Or(opts.RetryBackoff, DefaultRetryBackoff),
		reconcileBack: cmp.Or(opts.ReconcileBackoff, DefaultReconcileBackoff),
		waitPoll:      cmp.Or(opts.WaitPoll, DefaultWaitPoll),
		owner:         cmp.Or(opts.Owner, defaultOwner()),
		vocab:         opts.TextDecisions,
		step:          step,
		actions:       map[string]*Action{},
		rules:         map[string]*actionRules{},
	}
	e.checkpointBudget = DefaultCheckpointBudget
	e.sessionSweep = startSessionSweep
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if opts.TracerProvider != nil {
		e.tracer = opts.TracerProvider.Tracer(TracerName)
	}
	if opts.Policy != nil {
		e.policy = *opts.Policy
		e.policy.Rules = slices.Clone(opts.Policy.Rules)
	}
	if err := e.policy.Validate(); err != nil {
		return nil, fmt.Errorf("countersign: %w", err)
	}
	for _, a := range opts.Actions {
		if err := e.Register(a); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func defaultOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%s", cmp.Or(host, "host"), os.Getpid(), randomHex(4))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// Register adds an action, or replaces the registration of the same name. A
// new version makes pending approvals of the old one fail at execution.
// The When of every rule that matches the action is compiled against its
// input schema here: a field the schema cannot have, or a type error, is
// an error, and the action is not registered.
func (e *Engine) Register(a *Action) error {
	if a == nil || a.validator == nil {
		return errors.New("countersign: Register: build actions with NewAction or NewRawAction")
	}
	ar, err := e.policy.compileFor(a)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.actions[a.name], e.rules[a.name] = a, ar
	return nil
}

// Action returns a registered action.
func (e *Engine) Action(name string) (*Action, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	a, ok := e.actions[name]
	return a, ok
}

// Actions lists the actions a model may be offered: every registered action
// except those the policy denies whatever the input, sorted by name.
func (e *Engine) Actions() []*Action {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []*Action
	for _, a := range e.actions {
		if !e.policy.alwaysDenied(a.name) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *Action) int { return cmp.Compare(a.name, b.name) })
	return out
}

func (e *Engine) clock() time.Time { return e.now().UTC() }

// changed wakes waiters of p and, when p reached a terminal state through this
// process, runs the OnSettled hooks once.
func (e *Engine) changed(ctx context.Context, p *cstype.Proposal, from cstype.Status) {
	e.hub.Publish(p.ID)
	e.hub.Publish(changesKey)
	e.hub.Publish(tenantChangesKey(p.Tenant))
	if e.observer != nil {
		e.observer.Transition(p, from)
	}
	if p.Status == cstype.StatusApproved && p.Mode == ModeIndependent {
		e.hub.Publish(workKey)
	}
	if p.Status.Terminal() && !from.Terminal() {
		e.runSettled(ctx, p)
	}
}

func (e *Engine) runSettled(ctx context.Context, p *cstype.Proposal) {
	ctx = context.WithoutCancel(ctx)
	for _, h := range e.onSettled {
		func() {
			defer func() {
				if r := recover(); r != nil {
					e.log.Error("OnSettled hook panicked", "proposal", p.ID, "panic", r)
				}
			}()
			if err := h(ctx, p); err != nil {
				e.log.Error("OnSettled hook failed", "proposal", p.ID, "status", p.Status, "err", err)
			}
		}()
	}
}

// The sweeping jobs (expiry, escalations, reminders, the removal of expired
// inbox sessions) take no identity: they apply what is due, for every
// tenant. They are no method of Engine, which surfaces call for their
// callers; the Worker runs them (Run, in the background; SweepOnce, one
// batch each), and StartSession removes a bounded batch of expired sessions
// itself. These are their one-batch forms, which those share.

// expireBatch expires up to batch due proposals and wakes their waiters; it
// returns how many it expired.
func (e *Engine) expireBatch(ctx context.Context, batch int) (int, error) {
	n, err := maintenance.NewExpiry(e.store, e.changed, e.sweepConfig(0, batch)).Batch(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep: %w", err)
	}
	return n, nil
}

// escalateBatch escalates up to batch pending proposals whose escalation is
// due (store.ApplyEscalate: the rule's escalate_to join the approvers, once)
// and records the due reminders of up to batch others (store.ApplyRemind),
// waking their waiters, so that the new approvers' inboxes show them. It
// returns how many of each it handled.
func (e *Engine) escalateBatch(ctx context.Context, batch int) (escalated, reminded int, err error) {
	cfg := e.sweepConfig(0, batch)
	escalated, err = maintenance.NewEscalation(e.store, e.changed, cfg).Batch(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("sweep escalations: %w", err)
	}
	reminded, err = maintenance.NewReminders(e.store, e.changed, cfg).Batch(ctx)
	if err != nil {
		return escalated, 0, fmt.Errorf("sweep reminders: %w", err)
	}
	return escalated, reminded, nil
}

// removeSessionsBatch removes up to batch inbox sessions that have expired
// by the engine's clock, and returns how many it removed.
func (e *Engine) removeSessionsBatch(ctx context.Context, batch int) (int, error) {
	n, err := maintenance.NewSessionCleanup(e.store, e.clock, e.sweepConfig(0, batch)).Batch(ctx)
	if err != nil {
		return 0, fmt.Errorf("sweep sessions: %w", err)
	}
	return n, nil
}

// sweepers are the sweeping services, every interval in batches of batch.
func (e *Engine) sweepers(interval time.Duration, batch int) []maintenance.Service {
	cfg := e.sweepConfig(interval, batch)
	return []maintenance.Service{
		maintenance.NewExpiry(e.store, e.changed, cfg),
		maintenance.NewEscalation(e.store, e.changed, cfg),
		maintenance.NewReminders(e.store, e.changed, cfg),
		maintenance.NewSessionCleanup(e.store, e.clock, cfg),
	}
}

func (e *Engine) sweepConfig(interval time.Duration, batch int) maintenance.SweepConfig {
	return maintenance.SweepConfig{Interval: interval, Batch: batch, Logger: e.log}
}
