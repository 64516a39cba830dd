package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"runtime/trace"
	"slices"
	"sync"
	"time"

	sqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Group commit.
//
// SQLite has one writer, and a durable commit (WAL, synchronous=FULL) costs
// an fsync. Writes that arrive while another is running therefore queue, and
// the queue is served as a group: one BEGIN IMMEDIATE … COMMIT holds the
// writes of several callers, and a refused or failed write rolls back alone
// while the others commit. The group pays one fsync instead of one per
// write. Nobody returns before the group's COMMIT did, so a write is durable
// when its method returns, as before.
//
// A write that fails before it changed a row (most refusals: they read,
// then refuse) has nothing to roll back. The group runs its writes bare and
// counts the rows each changed (wtx.changed, from what each statement
// reports, at no cost; until change 20 of docs/profiles/scale.md a query of
// total_changes() after every write, a fifth of the writer's statements);
// only when a write fails after changing rows does the group roll back and
// run again, each write in a SAVEPOINT of its own (runGroup). In B3 the
// savepoints on every write had cost the writer over a fifth of its CPU
// (docs/profiles/scale.md, change 14).
//
// The first caller to find the writer idle leads: it takes everything queued
// (up to maxGroup writes, its own first), runs the group and, if more writes
// arrived meanwhile, hands the lead to the oldest of them before it returns.
// A write that finds the writer idle runs alone, in a transaction of its
// own: the quiet path costs what it did without grouping.
//
// Within a group the writes run one after another in arrival order, each
// seeing the ones before it, exactly as if they had committed one by one in
// that order; each reads the store's clock when it starts, so the times of
// one row's transitions still follow their commit order.
//
// A caller's context decides only its own write. Its statements run without
// its cancellation, because SQLite answers an interrupted write by rolling
// back the whole transaction, which would take the other callers' writes
// with it. Instead the context is looked at before the write starts and once
// it has run: a write whose context has ended by then is rolled back (a bare
// write that changed rows, by the group's run with savepoints) and fails
// with the context's error, and the group goes on. A
// write released into the group stands, and its caller is told it succeeded.

// The worker's own writes, its claims and settlements, go first: they queue
// ahead of every other write (behind only the worker's writes queued before
// them), so that an approval the worker was woken for is claimed in the next
// group, not behind the requests that arrived meanwhile. They are few: one
// claim at a time, and settlements batched, bounded by the worker's slots.
// They free the slots that every other write's proposal will need.

// maxGroup bounds the writes of one group, and so how long the writer is
// held, and how much one failed COMMIT can fail.
const maxGroup = 64

// groupWrite is one caller's write, queued for the writer.
type groupWrite struct {
	ctx context.Context
	fn  func(tx *wtx, now time.Time) error
	err error
	// panicked is what fn panicked with: the write failed, and its caller
	// panics with it once the group is over.
	panicked any
	// done receives true when the write has been committed (or failed), and
	// false when its caller is to lead the next group.
	done chan bool
	// first says that the write queues ahead of every write that is not
	// (see writeFirst).
	first bool
	// savepoint says that the write runs in a savepoint of its own in
	// every group (see writeSchema).
	savepoint bool
}

// writeQueue is the store's queue of writes.
type writeQueue struct {
	mu      sync.Mutex
	busy    bool // a leader is running a group
	pending []*groupWrite
}

// write runs fn in a write transaction, grouped with concurrent writes. fn's
// error rolls its writes back, unless it is a *commitErr: then its writes
// commit and its error is returned. fn may run inside a shared transaction:
// it must use only tx and the ctx it was given, never commit or roll back.
// fn may run twice (see runGroup): it must start from what it reads in tx
// and reset whatever it fills in for its caller, never build on what an
// earlier run of it left.
func (s *Store) write(ctx context.Context, fn func(tx *wtx, now time.Time) error) error {
	return s.enqueue(ctx, &groupWrite{ctx: ctx, fn: fn})
}

// writeFirst is write for the worker's claims and settlements: it queues
// ahead of every write that is not itself first.
func (s *Store) writeFirst(ctx context.Context, fn func(tx *wtx, now time.Time) error) error {
	return s.enqueue(ctx, &groupWrite{ctx: ctx, fn: fn, first: true})
}

// writeSchema is write for a write that changes the schema: statements
// such as CREATE TABLE, which change no row and so count for nothing in
// wtx.changed, so that a group cannot tell whether such a write that failed
// changed anything. It always runs in a savepoint of its own.
func (s *Store) writeSchema(ctx context.Context, fn func(tx *wtx, now time.Time) error) error {
	return s.enqueue(ctx, &groupWrite{ctx: ctx, fn: fn, savepoint: true})
}

