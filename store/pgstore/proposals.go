package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/internal/cursor"
	"github.com/countersign/countersign/store"
)

// notFound is the error for a proposal that is not in the tenant.
func notFound(id string) error { return fmt.Errorf("proposal %s: %w", id, store.ErrNotFound) }

// queryProposal reads one proposal outside any transaction, and remembers
// it for the transition that may follow (see internal/rowmemory).
func (s *Store) queryProposal(ctx context.Context, what, query string, args ...any) (*store.Proposal, error) {
	p, err := scanProposal(s.pool.QueryRow(ctx, query, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	s.rows.Put(p)
	return p, nil
}

// transitionFunc applies a rule to a copy of a proposal; see mutate.
type transitionFunc func(p *store.Proposal, now time.Time) (*store.Change, error)

// mutate runs one transition as a compare-and-set (cas.go): it applies fn
// to a copy of the row as remembered, or else as read, and writes what fn
// changed, guarded by the row's version, in one statement. A row that moved
// meanwhile is read again and fn applied anew. An answer that writes
// nothing (fn returns no change) is given only on a row read from the
// database, never on a remembered one, which may be stale. fn may return
// both a change and an error: the change is written and the error
// returned. lease, when positive, is the duration of a lease the transition
// writes, which then runs on the database's clock. It returns the proposal
// as it now stands, the status it was in and whether anything was written.
func (s *Store) mutate(ctx context.Context, tenant, id string, lease time.Duration, fn transitionFunc) (*store.Proposal, store.Status, bool, error) {
	// The remembered row is only read here: the rule works on a copy.
	cur, fresh := s.rows.Shared(tenant, id), false
	for range maxCASAttempts {
		if cur == nil {
			p, err := s.readProposal(ctx, tenant, id)
			if err != nil {
				return nil, "", false, err
			}
			cur, fresh = p, true
		}
		now := s.clock()
		w := cur.Clone()
		c, ferr := fn(w, now)
		if c == nil {
			if !fresh {
				cur = nil // judge the refusal on the row as stored
				continue
			}
			return cur, cur.Status, false, ferr
		}
		store.Finish(w, now)
		normalize(w)
		rw, err := newRowWrite(cur, w, c, lease)
		if err != nil {
			return nil, "", false, err
		}
		written, err := s.writeOne(ctx, rw)
		if err != nil {
			return nil, "", false, err
		}
		if !written {
			cur = nil // the row moved: read it again
			continue
		}
		return w, rw.from, true, ferr
	}
	return nil, "", false, fmt.Errorf("proposal %s: changed by others %d times in a row: %w", id, maxCASAttempts, store.ErrConflict)
}

// transition wraps mutate for the methods that answer a TransitionResult,
// which is returned even alongside a refusal.
func (s *Store) transition(ctx context.Context, op, tenant, id string, fn transitionFunc) (*store.TransitionResult, error) {
	p, from, changed, err := s.mutate(ctx, tenant, id, 0, fn)
	err = wrap(op, err)
	if p == nil {
		return nil, err
	}
	return &store.TransitionResult{Proposal: p, From: from, Changed: changed}, err
}

// GetProposal implements store.Store.
func (s *Store) GetProposal(ctx context.Context, params *store.GetProposalParams) (*store.Proposal, error) {
	p, err := s.readProposal(ctx, params.Tenant, params.ID)
	if err != nil {
		return nil, wrap("get proposal", err)
	}
	return p, nil
}

// GetProposalByToolCall implements store.Store.
func (s *Store) GetProposalByToolCall(ctx context.Context, params *store.GetProposalByToolCallParams) (*store.Proposal, error) {
	p, err := s.queryProposal(ctx, "tool call "+params.ToolCallID, s.q.getByToolCall, params.Tenant, params.ThreadID, params.ToolCallID)
	if err != nil {
		return nil, wrap("get proposal by tool call", err)
	}
	return p, nil
}

// GetProposalByConfirmation implements store.Store.
func (s *Store) GetProposalByConfirmation(ctx context.Context, params *store.GetProposalByConfirmationParams) (*store.Proposal, error) {
	p, err := s.queryProposal(ctx, "confirmation", s.q.getByConfirmation, params.Tenant, params.ConfirmationID)
	if err != nil {
		return nil, wrap("get proposal by confirmation", err)
	}
	return p, nil
}

// Times a cursor can carry (Unix nanoseconds: years 1677–2262).
var (
	minCursorTime = time.Unix(0, -1<<63)
	maxCursorTime = time.Unix(0, 1<<63-1)
)

// ListProposals implements store.Store.
func (s *Store) ListProposals(ctx context.Context, params *store.ListProposalsParams) (*store.ProposalPage, error) {
	limit := params.Limit
	if limit < 0 || limit > store.MaxPageSize {
		return nil, wrap("list proposals", fmt.Errorf("%w: limit %d", store.ErrInvalidParams, limit))
	}
	if limit == 0 {
		limit = store.MaxPageSize
	}
	codec, err := s.cursorCodec(ctx)
	if err != nil {
		return nil, wrap("list proposals", err)
	}
	var after *cursor.Position
	if params.After != "" {
		pos, err := codec.Decode(params.After)
		if err != nil {
			return nil, wrap("list proposals", fmt.Errorf("%w: %w", store.ErrInvalidCursor, err))
		}
		after = &pos
	}
	query, args := s.listQuery(params, after, limit)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, wrap("list proposals", err)
	}
	ps, err := collectProposals(rows)
	if err != nil {
		return nil, wrap("list proposals", err)
	}
	page := &store.ProposalPage{}
	if len(ps) > limit {
		ps = ps[:limit]
		last := ps[limit-1]
		switch {
		case len(last.ID) > cursor.MaxIDLen:
			// cursor.Encode would panic; ids this long are not made by the engine.
			return nil, wrap("list proposals", fmt.Errorf("proposal id %.32s… is longer than %d bytes", last.ID, cursor.MaxIDLen))
		case last.CreatedAt.Before(minCursorTime) || last.CreatedAt.After(maxCursorTime):
			return nil, wrap("list proposals", fmt.Errorf("proposal %s: created_at %v is outside the years 1677-2262", last.ID, last.CreatedAt))
		}
		page.Next = codec.Encode(cursor.Position{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	page.Proposals = ps
	return page, nil
}

// listQuery builds ListProposals' query: the filters, then keyset order
// newest first, one row more than the page.
func (s *Store) listQuery(params *store.ListProposalsParams, after *cursor.Position, limit int) (string, []any) {
	var b strings.Builder
	args := []any{params.Tenant}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	// The inbox (pending alone, in no one thread) reads the open proposals'
	// index open_proposals_pending, which gives its page in order: its
	// rows, and so its order and keyset, are the open rows' (o), whose
	// tenant, created_at and id are the proposal's. One thread's pending
	// proposals are its listing's (proposals_thread_list) with the status
	// filtered: a thread's rows are fewer than a tenant's pending ones.
	st := params.Statuses
	inbox := len(st) == 1 && st[0] == store.StatusPending && params.ThreadID == ""
	k := "p"
	if inbox {
		k = "o"
		b.WriteString(s.q.listInbox)
	} else {
		b.WriteString(s.q.listProposals)
	}
	if params.ThreadID != "" {
		b.WriteString(` AND p.thread_id = ` + arg(params.ThreadID))
	}
	if params.Action != "" {
		b.WriteString(` AND p.action = ` + arg(params.Action))
	}
	switch {
	case inbox:
		// listInbox's own terms.
	case len(st) == 1 && st[0].Valid():
		// One known status (a fixed identifier, never the caller's text) is
		// written as a literal, which every plan of the statement, generic
		// ones too, can use: with ANY($n) the planner once read every row of
		// a status through a partial index and sorted them (custom plans),
		// or walked proposals_list past every settled row (generic ones).
		b.WriteString(` AND p.status = '` + string(st[0]) + `'`)
	case len(st) > 0:
		b.WriteString(` AND p.status = ANY(` + arg(toStrings(st)) + `::text[])`)
	}
	if pos := after; pos != nil {
		// A row comparison: a range scan of the (…, created_at DESC, id
		// DESC) index.
		b.WriteString(` AND (` + k + `.created_at, ` + k + `.id) < (` + arg(dbTime(pos.CreatedAt)) + `, ` + arg(pos.ID) + `)`)
	}
	if v := params.Visible; v != nil {
		// store.CanSee, in SQL: the requester, an approver naming one of
		// the principals, and operators for what is reconciling or unknown.
		b.WriteString(` AND (p.requester = ` + arg(v.Actor) + `
			OR EXISTS (SELECT 1 FROM unnest(p.approvers) AS a(v)
				WHERE a.v <> 'requester' AND a.v = ANY(` + arg(append([]string{}, v.Principals...)) + `::text[]))`)
		if v.Operator {
			b.WriteString(` OR p.status IN ('reconciling', 'unknown')`)
		}
		b.WriteString(`)`)
	}
	// One row more than the page tells whether another page follows.
	b.WriteString(` ORDER BY ` + k + `.created_at DESC, ` + k + `.id DESC LIMIT ` + arg(limit+1))
	return b.String(), args
}

// RememberedProposal implements store.Rememberer.
func (s *Store) RememberedProposal(tenant, id string) (*store.Proposal, bool) {
	p := s.rows.Get(tenant, id)
	return p, p != nil
}

// Decide implements store.Store.
func (s *Store) Decide(ctx context.Context, params *store.DecideParams) (*store.DecideResult, error) {
	var out store.DecideOutcome
	p, from, _, err := s.mutate(ctx, params.Tenant, params.ID, 0, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		var c *store.Change
		var err error
		out, c, err = store.ApplyDecision(p, params, now)
		return c, err
	})
	if err != nil {
		return nil, wrap("decide", err)
	}
	return &store.DecideResult{Outcome: out, Proposal: p, From: from, To: p.Status}, nil
}

// Cancel implements store.Store.
func (s *Store) Cancel(ctx context.Context, params *store.CancelParams) (*store.TransitionResult, error) {
	return s.transition(ctx, "cancel", params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyCancel(p, params, now)
	})
}

// Expire implements store.Store.
func (s *Store) Expire(ctx context.Context, params *store.ExpireParams) (*store.TransitionResult, error) {
	return s.transition(ctx, "expire", params.Tenant, params.ID, store.ApplyExpire)
}

// ExpireDue implements store.Store in two round trips: one reads the due
// proposals, most overdue first; the rule expires each (store.ApplyExpire);
// one statement writes them all, each guarded by its version. A proposal
// that moved meanwhile (decided, or expired by a concurrent sweeper) is
// left to whoever moved it.
func (s *Store) ExpireDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "expire due", params, s.q.expireDue, store.Due,
		func(p *store.Proposal, now time.Time) (*store.Change, error) { return store.ApplyExpire(p, now) })
}

