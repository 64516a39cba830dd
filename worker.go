package countersign

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

// Worker defaults.
const (
	DefaultPollInterval    = time.Second
	DefaultMaxConcurrency  = 4
	DefaultShutdownTimeout = 30 * time.Second
	// claimCoalesce is how long, at most, a worker waits after an execution
	// frees a slot for others to free theirs before it claims (see Run).
	claimCoalesce = time.Millisecond
)

// workKey is the hub key the worker listens on: it is published whenever an
// independent proposal is approved in this process, or a store notification
// says so for another.
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
	// Lanes is how many claims, and how many settlement writes, the worker
	// keeps in flight at once, each a batch in its own transaction.
	// Default: what the store can run side by side (store.Lanes: on
	// PostgreSQL one per core, up to a quarter of the pool), else 1.
	Lanes int
	// SweepInterval is how often the sweeping jobs run: expiry,
	// escalations, reminders and the removal of expired inbox sessions.
	// Default: PollInterval.
	SweepInterval time.Duration
	// SweepBatch bounds one batch of each sweeping job (and SweepOnce's
	// batches). Default 500.
	SweepBatch int
	// ShutdownTimeout is how long Run waits, once its context ends, for the
	// executions in flight; then it cancels them. Default 30s.
	ShutdownTimeout time.Duration
	// Sealer configures the audit chain's sealer the worker runs beside its
	// executions (see SealerOptions); zero fields take its defaults.
	Sealer SealerOptions
	// NoSealer leaves the audit chain to sealers in other processes (or to
	// none: then no event is ever chained).
	NoSealer bool
	// Notifications delivers the notification outbox beside the
	// executions: a *notifications.Deliverer on the engine's store, whose
	// Run writes its targets to the store and then delivers. Nil: this
	// worker delivers no notifications (the outbox waits for a worker that
	// does).
	Notifications NotificationDeliverer
	// OnProposalCounts, when set, is given every tenant's proposals by
	// status, counted in the store every ProposalCountsEvery, and when
	// they were counted: server.ProposalCounts.Set, which /metrics then
	// reports without store work. Nil: no counting.
	OnProposalCounts func(counts map[cstype.Status]int, at time.Time)
	// ProposalCountsEvery is how often OnProposalCounts is given a new
	// count. Default DefaultProposalCountsEvery (30s).
	ProposalCountsEvery time.Duration
}

// DefaultProposalCountsEvery is WorkerOptions.ProposalCountsEvery's default.
const DefaultProposalCountsEvery = maintenance.DefaultProposalCountsEvery

// NotificationDeliverer delivers the notification outbox until ctx ends
// (and returns ctx's error then). *notifications.Deliverer is the one to
// use; the interface keeps this package from depending on it.
type NotificationDeliverer interface {
	Run(ctx context.Context) error
}

