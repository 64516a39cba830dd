package pgstore

import (
	"context"
	"sync"
)

// Grouped compare-and-set writes.
//
// A durable commit waits for PostgreSQL to flush its WAL, and under load the
// flush, not the statement, is what a transition waits for
// (LWLock:WALWrite in pg_stat_activity). So the single-row transitions of a
// Store (decisions, cancellations, claims, renewals, settlements one by
// one) share their statements: while maxCASInFlight statements are running,
// a new write queues, and the queue is sent as one compare-and-set
// statement (cas.go), which writes each row guarded by its own version and
// reports each row's fate. The group pays one commit. A write that finds a
// statement free runs alone at once: the quiet path costs what it did
// without grouping.
//
// The first write to find a statement free leads: it runs its own write
// and, while writes are queued, hands the lead to the oldest of them, whose
// group is everything queued (up to maxCASGroup). Two writes of one row
// never share a statement — each is guarded by the version it read, so at
// most one could be written, and the statement could not tell which — the
// later one waits for the next group. A row that moved is reported to its
// caller, who reads it again, as without grouping.
//
// A caller's context decides only its own write, and only before the write
// is queued: a queued write may be in a statement already, and a statement
// runs without any caller's cancellation, since cancelling it would take the
// other callers' writes with it. Statements are short; the wait is bounded.

// maxCASInFlight bounds the compare-and-set statements one Store runs at
// once; further writes queue and go together.
const maxCASInFlight = 4

// maxCASGroup bounds the rows of one grouped statement.
const maxCASGroup = 64

// casWrite is one caller's write, queued.
type casWrite struct {
	rw      *rowWrite
	written bool
	err     error
	// done receives true when the write has been sent (or failed), and false
	// when its caller is to lead the next group, group.
	done  chan bool
	group []*casWrite
}

// casQueue is a Store's queue of single-row writes. Writes queue only while
// maxCASInFlight statements run: the queue is empty whenever a statement is
// free, since a leader that finishes hands the queue on before it frees its
// statement.
type casQueue struct {
	mu      sync.Mutex
	running int // statements in flight
	pending []*casWrite
}

// writeOne writes rw, grouped with concurrent writes, and reports whether
// it was written (false: its row moved since it was read).
func (s *Store) writeOne(ctx context.Context, rw *rowWrite) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	w := &casWrite{rw: rw, done: make(chan bool, 1)}
	q := &s.cas
	q.mu.Lock()
	lead := q.running < maxCASInFlight && len(q.pending) == 0
	q.pending = append(q.pending, w)
	if lead {
		q.running++
		w.group = q.take() // w alone
	}
	q.mu.Unlock()
	if !lead {
		if finished := <-w.done; finished {
			return w.written, w.err
		}
		// w leads the group the previous leader took for it.
	}
	group := w.group

	s.runCASGroup(context.WithoutCancel(ctx), group)

	q.mu.Lock()
	var next []*casWrite
	if len(q.pending) > 0 {
		next = q.take() // its oldest write leads it
		next[0].group = next
	} else {
		q.running--
	}
	q.mu.Unlock()
	if next != nil {
		next[0].done <- false
	}
	for _, g := range group {
		if g != w {
			g.done <- true
		}
	}
	return w.written, w.err
}

// take removes the next group from the queue: the oldest writes, at most
// maxCASGroup, no two of one row (a later write of a row stays queued, in
// order). The caller holds q.mu.
func (q *casQueue) take() []*casWrite {
	var group, rest []*casWrite
	seen := make(map[rowKey]bool, min(len(q.pending), maxCASGroup))
	for _, w := range q.pending {
		k := rowKey{w.rw.p.Tenant, w.rw.p.ID}
		if len(group) == maxCASGroup || seen[k] {
			rest = append(rest, w)
			continue
		}
		seen[k] = true
		group = append(group, w)
	}
	q.pending = rest
	return group
}

// runCASGroup writes the group's rows in one statement and sets each
// write's outcome.
func (s *Store) runCASGroup(ctx context.Context, group []*casWrite) {
	ws := make([]*rowWrite, len(group))
	for i, g := range group {
		ws[i] = g.rw
	}
	written, err := s.writeRows(ctx, ws)
	for i, g := range group {
		if err != nil {
			g.err = err
			continue
		}
		g.written = written[i]
	}
}
