package pgstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// Payloads of the schema's notification channel.
const (
	payloadWork = "w" // claimable work may have appeared
	// payloadChange is followed by the length of the tenant in decimal, a
	// colon, the tenant and the id of a proposal whose status changed:
	// t:4:acmeprp_1. Listeners wake only that tenant's event streams.
	payloadChange = "t:"
	// payloadProposal, followed by a proposal id, is what processes before
	// payloadChange sent: a change of an unnamed tenant. It is still read,
	// so that a rolling upgrade wakes every process's waiters.
	payloadProposal = "p:"
)

// changePayload is the payload announcing that tenant's proposal id changed.
func changePayload(tenant, id string) string {
	return payloadChange + strconv.Itoa(len(tenant)) + ":" + tenant + id
}

// The listener's timing.
const (
	// listenMinBackoff and listenMaxBackoff bound the wait before a
	// reconnection; it doubles after each failure, with jitter.
	listenMinBackoff = 50 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
	// listenCheckInterval is how long the listener waits for a
	// notification before it pings the server, so that a connection that
	// died silently (a network partition) is noticed and replaced.
	listenCheckInterval = 30 * time.Second
	listenPingTimeout   = 10 * time.Second
	// trailingTimeout bounds each notifying transaction.
	trailingTimeout = 5 * time.Second
)

// listenerPrefix starts the application_name of a listening connection:
// cs_listen_<schema> (at most 61 bytes, within PostgreSQL's 63).
const listenerPrefix = "cs_listen_"

// Listen implements store.Notifier. It holds a connection of its own,
// outside the pool, with application_name cs_listen_<schema>, LISTENing on
// the schema's channel (countersign_<schema>), and delivers each
// notification to fn. When the connection fails it reconnects, with
// exponential backoff, until ctx ends; notifications sent meanwhile are
// lost, so after a reconnection it delivers one Notification{Work: true}
// to make workers look for work they may have missed. It returns ctx's
// error. fn runs on the listening goroutine and must not block.
func (s *Store) Listen(ctx context.Context, fn func(store.Notification)) error {
	cfg := s.pool.Config().ConnConfig // a deep copy
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = listenerPrefix + s.schema
	backoff := listenMinBackoff
	for failures := 0; ; failures++ {
		// Errors are not returned: the contract is to keep listening, and
		// a failed connection is simply replaced.
		if conn, err := s.listenConn(ctx, cfg); err == nil {
			if failures > 0 {
				fn(store.Notification{Work: true})
			}
			backoff = listenMinBackoff
			_ = s.receive(ctx, conn, fn)
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_ = conn.Close(closeCtx)
			cancel()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Jitter spreads the reconnections of many listeners after a
		// server restart.
		wait := backoff/2 + rand.N(backoff)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listenConn connects and starts listening.
func (s *Store) listenConn(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		return nil, err
	}
	return conn, nil
}

// receive delivers notifications until the connection fails or ctx ends.
func (s *Store) receive(ctx context.Context, conn *pgx.Conn, fn func(store.Notification)) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, s.listenCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err == nil {
			if note, ok := parsePayload(n.Payload); ok {
				fn(note)
			}
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
			return err
		}
		// Quiet for a while: check that the server is still there.
		pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
		err = conn.Ping(pctx)
		cancel()
		if err != nil {
			return err
		}
	}
}

// parsePayload reads a notification of the schema's channel.
func parsePayload(payload string) (store.Notification, bool) {
	switch {
	case payload == payloadWork:
		return store.Notification{Work: true}, true
	case strings.HasPrefix(payload, payloadChange):
		n, rest, ok := strings.Cut(payload[len(payloadChange):], ":")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 0 || size >= len(rest) || n != strconv.Itoa(size) {
			return store.Notification{}, false
		}
		return store.Notification{Tenant: rest[:size], ProposalID: rest[size:]}, true
	case strings.HasPrefix(payload, payloadProposal) && len(payload) > len(payloadProposal):
		return store.Notification{ProposalID: payload[len(payloadProposal):]}, true
	}
	return store.Notification{}, false
}

// sendTrailingWork queues a work notification for the sender.
func (s *Store) sendTrailingWork(context.Context) error {
	s.notes.add(payloadWork)
	return nil
}

// sendNotifications sends payloads on the schema's channel in a
// transaction of their own, with synchronous_commit off, in one round trip.
//
// Why not inside the transaction that made the change: PostgreSQL takes a
// database-wide lock when a transaction that notified commits, and holds it
// until the commit is flushed, so notifying transactions commit one at a
// time and the server's group commit never folds their flushes together.
// With every status change notifying, that lock was the ceiling of every
// concurrent write path (seen as Lock:object waits in pg_stat_activity
// under the lifecycle benchmark, B3). Sent afterwards, in a transaction
// that writes nothing and does not wait for its flush, the lock is held for
// microseconds. The price: a process that dies between its commit and this
// send loses those notifications, which are hints anyway (listeners
// also poll).
func (s *Store) sendNotifications(ctx context.Context, payloads []string) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit TO off")
	b.Queue(`SELECT count(pg_notify($1, x)) FROM unnest($2::text[]) AS x`, s.channel, payloads)
	b.Queue("COMMIT")
	return s.pool.SendBatch(ctx, b).Close()
}