// Worker executes approved independent proposals, recovers executions whose
// lease lapsed (their callers died), and reconciles uncertain outcomes. Many
// workers, in many processes, may share a store: they coordinate only through
// leases and compare-and-set.
//
// It is also the one start point of the periodic jobs (internal/maintenance):
// expiry, escalations, reminders, the removal of expired inbox sessions, the
// audit sealer (unless NoSealer), notification delivery (with
// Notifications), the proposal counts (with OnProposalCounts) and, on a
// store whose planner needs them (store.Statistics: PostgreSQL), fresh
// planner statistics run beside its executions, for as long as Run does.
//
// A worker wakes when this process approves independent work, when the store
// notifies it (PostgreSQL LISTEN/NOTIFY, see store.Notifier), and every
// PollInterval. It claims as many proposals as it has free slots in batches,
// and writes the settlements of concurrent executions in groups, keeping
// up to Lanes claims and Lanes settlement writes in flight at once (on
// PostgreSQL, one per core: see store.Lanes).
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
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.ProposalCountsEvery == 0 {
		opts.ProposalCountsEvery = DefaultProposalCountsEvery
	}
	switch {
	case opts.PollInterval < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.PollInterval %v: must be positive", opts.PollInterval)
	case opts.LeaseDuration < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.LeaseDuration %v: must be positive", opts.LeaseDuration)
	case opts.MaxConcurrency < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.MaxConcurrency %d: must be positive", opts.MaxConcurrency)
	case opts.SweepInterval < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.SweepInterval %v: must be positive", opts.SweepInterval)
	case opts.SweepBatch < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.SweepBatch %d: must be positive", opts.SweepBatch)
	case opts.Lanes < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.Lanes %d: must be positive", opts.Lanes)
	case opts.ShutdownTimeout < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.ShutdownTimeout %v: must be positive", opts.ShutdownTimeout)
	case opts.ProposalCountsEvery < 0:
		return nil, fmt.Errorf("countersign: WorkerOptions.ProposalCountsEvery %v: must be positive", opts.ProposalCountsEvery)
	case opts.PollInterval >= opts.LeaseDuration/3:
		return nil, fmt.Errorf("countersign: WorkerOptions.PollInterval %v: must be less than a third of LeaseDuration %v", opts.PollInterval, opts.LeaseDuration)
	}
	sealer, err := opts.Sealer.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("WorkerOptions.Sealer: %w", err)
	}
	opts.Sealer = sealer
	return &Worker{e: e, opts: opts}, nil
}

