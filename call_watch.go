package countersign

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/maintenance"
	"github.com/countersign/countersign/store"
)

// The waiters' watcher.
//
// Every waiting call (waitAndExecute, Wait) registers its proposal with the
// engine and subscribes to the hub; one goroutine per engine, running only
// while someone waits, finds the changes made by other processes for all of
// them at once: every WaitPoll it reads each waiting tenant's new audit
// events (every status change writes one) through the engine's one tail of
// the audit log (auditTail, see feed.go) and wakes the waiters of the
// proposals named. Changes made through this engine wake their waiters
// directly (Engine.changed), and on a store with notifications (PostgreSQL
// LISTEN/NOTIFY) the watcher listens too, so other processes' changes wake
// waiters at once; the poll is what guarantees them.
//
// No change can slip between a waiter's read and its wake-up:
//   - a waiter registers before it re-reads its proposal;
//   - a tenant's cursor is taken from the store's events (the latest event of
//     one of its waiting proposals), and once it is set every waiter of the
//     tenant is woken to re-read, so a change either precedes that re-read or
//     writes an event after the cursor;
//   - the tail hands out an event that commits after one with a higher id
//     (PostgreSQL may), as long as its transaction was open no longer than
//     the tail's window;
//   - as a last resort against a transaction that stays open longer, while
//     the notification listener is down, each waiter re-reads its own
//     proposal every few hundred polls (recheck).

// waitRecheckPolls is how many WaitPolls pass, at most, before a waiter
// re-reads its own proposal even though nothing woke it.
const waitRecheckPolls = 600

// waitWatch is the engine's registry of waiting calls.
type waitWatch struct {
	mu      sync.Mutex
	tenants map[string]*tenantWatch
	waiters int
	running bool          // a watch loop runs
	idle    chan struct{} // told when the last waiter leaves
	// out follows the store's outages for the loop's log (the loop's own).
	out maintenance.Outage
	// calls counts the wait-mode calls waiting in this process, by tenant
	// and proposal: the ones that execute an approval the moment they see it
	// (see awaitsCaller).
	calls map[string]int
}

// callKey names a proposal in waitWatch.calls.
func callKey(tenant, id string) string { return tenant + "\x00" + id }

// callWaits registers a wait-mode call waiting on p until the returned
// function is called.
func (e *Engine) callWaits(p *cstype.Proposal) func() {
	w := &e.waits
	k := callKey(p.Tenant, p.ID)
	w.mu.Lock()
	if w.calls == nil {
		w.calls = map[string]int{}
	}
	w.calls[k]++
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if w.calls[k]--; w.calls[k] <= 0 {
			delete(w.calls, k)
		}
		w.mu.Unlock()
	}
}

// callWaiting reports whether a wait-mode call waits on p in this process.
func (e *Engine) callWaiting(p *cstype.Proposal) bool {
	return e.CallWaiting(p.Tenant, p.ID)
}

// CallWaiting reports whether a wait-mode call of this engine is waiting on
// the proposal now, so that an approval would be executed at once rather
// than wait for the agent's next call (DecideResult.AwaitingCaller). Calls
// waiting in other processes are not counted.
func (e *Engine) CallWaiting(tenant, proposalID string) bool {
	w := &e.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[callKey(tenant, proposalID)] > 0
}

// tenantWatch follows one tenant's events for its waiting proposals. Only
// waiters is shared (under waitWatch.mu); the rest belongs to the loop.
type tenantWatch struct {
	waiters map[string]int // proposal id → registered waits
	tail    *auditTail     // nil until the cursor is set
}

// watch registers a wait on p and returns its wake-up channel and the
// function that ends the registration. The caller must re-read p after
// watch returns and before it blocks.
func (e *Engine) watch(p *cstype.Proposal) (<-chan struct{}, func()) {
	wake, unsubscribe := e.hub.Subscribe(p.ID)
	w := &e.waits
	w.mu.Lock()
	if w.tenants == nil {
		w.tenants = map[string]*tenantWatch{}
	}
	tw := w.tenants[p.Tenant]
	if tw == nil {
		tw = &tenantWatch{waiters: map[string]int{}}
		w.tenants[p.Tenant] = tw
	}
	tw.waiters[p.ID]++
	w.waiters++
	if !w.running {
		w.running = true
		w.idle = make(chan struct{}, 1)
		go e.watchLoop(w.idle)
	}
	w.mu.Unlock()
	return wake, func() {
		w.mu.Lock()
		if tw.waiters[p.ID]--; tw.waiters[p.ID] <= 0 {
			delete(tw.waiters, p.ID)
		}
		w.waiters--
		if len(tw.waiters) == 0 && w.tenants[p.Tenant] == tw {
			delete(w.tenants, p.Tenant)
		}
		if w.waiters == 0 && w.running {
			select {
			case w.idle <- struct{}{}:
			default:
			}
		}
		w.mu.Unlock()
		unsubscribe()
	}
}