func (s *Store) enqueue(ctx context.Context, w *groupWrite) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.done = make(chan bool, 1)
	first := w.first
	q := &s.queue
	q.mu.Lock()
	at := len(q.pending)
	if first {
		at = 0
		for at < len(q.pending) && q.pending[at].first {
			at++
		}
	}
	// The leader has taken its group out of pending already: inserting
	// moves only writes still waiting.
	q.pending = slices.Insert(q.pending, at, w)
	lead := !q.busy
	q.busy = true
	q.mu.Unlock()
	if !lead {
		// A queued write cannot leave early: the leader may already be
		// running it. It waits for the group, which ends in bounded time.
		if finished := <-w.done; finished {
			return w.result()
		}
	}
	// The leader's write runs first in its group, then the writes queued
	// ahead of the rest. A write queued first may have come ahead of a
	// leader that was handed the lead, so the leader takes itself out of
	// the queue wherever it is.
	q.mu.Lock()
	if i := slices.Index(q.pending, w); i >= 0 {
		q.pending = slices.Delete(q.pending, i, i+1)
	}
	n := min(len(q.pending), maxGroup-1)
	group := append(make([]*groupWrite, 0, n+1), w)
	group = append(group, q.pending[:n]...)
	q.pending = q.pending[n:]
	q.mu.Unlock()

	// A region of the execution trace (runtime/trace; bench -exectrace):
	// go tool trace shows how long the writer is held, group by group, and
	// where its time goes (running, waiting for a processor, in fsync).
	region := trace.StartRegion(ctx, "sqlitestore.group")
	group = s.runGroup(ctx, group)
	region.End()

	q.mu.Lock()
	if len(q.pending) > 0 {
		q.pending[0].done <- false // the oldest waiting write leads next
	} else {
		q.busy = false
		q.pending = nil
	}
	q.mu.Unlock()
	for _, g := range group {
		if g != w {
			g.done <- true
		}
	}
	return w.result()
}

// result is the write's answer to its caller; a panic in fn goes on in the
// caller's goroutine.
func (w *groupWrite) result() error {
	if w.panicked != nil {
		panic(w.panicked)
	}
	return w.err
}

// errPanicked stands for a panic while the group goes on.
var errPanicked = errors.New("sqlitestore: the write panicked")

// run calls fn, turning a panic into errPanicked: one caller's panic must
// neither leave the writer held nor fail the other writes of its group.
func (w *groupWrite) run(tx *wtx, now time.Time) (err error) {
	defer func() {
		if r := recover(); r != nil {
			w.panicked, err = r, errPanicked
		}
	}()
	return w.fn(tx, now)
}

// maxJoined bounds the first writes (writeFirst) a running group takes in
// on its way, beyond maxGroup.
const maxJoined = maxGroup

// runGroup runs the writes in one transaction and sets each one's err. A
// group of several writes also takes in, between two of them, the first
// writes (the worker's claims and settlements) queued meanwhile, up to
// maxJoined: they commit with it rather than after it, so that a claim
// waits for the rest of the group in progress, not for that and a group of
// its own. It returns the group with the writes it took in.
//
// A group runs its writes without savepoints first (runTogether): a
// savepoint copies every page its write touches into the sub-journal, and
// most writes succeed, or fail before they change a row. When a write fails
// after it changed rows, which only a savepoint could undo alone, the
// transaction is rolled back and the whole group runs again, each write in
// a savepoint of its own. A write may therefore run twice; every write
// function starts from what it reads in tx, never from what an earlier run
// left behind.
func (s *Store) runGroup(ctx context.Context, group []*groupWrite) []*groupWrite {
	// The transaction and its savepoints belong to no single caller: no
	// caller's context, not even the leader's, may end them.
	ctx = context.WithoutCancel(ctx)
	if len(group) == 1 {
		s.runAlone(ctx, group[0])
		return group
	}
	joined := 0
	group, undo := s.runTogether(ctx, group, &joined, false)
	if undo {
		for _, g := range group {
			g.err, g.panicked = nil, nil
		}
		s.groupReruns.Add(1)
		group, _ = s.runTogether(ctx, group, &joined, true)
	}
	return group
}