// EscalateDue implements store.Store as ExpireDue does, with
// store.ApplyEscalate.
func (s *Store) EscalateDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "escalate due", params, s.q.escalateDue, store.Escalatable, store.ApplyEscalate)
}

// RemindDue implements store.Store as ExpireDue does, with
// store.ApplyRemind.
func (s *Store) RemindDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "remind due", params, s.q.remindDue, store.Remindable, store.ApplyRemind)
}

// sweepDue reads up to params.Limit proposals with query (parameters: now,
// limit), applies apply to each that due confirms, and writes them all in
// one statement, each guarded by its version; it returns those written.
func (s *Store) sweepDue(ctx context.Context, op string, params *store.ExpireDueParams, query string,
	due func(*store.Proposal, time.Time) bool, apply func(*store.Proposal, time.Time) (*store.Change, error)) ([]*store.Proposal, error) {
	if params.Limit <= 0 {
		return nil, wrap(op, fmt.Errorf("%w: limit %d", store.ErrInvalidParams, params.Limit))
	}
	now := s.clock()
	rows, err := s.pool.Query(ctx, query, now, params.Limit)
	if err != nil {
		return nil, wrap(op, err)
	}
	candidates, err := collectProposals(rows)
	if err != nil {
		return nil, wrap(op, err)
	}
	var ws []*rowWrite
	for _, p := range candidates {
		if !due(p, now) {
			continue
		}
		w := p.Clone()
		c, err := apply(w, now)
		if err != nil || c == nil {
			continue
		}
		store.Finish(w, now)
		normalize(w)
		rw, err := newRowWrite(p, w, c, 0)
		if err != nil {
			return nil, wrap(op, err)
		}
		ws = append(ws, rw)
	}
	written, err := s.writeRows(ctx, ws)
	if err != nil {
		return nil, wrap(op, err)
	}
	var out []*store.Proposal
	for i, w := range ws {
		if written[i] {
			out = append(out, w.p)
		}
	}
	return out, nil
}