// sender delivers a Store's notifications after their transactions
// committed. Writers add payloads without waiting; one goroutine sends
// whatever has gathered, deduplicated, in one transaction per round, so a
// busy store sends one notifying transaction per round trip however many
// changes it commits. Delivery is best effort, like every notification.
type sender struct {
	send func(ctx context.Context, payloads []string) error

	mu      sync.Mutex
	pending []string
	closed  bool
	kick    chan struct{} // holds one wake-up
	stop    chan struct{}
	done    chan struct{}
}

// maxNotifyBatch bounds the payloads of one notifying transaction.
const maxNotifyBatch = 1000

func newSender(send func(ctx context.Context, payloads []string) error) *sender {
	n := &sender{send: send, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go n.loop()
	return n
}

// add queues payloads for the next round. After close it drops them.
func (n *sender) add(payloads ...string) {
	if len(payloads) == 0 {
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.pending = append(n.pending, payloads...)
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default: // a round is already due; it will take these too
	}
}

func (n *sender) loop() {
	defer close(n.done)
	for {
		select {
		case <-n.kick:
			n.flush()
		case <-n.stop:
			n.flush()
			return
		}
	}
}

// flush sends what is pending, deduplicated, in batches.
func (n *sender) flush() {
	n.mu.Lock()
	pending := n.pending
	n.pending = nil
	n.mu.Unlock()
	if len(pending) == 0 {
		return
	}
	seen := make(map[string]struct{}, len(pending))
	uniq := pending[:0]
	for _, p := range pending {
		if _, dup := seen[p]; !dup {
			seen[p] = struct{}{}
			uniq = append(uniq, p)
		}
	}
	for len(uniq) > 0 {
		k := min(len(uniq), maxNotifyBatch)
		ctx, cancel := context.WithTimeout(context.Background(), trailingTimeout)
		_ = n.send(ctx, uniq[:k]) // best effort: listeners also poll
		cancel()
		uniq = uniq[k:]
	}
}

// close sends what is pending and stops the sender. Later adds are dropped.
func (n *sender) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	close(n.stop)
	<-n.done
}

// workNotifier rate-limits a Store's work notifications: at most one per
// interval. A transaction that approves independent work asks reserve
// whether it may NOTIFY itself (delivered at its commit); if the window is
// closed, it calls deferred after its commit, and one trailing NOTIFY, sent
// when the window ends, announces it together with every other approval
// committed meanwhile. A burst of approvals thus costs about two NOTIFYs per
// interval, and the last approval is always announced. (Every NOTIFY takes a
// database-wide lock at commit, which is why they are worth sparing.)
type workNotifier struct {
	interval time.Duration
	send     func(ctx context.Context) error
	wg       sync.WaitGroup // the trailing notification in flight

	mu      sync.Mutex
	last    time.Time   // when the last notification was reserved or sent
	timer   *time.Timer // the trailing notification, while pending
	pending bool
	closed  bool
}

func newWorkNotifier(interval time.Duration, send func(ctx context.Context) error) *workNotifier {
	return &workNotifier{interval: interval, send: send}
}

// reserve reports whether the caller may send a work notification now, in
// its transaction; if so, the window starts again. While a trailing
// notification is pending it may not: that one is the window's.
func (w *workNotifier) reserve() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if w.pending || now.Sub(w.last) < w.interval {
		return false
	}
	w.last = now
	return true
}

// deferred schedules the trailing notification for the end of the window,
// unless one is pending (it will announce the caller's work too: it is sent
// after the caller's commit).
func (w *workNotifier) deferred() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.pending {
		return
	}
	w.pending = true
	w.wg.Add(1)
	w.timer = time.AfterFunc(max(w.interval-time.Since(w.last), 0), w.fire)
}

func (w *workNotifier) fire() {
	defer w.wg.Done()
	w.mu.Lock()
	// Cleared before sending: work committed from now on schedules another.
	w.pending = false
	w.last = time.Now()
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), trailingTimeout)
	defer cancel()
	_ = w.send(ctx) // best effort, like every notification: workers also poll
}

// close sends a pending trailing notification at once, and waits for one
// in flight, so that none outlives the Store.
func (w *workNotifier) close() {
	w.mu.Lock()
	w.closed = true
	flush := w.pending && w.timer.Stop()
	w.mu.Unlock()
	if flush {
		w.fire()
	}
	w.wg.Wait()
}