// runAlone runs a write that found the writer idle: in a transaction of its
// own, with no savepoint (its error rolls the transaction back).
func (s *Store) runAlone(ctx context.Context, g *groupWrite) {
	tx, err := s.w.begin(ctx)
	if err != nil {
		g.err = err
		return
	}
	defer tx.end()
	if err := g.ctx.Err(); err != nil {
		g.err = err
		return
	}
	err = g.run(tx, s.clock())
	ce, keep := err.(*commitErr)
	if err != nil && !keep {
		g.err = err
		return
	}
	// The caller gave up while its write ran: nothing of it stands.
	if err := g.ctx.Err(); err != nil {
		g.err = err
		return
	}
	if err := tx.Commit(); err != nil {
		g.err = err
		return
	}
	if keep {
		g.err = ce.err
	}
}

// runTogether runs a group's writes in one transaction, taking in first
// writes on its way (joined counts them across runs). With savepoints, each
// write runs in one and a failed write rolls back alone. Without, a write
// runs bare unless it asked for a savepoint (writeSchema): one that fails
// without having changed a row (wtx.changed says) fails alone, and one
// that fails after it did, or with an error of SQLite's that may have ended
// the transaction, makes runTogether roll the transaction back and answer
// undo, for the group to run again with savepoints.
func (s *Store) runTogether(ctx context.Context, group []*groupWrite, joined *int, savepoints bool) (_ []*groupWrite, undo bool) {
	tx, err := s.w.begin(ctx)
	if err != nil {
		for _, g := range group {
			g.err = err
		}
		return group, false
	}
	defer tx.end()
	var committed []*groupWrite // writes whose changes stand in the transaction
	// abort fails what stood in the transaction and every write from i on:
	// the transaction is lost.
	abort := func(i int, err error) {
		for _, g := range committed {
			g.err = err
		}
		for _, g := range group[i:] {
			g.err = err
		}
	}
	for i := 0; i < len(group); i++ {
		if i > 0 && *joined < maxJoined {
			more := s.queue.takeFirst(maxJoined - *joined)
			*joined += len(more)
			group = append(group, more...)
		}
		g := group[i]
		if err := g.ctx.Err(); err != nil {
			g.err = err
			continue
		}
		saved := savepoints || g.savepoint
		// SAVEPOINT and RELEASE run prepared (wtx): parsed anew, the two
		// cost the writer 6 % of its CPU in B3. A savepoint copies every
		// page its write touches into the sub-journal, which the writer's
		// temp_store=memory keeps in memory (see dsn).
		if saved {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT grp"); err != nil {
				abort(i, err)
				return group, false
			}
		}
		changed := tx.changed
		err := g.run(tx, s.clock())
		ce, keep := err.(*commitErr)
		if err == nil || keep {
			// The caller gave up while its write ran: its changes go, and
			// so does any error fn had, which nobody is waiting for.
			if cerr := g.ctx.Err(); cerr != nil {
				err, keep = cerr, false
			}
		}
		switch {
		case err != nil && !keep && saved:
			if _, rerr := tx.conn.ExecContext(ctx, "ROLLBACK TO grp; RELEASE grp"); rerr != nil {
				// SQLite may have rolled the whole transaction back (an I/O
				// error, a full disk): nothing of the group stands.
				abort(i, fmt.Errorf("group commit: roll back a failed write: %w", errors.Join(err, rerr)))
				return group, false
			}
			g.err = err
		case err != nil && !keep:
			// A bare write failed: it fails alone only if it changed no row
			// and the transaction is surely still open.
			if g.panicked != nil || mayEndTransaction(err) || tx.changed != changed {
				return group, true
			}
			g.err = err
		default:
			if saved {
				if _, err := tx.ExecContext(ctx, "RELEASE grp"); err != nil {
					abort(i, err)
					return group, false
				}
			}
			if keep {
				g.err = ce.err
			}
			committed = append(committed, g)
		}
	}
	if err := tx.Commit(); err != nil {
		abort(len(group), err)
	}
	return group, false
}

// mayEndTransaction reports whether err is one of SQLite's that may have
// rolled the whole transaction back (SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY,
// SQLITE_NOMEM, …): every code but a constraint's, which fails its statement
// alone. Errors of this package's own (a refusal, a conflict found by
// reading) leave the transaction as it was.
func mayEndTransaction(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff != sqlite3.SQLITE_CONSTRAINT
}

// takeFirst takes out of the queue up to n of the first writes waiting at
// its head (writeFirst puts them there).
func (q *writeQueue) takeFirst(n int) []*groupWrite {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := 0
	for k < len(q.pending) && k < n && q.pending[k].first {
		k++
	}
	if k == 0 {
		return nil
	}
	taken := slices.Clone(q.pending[:k])
	q.pending = slices.Delete(q.pending, 0, k)
	return taken
}