// Claim implements store.Store. The lease runs out on the database's clock.
func (s *Store) Claim(ctx context.Context, params *store.ClaimParams) (*store.Proposal, error) {
	p, _, changed, err := s.mutate(ctx, params.Tenant, params.ID, params.LeaseDuration, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyClaim(p, params, now)
	})
	if err != nil {
		err = wrap("claim", err)
		// A lapsed approval was expired by this claim: the caller gets the
		// expired proposal with the conflict, to settle the expiry once. A
		// proposal that someone else expired first is theirs to settle.
		var ce *store.ConflictError
		if changed && p != nil && errors.As(err, &ce) && ce.Got == store.StatusExpired && p.Status == store.StatusExpired {
			return p, err
		}
		return nil, err
	}
	return p, nil
}

// ClaimBatch implements store.Store in one statement (claimBatchSQL):
// claimable rows are picked with FOR UPDATE SKIP LOCKED, so concurrent
// workers, in any process, claim different rows without waiting for each
// other.
func (s *Store) ClaimBatch(ctx context.Context, params *store.ClaimBatchParams) ([]*store.Claimed, error) {
	if params.Limit <= 0 || params.LeaseDuration <= 0 {
		return nil, wrap("claim batch", fmt.Errorf("%w: limit and lease must be positive", store.ErrInvalidParams))
	}
	rows, err := s.pool.Query(ctx, s.q.claimBatch, s.clock(), params.Owner, params.LeaseDuration.Microseconds(), params.Limit)
	if err != nil {
		return nil, wrap("claim batch", err)
	}
	defer rows.Close()
	var out []*store.Claimed
	for rows.Next() {
		var from string
		p, err := scanProposal(rows, &from)
		if err != nil {
			return nil, wrap("claim batch", err)
		}
		out = append(out, &store.Claimed{Proposal: p, From: store.Status(from)})
	}
	rows.Close() // the statement's own transaction has committed
	if err := rows.Err(); err != nil {
		return nil, wrap("claim batch", err)
	}
	var changed []*store.Proposal
	for _, c := range out {
		s.rows.Put(c.Proposal)
		if c.Proposal.Status != c.From {
			changed = append(changed, c.Proposal)
		}
	}
	s.publish(changed, false)
	return out, nil
}