// Run works until ctx ends. Then it stops claiming, waits up to
// ShutdownTimeout for the executions in flight, cancels any still running,
// and returns nil once every goroutine it started has stopped. Executions do
// not see ctx end: cancellation cannot undo an external change, so the
// worker lets them finish and record what happened.
func (w *Worker) Run(ctx context.Context) error {
	wake, unsubscribe := w.e.hub.Subscribe(workKey)
	defer unsubscribe()
	poll := time.NewTicker(w.opts.PollInterval)
	defer poll.Stop()

	// Background helpers: the periodic jobs, the store's notifications,
	// and the settlement group writer. They stop after the executions.
	helpers, stopHelpers := context.WithCancel(context.WithoutCancel(ctx))
	var helperWG sync.WaitGroup
	defer func() {
		stopHelpers()
		helperWG.Wait()
	}()
	helperWG.Go(func() { maintenance.Run(ctx, w.e.log, w.services()...) })
	if n, ok := store.As[store.Notifier](w.e.store); ok {
		helperWG.Add(1)
		go func() {
			defer helperWG.Done()
			_ = n.Listen(ctx, w.e.notified)
		}()
	}
	lanes := w.lanes()
	group := newSettleGroup(w.e.store, lanes)
	helperWG.Add(1)
	go func() {
		defer helperWG.Done()
		group.run(helpers)
	}()

	execCtx, cancelExecs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExecs()
	var execWG sync.WaitGroup
	slots := make(chan struct{}, w.opts.MaxConcurrency)
	freed := make(chan struct{}, 1)
	// start runs one claimed proposal in a slot taken for it.
	start := func(cl *store.Claimed, asked time.Time) {
		execWG.Add(1)
		go func() {
			defer execWG.Done()
			// The slot is given back once the execution is over: when its
			// last settlement is queued (its write may still be on its way;
			// the lease is held until it is done), when it is written if the
			// lease was given up, or when the execution ends without one.
			var once sync.Once
			release := func() {
				once.Do(func() {
					<-slots
					select {
					case freed <- struct{}{}:
					default:
					}
				})
			}
			defer release()
			w.execute(execCtx, cl, asked, func(ctx context.Context, params *store.SettleParams, held bool) (*store.TransitionResult, error) {
				if !held {
					// The lease may have lapsed in the store: a claim made
					// before this settlement is written could take the
					// proposal over (this worker's own next claim too), and
					// the fence would then refuse a known outcome. The slot
					// waits for the write.
					return group.settle(ctx, params, nil)
				}
				return group.settle(ctx, params, release)
			})
		}()
	}
	// Claims run in lanes: up to lanes claims in flight, each for a share
	// of the free slots, reserved until it returns. A wake-up that finds a
	// lane free claims at once, while another claim is still committing.
	claims := make(chan claimed, lanes)
	inFlight, reserved := 0, 0
	finish := func(c claimed) {
		inFlight--
		reserved -= c.limit
		for _, cl := range c.claimed {
			slots <- struct{}{}
			start(cl, c.asked)
		}
	}
	// When only executions freeing their slots woke the worker, it claims
	// once every slot is free, or claimCoalesce after the first slot of the
	// burst was freed, so that a burst of finishing executions makes one
	// batch claim (one commit) rather than a claim per slot. A wake-up or a
	// poll claims whatever is free at once.
	anyFree := true
	var coalesce <-chan time.Time // running after a slot was freed
	// While the store cannot be reached the worker claims only when retry
	// fires, backing off (see outage).
	out := maintenance.Outage{Log: w.e.log, What: "worker"}
	var retry <-chan time.Time
	for {
		free := cap(slots) - len(slots) - reserved
		if free > 0 && inFlight < lanes && ctx.Err() == nil && anyFree && retry == nil {
			coalesce = nil
			limit := claimShare(free, lanes-inFlight)
			inFlight++
			reserved += limit
			asked := time.Now()
			go func() {
				cl, err := w.e.store.ClaimBatch(ctx, &store.ClaimBatchParams{
					Owner: w.e.owner, LeaseDuration: w.opts.LeaseDuration, Limit: limit,
				})
				claims <- claimed{limit: limit, asked: asked, claimed: cl, err: err}
			}()
			// Another lane may claim the rest of the free slots at once;
			// past that, a full claim says there may be more (below).
			anyFree = free > limit
			continue
		}
		select {
		case <-ctx.Done():
			// Claims still in flight may have committed: what they took is
			// run, not left to lapse into an uncertain outcome.
			for inFlight > 0 {
				finish(<-claims)
			}
			w.drain(&execWG, cancelExecs)
			return nil
		case c := <-claims:
			finish(c)
			switch {
			case c.err == nil:
				out.OK()
				if len(c.claimed) == c.limit {
					anyFree = true // there may be more
				}
			case ctx.Err() != nil:
			default:
				if pause, down := out.Failed(c.err); down {
					retry = time.After(pause)
				} else {
					w.e.log.Warn("claim failed", "err", c.err)
				}
			}
		case <-wake:
			anyFree = true
		case <-freed:
			switch {
			case cap(slots)-len(slots)-reserved == cap(slots):
				anyFree = true // every slot is free: no burst to wait for
			case coalesce == nil:
				coalesce = time.After(claimCoalesce)
			}
		case <-coalesce:
			coalesce = nil
			anyFree = true
		case <-poll.C:
			anyFree = true
		case <-retry:
			retry = nil
			anyFree = true
		}
	}
}

// claimed is what one claim lane brought back.
type claimed struct {
	limit   int       // the slots reserved for it
	asked   time.Time // when it was sent: leases are reckoned from then
	claimed []*store.Claimed
	err     error
}

// minClaimShare is the smallest claim the free slots are split into: below
// twice this, one lane claims them all, since a commit costs more than
// the rows it claims.
const minClaimShare = 32

// claimShare is how many of free slots the next claim asks for when idle
// lanes are free: an even share, unless the slots are too few to split.
func claimShare(free, idle int) int {
	if idle <= 1 || free < 2*minClaimShare {
		return free
	}
	return max(minClaimShare, (free+idle-1)/idle)
}

// lanes is how many claims and settlement writes the worker keeps in
// flight: WorkerOptions.Lanes, else what the store says it can run side by
// side (store.Lanes), else one.
func (w *Worker) lanes() int {
	if w.opts.Lanes > 0 {
		return w.opts.Lanes
	}
	if l, ok := store.As[store.Lanes](w.e.store); ok {
		return max(1, l.WriteLanes())
	}
	return 1
}

