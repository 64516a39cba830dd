package pgstore

import "context"

// Grouped compare-and-set writes.
//
// A durable commit waits for PostgreSQL to flush its WAL, and under load the
// flush, not the statement, is what a transition waits for
// (LWLock:WALWrite in pg_stat_activity). So the single-row transitions of a
// Store (decisions, cancellations, claims, renewals, settlements one by
// one) share their statements (grouping.go): while maxCASInFlight statements
// are running, a new write queues, and the queue is sent as one
// compare-and-set statement (cas.go), which writes each row guarded by its
// own version and reports each row's fate. The group pays one commit.
//
// Two writes of one row never share a statement — each is guarded by the
// version it read, so at most one could be written, and the statement could
// not tell which — the later one waits for the next group. A row that moved
// is reported to its caller, who reads it again, as without grouping.
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

// casWrite is one caller's write and its outcome.
type casWrite struct {
	rw      *rowWrite
	written bool
	err     error
}

func newCASGrouper() *grouper[*casWrite] {
	return &grouper[*casWrite]{maxInFlight: maxCASInFlight, maxGroup: maxCASGroup,
		key: func(w *casWrite) rowKey { return rowKey{w.rw.p.Tenant, w.rw.p.ID} }}
}

// writeOne writes rw, grouped with concurrent writes, and reports whether
// it was written (false: its row moved since it was read).
func (s *Store) writeOne(ctx context.Context, rw *rowWrite) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	w := &casWrite{rw: rw}
	s.cas.do(w, func(group []*casWrite) { s.runCASGroup(context.WithoutCancel(ctx), group) })
	return w.written, w.err
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
