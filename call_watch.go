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
// Every open Feed (an event stream) registers its tenant too (watchFeed): a
// scan that finds a tenant's new events wakes its feeds as well
// (tenantChangesKey), which then read their own tails. So the store is read
// once per WaitPoll for each tenant that anyone follows, however many
// waiters and streams follow it.
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
	feeds   int           // open feeds, in every tenant
	running bool          // a watch loop runs
	idle    chan struct{} // told when the last waiter or feed leaves
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

// tenantWatch follows one tenant's events for its waiting proposals and its
// open feeds. Only waiters and feeds are shared (under waitWatch.mu); the
// rest belongs to the loop.
type tenantWatch struct {
	waiters map[string]int // proposal id → registered waits
	feeds   int            // open feeds of the tenant
	// from is the lowest position of the feeds registered before the
	// cursor was set (hasFrom): the cursor starts no later.
	from    int64
	hasFrom bool
	tail    *auditTail // nil until the cursor is set; written under waitWatch.mu
}

// tenant is the tenant's watch, made if it has none. w.mu must be held.
func (w *waitWatch) tenant(name string) *tenantWatch {
	if w.tenants == nil {
		w.tenants = map[string]*tenantWatch{}
	}
	tw := w.tenants[name]
	if tw == nil {
		tw = &tenantWatch{waiters: map[string]int{}}
		w.tenants[name] = tw
	}
	return tw
}

// startWatch starts the watch loop if it does not run. e.waits.mu must be
// held.
func (e *Engine) startWatch() {
	w := &e.waits
	if !w.running {
		w.running = true
		w.idle = make(chan struct{}, 1)
		go e.watchLoop(w.idle)
	}
}

// left forgets tw if nobody follows it any more, and tells the loop when
// nobody follows anything. w.mu must be held.
func (w *waitWatch) left(name string, tw *tenantWatch) {
	if len(tw.waiters) == 0 && tw.feeds == 0 && w.tenants[name] == tw {
		delete(w.tenants, name)
	}
	if w.waiters == 0 && w.feeds == 0 && w.running {
		select {
		case w.idle <- struct{}{}:
		default:
		}
	}
}

// watchFeed registers an open feed of tenant until the returned function is
// called: while it is open, the watcher's scans wake the tenant's feeds
// (tenantChangesKey) when they find new events, which is how a feed learns
// of what other processes did when no notification told it. from is an
// event id the feed reads beyond (the tenant's newest when the feed was
// made, before its first read): the watcher's cursor starts no later, so
// every change the feed's first read misses is after the cursor.
func (e *Engine) watchFeed(tenant string, from int64) func() {
	w := &e.waits
	w.mu.Lock()
	tw := w.tenant(tenant)
	tw.feeds++
	w.feeds++
	if tw.tail == nil && (!tw.hasFrom || from < tw.from) {
		tw.from, tw.hasFrom = from, true
	}
	e.startWatch()
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			tw.feeds--
			w.feeds--
			w.left(tenant, tw)
			w.mu.Unlock()
		})
	}
}

// watch registers a wait on p and returns its wake-up channel and the
// function that ends the registration. The caller must re-read p after
// watch returns and before it blocks.
func (e *Engine) watch(p *cstype.Proposal) (<-chan struct{}, func()) {
	wake, unsubscribe := e.hub.Subscribe(p.ID)
	w := &e.waits
	w.mu.Lock()
	tw := w.tenant(p.Tenant)
	tw.waiters[p.ID]++
	w.waiters++
	e.startWatch()
	w.mu.Unlock()
	return wake, func() {
		w.mu.Lock()
		if tw.waiters[p.ID]--; tw.waiters[p.ID] <= 0 {
			delete(tw.waiters, p.ID)
		}
		w.waiters--
		w.left(p.Tenant, tw)
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

// watchLoop scans for the waiters and feeds every WaitPoll, and listens to
// the store's notifications if it has them, until nobody has waited or
// followed a feed for a moment (the smaller of WaitPoll and 100ms, so that a
// process whose calls wait one at a time does not restart it for each).
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

// stopIfIdle marks the loop stopped if nobody waits and no feed is open.
func (e *Engine) stopIfIdle() bool {
	w := &e.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiters == 0 && w.feeds == 0 {
		w.running = false
		return true
	}
	return false
}

// scanWaits reads every followed tenant's new events and wakes the waiters
// of the proposals they name and the tenant's feeds. It returns false, and
// marks the loop stopped, when nobody waits and no feed is open.
func (e *Engine) scanWaits(ctx context.Context) bool {
	w := &e.waits
	type job struct {
		tenant string
		tw     *tenantWatch
		probe  string // a waiting proposal, to set the cursor from ("": none waits)
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
// waiting proposals, or lower, at the position of a feed registered before
// it (watchFeed), then wakes all its waiters to re-read: a change they might
// have missed before the cursor existed is in that re-read, and every later
// one comes after the cursor; a feed reads everything up to its position
// itself.
func (e *Engine) startCursor(ctx context.Context, tenant string, tw *tenantWatch, probe string) {
	var last int64
	for probe != "" {
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
	e.waits.mu.Lock()
	switch {
	case tw.hasFrom && (probe == "" || tw.from < last):
		last = tw.from
	case probe == "":
		// Followed by nobody any more: it is set when someone comes.
		e.waits.mu.Unlock()
		return
	}
	tw.tail = newAuditTail(e.store, tenant, last, e.clock)
	ids := make([]string, 0, len(tw.waiters))
	for id := range tw.waiters {
		ids = append(ids, id)
	}
	e.waits.mu.Unlock()
	for _, id := range ids {
		e.hub.Publish(id)
	}
}

// scanTenant reads a tenant's new events and wakes the waiters they name
// and, if there are any, the tenant's feeds.
func (e *Engine) scanTenant(ctx context.Context, tenant string, tw *tenantWatch) {
	evs, _, err := tw.tail.next(ctx, 0)
	if err != nil {
		e.waitScanFailed(tenant, err)
	} else {
		e.waits.out.OK()
	}
	if len(evs) > 0 {
		e.hub.Publish(tenantChangesKey(tenant))
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