// services are the periodic jobs Run runs, as the options ask.
func (w *Worker) services() []maintenance.Service {
	services := w.e.sweepers(w.opts.SweepInterval, w.opts.SweepBatch)
	if !w.opts.NoSealer {
		services = append(services, w.e.sealer(w.opts.Sealer))
	}
	if w.opts.Notifications != nil {
		services = append(services, notificationService{w.opts.Notifications})
	}
	if w.opts.OnProposalCounts != nil {
		services = append(services, maintenance.NewProposalCounts(w.e.store, w.opts.OnProposalCounts,
			maintenance.ProposalCountsConfig{Interval: w.opts.ProposalCountsEvery, Logger: w.e.log}))
	}
	if st, ok := store.As[store.Statistics](w.e.store); ok {
		services = append(services, maintenance.NewStatistics(st, maintenance.StatisticsConfig{Logger: w.e.log}))
	}
	return services
}

// notificationService runs a NotificationDeliverer as a maintenance
// service (*notifications.Deliverer's Run is maintenance's
// NotificationDelivery).
type notificationService struct{ NotificationDeliverer }

func (notificationService) Name() string { return "notifications" }

// drain waits for the executions in flight, cancelling them at the deadline.
func (w *Worker) drain(execWG *sync.WaitGroup, cancel context.CancelFunc) {
	done := make(chan struct{})
	go func() {
		execWG.Wait()
		close(done)
	}()
	timer := time.NewTimer(w.opts.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		w.e.log.Warn("shutdown deadline passed; cancelling executions in flight")
		cancel()
		<-done
	}
}

// execute runs one proposal claimed by a ClaimBatch asked for at asked.
func (w *Worker) execute(ctx context.Context, cl *store.Claimed, asked time.Time, settle settleFunc) {
	w.e.observeClaimed(cl.Proposal.Action)
	w.e.claimSpan(ctx, cl.Proposal, asked, nil)
	w.e.changed(ctx, cl.Proposal, cl.From)
	p, err := w.e.executeClaimed(ctx, cl, asked, w.opts.LeaseDuration, settle)
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
	asked := time.Now()
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
			w.execute(context.WithoutCancel(ctx), cl, asked, nil)
		}()
	}
	wg.Wait()
	return len(claimed), nil
}

// SweepCounts is what one SweepOnce did.
type SweepCounts struct {
	// Expired is how many proposals expired: pending ones nobody decided,
	// approved ones nobody collected, by their deadlines.
	Expired int
	// Escalated is how many pending proposals were escalated: their
	// rule's escalate_to joined the approvers.
	Escalated int
	// Reminded is how many proposals had a reminder recorded.
	Reminded int
	// Sessions is how many expired inbox sessions were removed.
	Sessions int
}

// SweepOnce runs one batch (SweepBatch) of each sweeping job Run runs, in
// turn: expiry, escalations, reminders, the removal of expired inbox
// sessions; and returns how many each handled. It is Run's sweeping without
// the waiting, as RunOnce is its claiming: for tests and for callers that
// schedule work themselves. The jobs take no identity: they apply what is
// due, for every tenant. The first job that fails ends it, with the counts
// so far.
func (w *Worker) SweepOnce(ctx context.Context) (SweepCounts, error) {
	var c SweepCounts
	var err error
	if c.Expired, err = w.e.expireBatch(ctx, w.opts.SweepBatch); err != nil {
		return c, err
	}
	if c.Escalated, c.Reminded, err = w.e.escalateBatch(ctx, w.opts.SweepBatch); err != nil {
		return c, err
	}
	if c.Sessions, err = w.e.removeSessionsBatch(ctx, w.opts.SweepBatch); err != nil {
		return c, err
	}
	return c, nil
}

// notified turns a store notification into in-process wake-ups.
func (e *Engine) notified(n store.Notification) {
	if n.Work {
		e.hub.Publish(workKey)
	}
	if n.ProposalID != "" {
		e.hub.Publish(n.ProposalID)
		e.hub.Publish(changesKey)
		if n.Tenant != "" {
			e.hub.Publish(tenantChangesKey(n.Tenant))
		} else {
			e.hub.Publish(unnamedChangesKey)
		}
	}
}