// recheck is how long a waiter blocks, at most, when nothing wakes it: a
// random time between half and all of waitRecheckPolls WaitPolls, so that
// waiters that started together do not re-read together.
func (e *Engine) recheck() time.Duration {
	d := e.waitPoll * waitRecheckPolls
	return d/2 + rand.N(d/2+1)
}

// watchLoop scans for the waiters every WaitPoll, and listens to the store's
// notifications if it has them, until nobody has waited for a moment (the
// smaller of WaitPoll and 100ms, so that a process whose calls wait one at a
// time does not restart it for each).
func (e *Engine) watchLoop(idle <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if n, ok := store.As[store.Notifier](e.store); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = n.Listen(ctx, e.notified)
		}()
	}
	// The first scan sets the cursor at once, while few have registered.
	if !e.scanWaits(ctx) {
		return
	}
	t := time.NewTicker(e.waitPoll)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if !e.scanWaits(ctx) {
				return
			}
		case <-idle:
			time.Sleep(min(e.waitPoll, 100*time.Millisecond))
			if e.stopIfIdle() {
				return
			}
		}
	}
}

// stopIfIdle marks the loop stopped if nobody waits.
func (e *Engine) stopIfIdle() bool {
	w := &e.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiters == 0 {
		w.running = false
		return true
	}
	return false
}

// scanWaits reads every waiting tenant's new events and wakes the waiters of
// the proposals they name. It returns false, and marks the loop stopped, when
// nobody waits.
func (e *Engine) scanWaits(ctx context.Context) bool {
	w := &e.waits
	type job struct {
		tenant string
		tw     *tenantWatch
		probe  string // a waiting proposal, to set the cursor from
	}
	if e.stopIfIdle() {
		return false
	}
	w.mu.Lock()
	jobs := make([]job, 0, len(w.tenants))
	for tenant, tw := range w.tenants {
		j := job{tenant: tenant, tw: tw}
		if tw.tail == nil {
			for id := range tw.waiters {
				j.probe = id
				break
			}
		}
		jobs = append(jobs, j)
	}
	w.mu.Unlock()
	for _, j := range jobs {
		if j.tw.tail == nil {
			e.startCursor(ctx, j.tenant, j.tw, j.probe)
			continue
		}
		e.scanTenant(ctx, j.tenant, j.tw)
	}
	return true
}

// startCursor sets a tenant's cursor at the latest event of one of its
// waiting proposals, then wakes all its waiters to re-read: a change they
// might have missed before the cursor existed is in that re-read, and every
// later one comes after the cursor.
func (e *Engine) startCursor(ctx context.Context, tenant string, tw *tenantWatch, probe string) {
	var last int64
	for {
		evs, err := e.store.ListEvents(ctx, &store.ListEventsParams{Tenant: tenant, ProposalID: probe, AfterID: last})
		if err != nil {
			e.waitScanFailed(tenant, err)
			return
		}
		if len(evs) == 0 {
			break
		}
		last = evs[len(evs)-1].ID
	}
	tw.tail = newAuditTail(e.store, tenant, last, e.clock)
	e.waits.mu.Lock()
	ids := make([]string, 0, len(tw.waiters))
	for id := range tw.waiters {
		ids = append(ids, id)
	}
	e.waits.mu.Unlock()
	for _, id := range ids {
		e.hub.Publish(id)
	}
}

// scanTenant reads a tenant's new events and wakes the waiters they name.
func (e *Engine) scanTenant(ctx context.Context, tenant string, tw *tenantWatch) {
	evs, _, err := tw.tail.next(ctx, 0)
	if err != nil {
		e.waitScanFailed(tenant, err)
	} else {
		e.waits.out.OK()
	}
	for _, ev := range evs {
		// A creation is never news to a waiter: it read its proposal after
		// the proposal existed.
		if ev.Type != cstype.EventCreated {
			e.hub.Publish(ev.ProposalID)
		}
	}
}

// waitScanFailed logs a failed scan for the waiters: each one, but only the
// first of an outage (the waiters hold on through it, see await).
func (e *Engine) waitScanFailed(tenant string, err error) {
	o := &e.waits.out
	o.Log, o.What = e.log, "waiters"
	if _, down := o.Failed(err); !down {
		e.log.Warn("waiters: read events", "tenant", tenant, "err", err)
	}
}