// RenewLease implements store.Store. The renewed lease runs out on the
// database's clock.
func (s *Store) RenewLease(ctx context.Context, params *store.RenewLeaseParams) (*store.Lease, error) {
	p, _, _, err := s.mutate(ctx, params.Tenant, params.ID, params.LeaseDuration, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyRenew(p, params, now)
	})
	if err != nil {
		return nil, wrap("renew lease", err)
	}
	l := *p.Lease
	return &l, nil
}

// BeginRetry implements store.Store. The lease runs out on the database's
// clock.
func (s *Store) BeginRetry(ctx context.Context, params *store.BeginRetryParams) (*store.Proposal, error) {
	p, _, _, err := s.mutate(ctx, params.Tenant, params.ID, params.LeaseDuration, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyBeginRetry(p, params, now)
	})
	if err != nil {
		return nil, wrap("begin retry", err)
	}
	return p, nil
}

// Settle implements store.Store.
func (s *Store) Settle(ctx context.Context, params *store.SettleParams) (*store.TransitionResult, error) {
	return s.transition(ctx, "settle", params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplySettle(p, params, now)
	})
}

// Resolve implements store.Store.
func (s *Store) Resolve(ctx context.Context, params *store.ResolveParams) (*store.TransitionResult, error) {
	return s.transition(ctx, "resolve", params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyResolve(p, params, now)
	})
}

// ProposalTenant implements store.Store.
func (s *Store) ProposalTenant(ctx context.Context, id string) (string, error) {
	var tenant string
	err := s.pool.QueryRow(ctx, s.q.proposalTenant, id).Scan(&tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("pgstore: proposal tenant: proposal %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return "", wrap("proposal tenant", err)
	}
	return tenant, nil
}

// CountByStatus implements store.Store.
func (s *Store) CountByStatus(ctx context.Context) (map[store.Status]int, error) {
	rows, err := s.pool.Query(ctx, s.q.countByStatus)
	if err != nil {
		return nil, wrap("count by status", err)
	}
	defer rows.Close()
	out := map[store.Status]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, wrap("count by status", err)
		}
		out[store.Status(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("count by status", err)
	}
	return out, nil
}
