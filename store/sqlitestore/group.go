package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Group commit.
//
// SQLite has one writer, and a durable commit (WAL, synchronous=FULL) costs
// an fsync. Writes that arrive while another is running therefore queue, and
// the queue is served as a group: one BEGIN IMMEDIATE … COMMIT holds the
// writes of several callers, each inside its own SAVEPOINT, so that a
// refused or failed write rolls back alone while the others commit. The
// group pays one fsync instead of one per write. Nobody returns before the
// group's COMMIT did, so a write is durable when its method returns, as
// before.
//
// The first caller to find the writer idle leads: it takes everything queued
// (up to maxGroup writes, its own first), runs the group and, if more writes
// arrived meanwhile, hands the lead to the oldest of them before it returns.
// A write that finds the writer idle runs alone, with no savepoint: the
// quiet path costs what it did without grouping.
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
// it has run: a write whose context has ended by then is rolled back to its
// savepoint and fails with the context's error, and the group goes on. A
// write released into the group stands, and its caller is told it succeeded.

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
func (s *Store) write(ctx context.Context, fn func(tx *wtx, now time.Time) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &groupWrite{ctx: ctx, fn: fn, done: make(chan bool, 1)}
	q := &s.queue
	q.mu.Lock()
	q.pending = append(q.pending, w)
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
	q.mu.Lock()
	n := min(len(q.pending), maxGroup)
	group := q.pending[:n:n]
	q.pending = q.pending[n:]
	q.mu.Unlock()

	s.runGroup(ctx, group)

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

// runGroup runs the writes in one transaction and sets each one's err.
func (s *Store) runGroup(ctx context.Context, group []*groupWrite) {
	// The transaction and its savepoints belong to no single caller: no
	// caller's context, not even the leader's, may end them.
	ctx = context.WithoutCancel(ctx)
	sqltx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		for _, g := range group {
			g.err = err
		}
		return
	}
	tx := &wtx{Tx: sqltx, stmts: &s.stmts}
	// Once the transaction has ended, the connection is free to prepare
	// the statements it used.
	defer func() {
		_ = tx.Rollback() // a no-op after Commit
		s.stmts.prepareWanted(ctx, s.w)
	}()
	if len(group) == 1 {
		g := group[0]
		if err := g.ctx.Err(); err != nil {
			g.err = err
			return
		}
		err := g.run(tx, s.clock())
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
		return
	}
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
	for i, g := range group {
		if err := g.ctx.Err(); err != nil {
			g.err = err
			continue
		}
		if _, err := tx.Tx.ExecContext(ctx, "SAVEPOINT grp"); err != nil {
			abort(i, err)
			return
		}
		err := g.run(tx, s.clock())
		ce, keep := err.(*commitErr)
		if err == nil || keep {
			// The caller gave up while its write ran: its changes go, and
			// so does any error fn had, which nobody is waiting for.
			if cerr := g.ctx.Err(); cerr != nil {
				err, keep = cerr, false
			}
		}
		if err != nil && !keep {
			if _, rerr := tx.Tx.ExecContext(ctx, "ROLLBACK TO grp; RELEASE grp"); rerr != nil {
				// SQLite may have rolled the whole transaction back (an I/O
				// error, a full disk): nothing of the group stands.
				abort(i, fmt.Errorf("group commit: roll back a failed write: %w", errors.Join(err, rerr)))
				return
			}
			g.err = err
			continue
		}
		if _, err := tx.Tx.ExecContext(ctx, "RELEASE grp"); err != nil {
			abort(i, err)
			return
		}
		if keep {
			g.err = ce.err
		}
		committed = append(committed, g)
	}
	if err := tx.Commit(); err != nil {
		abort(len(group), err)
	}
}
