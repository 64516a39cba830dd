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

// queryProposal reads one proposal outside any transaction.
func (s *Store) queryProposal(ctx context.Context, what, query string, args ...any) (*store.Proposal, error) {
	p, err := scanProposal(s.pool.QueryRow(ctx, query, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return p, err
}

// queueUpdate queues the guarded write of p, read at version old. A row
// whose version moved (impossible under the row lock, short of a bug or a
// foreign writer) fails the transaction with a conflict rather than being
// overwritten. With lease > 0 and a lease on p, the lease's expiry is set
// from the database's clock, and p's copy of it follows when the statement
// has run.
func (s *Store) queueUpdate(tx *txn, p *store.Proposal, old int64, lease time.Duration) error {
	vals, err := proposalValues(p)
	if err != nil {
		return err
	}
	var micros *int64
	if lease > 0 && p.Lease != nil {
		m := lease.Microseconds()
		micros = &m
	}
	args := append(vals[1:], p.ID, old, micros)
	tx.queue(s.q.updateProposal, args...).QueryRow(func(row pgx.Row) error {
		var exp *time.Time
		err := row.Scan(&exp)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("proposal %s: row changed since version %d was read: %w", p.ID, old, store.ErrConflict)
		}
		if err != nil {
			return err
		}
		if p.Lease != nil && exp != nil {
			p.Lease.ExpiresAt = exp.UTC()
		}
		return nil
	})
	return nil
}

// queueChange queues a transition's side effects, in the transaction that
// writes the row.
func (s *Store) queueChange(tx *txn, p *store.Proposal, c *store.Change, now time.Time) error {
	if n := len(c.Events); n > 0 {
		types, actors, vias, details := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		for i, e := range c.Events {
			types[i], actors[i], vias[i], details[i] = string(e.Type), e.Actor, e.Via, e.Detail
		}
		tx.queue(s.q.insertEvent, p.Tenant, p.ID, string(p.Status), now, types, actors, vias, details)
	}
	if m := c.Admit; m != nil {
		outcome, err := encodeOutcome(m.Outcome)
		if err != nil {
			return fmt.Errorf("admit message: %w", err)
		}
		tx.queue(s.q.admitMessage, m.ID, m.Tenant, m.ThreadID, m.Role, m.Text, m.ProposalID, outcome, dbTime(m.CreatedAt))
	}
	if g := c.Grant; g != nil {
		id := g.ID
		if id == "" {
			id = "grt_" + store.NewToken()
		}
		tx.queue(s.q.insertGrant,
			id, p.Tenant, g.Requester, string(g.Scope), g.ThreadID, g.RunID, g.Action, g.ActionVersion,
			g.InputDigest, p.ID, g.GrantedBy, now, dbTimePtr(g.ExpiresAt), dbTimePtr(g.RevokedAt), g.RevokedBy, g.RuleFingerprint)
	}
	if c.ActivateGrants {
		tx.queue(s.q.activateGrants, now, p.ID)
	}
	return nil
}

// applyRow finishes a transition applied to p (read at version old, in
// status from), queues the row and its change, and records what to
// announce.
func (s *Store) applyRow(tx *txn, p *store.Proposal, from store.Status, old int64, c *store.Change, now time.Time, lease time.Duration) error {
	store.Finish(p, now)
	normalize(p)
	if err := s.queueUpdate(tx, p, old, lease); err != nil {
		return err
	}
	if err := s.queueChange(tx, p, c, now); err != nil {
		return err
	}
	s.announce(tx, p, from)
	return nil
}

// announce records the notifications a transition of p from status from
// calls for.
func (s *Store) announce(tx *txn, p *store.Proposal, from store.Status) {
	if p.Status == from {
		return
	}
	tx.statusChanged(p.ID)
	if p.Status == store.StatusApproved && p.Mode == store.ModeIndependent {
		tx.work = true
	}
}

// transitionFunc applies a rule to a locked proposal; see mutate.
type transitionFunc func(p *store.Proposal, now time.Time) (*store.Change, error)

// mutate runs one guarded transition: it locks the row (SELECT … FOR
// UPDATE, sent with BEGIN), applies fn to a copy, and writes the row and
// its change if fn produced one. fn may return both a change and an error:
// the change is committed and the error returned. lease, when positive, is
// the duration of a lease the transition writes (see queueUpdate). It
// returns the proposal as it now stands, the status it was in and whether
// anything was written.
func (s *Store) mutate(ctx context.Context, tenant, id string, lease time.Duration, fn transitionFunc) (*store.Proposal, store.Status, bool, error) {
	var (
		cur     *store.Proposal
		readErr error
		p       *store.Proposal
		from    store.Status
		changed bool
	)
	err := s.write(ctx, func(b *pgx.Batch) {
		b.Queue(s.q.getProposalForUpdate, id, tenant).QueryRow(func(row pgx.Row) error {
			cur, readErr = scanProposal(row)
			return nil
		})
	}, func(tx *txn, now time.Time) error {
		p, changed = nil, false
		if errors.Is(readErr, pgx.ErrNoRows) {
			return notFound(id)
		}
		if readErr != nil {
			return readErr
		}
		from = cur.Status
		// fn works on a copy, so a refused transition returns the row as
		// stored, not half-applied.
		w := cur.Clone()
		c, ferr := fn(w, now)
		if c == nil {
			p = cur
			return ferr
		}
		if err := s.applyRow(tx, w, from, cur.Version, c, now, lease); err != nil {
			return err
		}
		p, changed = w, true
		if ferr != nil {
			return &commitErr{ferr}
		}
		return nil
	})
	return p, from, changed, err
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

// errReplay reports an insert that lost to a concurrent one for the same
// tool call.
var errReplay = errors.New("tool call exists")

// replacementLock names the advisory lock that serialises the creations of
// one (tenant, requester, thread, action, replacement key) in this schema.
// Length prefixes keep two different tuples from spelling the same text.
func (s *Store) replacementLock(p *store.Proposal) string {
	var b strings.Builder
	for _, f := range []string{"countersign.replace", s.schema, p.Tenant, p.Requester, p.ThreadID, p.Action, p.ReplacementKey} {
		fmt.Fprintf(&b, "%d:%s;", len(f), f)
	}
	return b.String()
}

// CreateProposal implements store.Store.
//
// Its reads go with BEGIN, in one round trip. The thread comes first,
// replays included: INSERT … ON CONFLICT DO NOTHING waits for a concurrent
// insert of the same thread and then inserts nothing, and the SELECTs after
// it (each a new snapshot) read whoever committed first: the thread's owner,
// and the tool call's proposal if that creation stored one. The grant that
// stands in for an approval is read FOR SHARE: a revocation (an UPDATE of
// the row) waits for this creation to commit, or this read waits for the
// revocation and sees it.
//
// The insert claims the tool call: INSERT … ON CONFLICT DO NOTHING waits for
// a concurrent insert of the same tool call and then inserts nothing, and
// the loser returns the winner's proposal. Only then, holding the
// replacement's advisory lock, does the creation supersede: concurrent
// creations with one replacement key take turns, and each sees the ones
// committed before it, so exactly one pending proposal remains.
func (s *Store) CreateProposal(ctx context.Context, params *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	if err := store.ValidateCreateParams(params); err != nil {
		return nil, wrap("create proposal", err)
	}
	sent := params.Proposal
	var (
		existing *store.Proposal
		readErr  error
		owner    string
		grant    *store.Grant
		res      *store.CreateProposalResult
	)
	err := s.write(ctx, func(b *pgx.Batch) {
		existing, readErr, owner, grant = nil, nil, "", nil
		// The thread's creation time is read before the transaction's now:
		// a thread is never younger than its first proposal.
		b.Queue(s.q.ensureThread, sent.Tenant, sent.ThreadID, sent.Requester, dbTime(s.clock()))
		b.Queue(s.q.getThread, sent.Tenant, sent.ThreadID).QueryRow(func(row pgx.Row) error {
			var created time.Time
			if err := row.Scan(&owner, &created); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return nil
		})
		b.Queue(s.q.getByToolCall, sent.Tenant, sent.ThreadID, sent.ToolCallID).QueryRow(func(row pgx.Row) error {
			existing, readErr = scanProposal(row)
			return nil
		})
		if params.GrantID != "" {
			b.Queue(s.q.lockGrant, sent.Tenant, params.GrantID).QueryRow(func(row pgx.Row) error {
				g, err := scanGrant(row)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				grant = g
				return err
			})
		}
	}, func(tx *txn, now time.Time) error {
		res = nil
		if readErr != nil && !errors.Is(readErr, pgx.ErrNoRows) {
			return readErr
		}
		n := sent.Clone()
		if owner != n.Requester {
			return fmt.Errorf("thread %s: %w", n.ThreadID, store.ErrNotThreadOwner)
		}
		if readErr == nil {
			// A replay: nothing of this transaction is to stay.
			return errReplay
		}
		if params.GrantID != "" && (grant == nil || !store.GrantApproves(grant, n, now)) {
			return fmt.Errorf("approved by grant %s: %w", params.GrantID, store.ErrGrantNotLive)
		}
		c := store.PrepareCreate(n, params, now)
		normalize(n)
		vals, err := proposalValues(n)
		if err != nil {
			return err
		}
		// An allowed execution's lease runs by the database's clock.
		var leaseMicros *int64
		if params.Allowed != nil {
			m := params.Allowed.LeaseDuration.Microseconds()
			leaseMicros = &m
		}
		inserted := false
		tx.queue(s.q.insertProposal, append(vals, leaseMicros)...).QueryRow(func(row pgx.Row) error {
			var exp *time.Time
			err := row.Scan(&exp)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // a concurrent creation of the tool call committed first
			}
			if err != nil {
				return err
			}
			inserted = true
			if n.Lease != nil && exp != nil {
				n.Lease.ExpiresAt = exp.UTC()
			}
			return nil
		})
		if err := tx.flush(ctx); err != nil {
			return err
		}
		if !inserted {
			return errReplay
		}
		r := &store.CreateProposalResult{Proposal: n, Created: true}
		if n.ReplacementKey != "" {
			tx.queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, s.replacementLock(n))
			rows, err := tx.query(ctx, s.q.replacement, n.Tenant, n.ThreadID, n.Requester, n.Action, n.ReplacementKey)
			if err != nil {
				return fmt.Errorf("find superseded: %w", err)
			}
			olds, err := collectProposals(rows)
			if err != nil {
				return fmt.Errorf("find superseded: %w", err)
			}
			for _, old := range olds {
				if !store.Supersedes(n, old) {
					continue
				}
				from, v := old.Status, old.Version
				if err := s.applyRow(tx, old, from, v, store.ApplySupersede(old, n.ID, now), now, 0); err != nil {
					return fmt.Errorf("supersede %s: %w", old.ID, err)
				}
				r.Superseded = append(r.Superseded, old)
			}
		}
		if err := s.queueChange(tx, n, c, now); err != nil {
			return err
		}
		if n.Status == store.StatusApproved && n.Mode == store.ModeIndependent {
			tx.work = true
		}
		res = r
		return nil
	})
	if errors.Is(err, errReplay) && readErr == nil {
		return &store.CreateProposalResult{Proposal: existing}, nil
	}
	if errors.Is(err, errReplay) {
		// The concurrent creation committed (ON CONFLICT waited for it).
		p, gerr := s.queryProposal(ctx, "tool call "+sent.ToolCallID, s.q.getByToolCall, sent.Tenant, sent.ThreadID, sent.ToolCallID)
		if gerr != nil {
			return nil, wrap("create proposal", gerr)
		}
		return &store.CreateProposalResult{Proposal: p}, nil
	}
	if err != nil {
		return nil, wrap("create proposal", err)
	}
	return res, nil
}

// GetProposal implements store.Store.
func (s *Store) GetProposal(ctx context.Context, params *store.GetProposalParams) (*store.Proposal, error) {
	p, err := s.queryProposal(ctx, "proposal "+params.ID, s.q.getProposal, params.ID, params.Tenant)
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
	b.WriteString(s.q.listProposals)
	if params.ThreadID != "" {
		b.WriteString(` AND p.thread_id = ` + arg(params.ThreadID))
	}
	if params.Action != "" {
		b.WriteString(` AND p.action = ` + arg(params.Action))
	}
	switch st := params.Statuses; {
	case len(st) == 1 && st[0].Valid():
		// One known status (a fixed identifier, never the caller's text) is
		// written as a literal, so that every plan of the statement, generic
		// ones too, can prove a partial index's predicate: the inbox's
		// proposals_pending gives its page in order. With ANY($n) the
		// planner read every pending row through proposals_expiry and sorted
		// them (custom plans), or walked proposals_list past every settled
		// row (generic ones).
		b.WriteString(` AND p.status = '` + string(st[0]) + `'`)
	case len(st) > 0:
		b.WriteString(` AND p.status = ANY(` + arg(toStrings(st)) + `::text[])`)
	}
	if pos := after; pos != nil {
		// A row comparison: a range scan of the (…, created_at DESC, id
		// DESC) index.
		b.WriteString(` AND (p.created_at, p.id) < (` + arg(dbTime(pos.CreatedAt)) + `, ` + arg(pos.ID) + `)`)
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
	b.WriteString(` ORDER BY p.created_at DESC, p.id DESC LIMIT ` + arg(limit+1))
	return b.String(), args
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

// ExpireDue implements store.Store. Concurrent sweepers skip each other's
// rows (SKIP LOCKED) instead of waiting for them.
func (s *Store) ExpireDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	if params.Limit <= 0 {
		return nil, wrap("expire due", fmt.Errorf("%w: limit %d", store.ErrInvalidParams, params.Limit))
	}
	var out []*store.Proposal
	err := s.write(ctx, nil, func(tx *txn, now time.Time) error {
		out = nil
		rows, err := tx.query(ctx, s.q.expireDue, now, params.Limit)
		if err != nil {
			return err
		}
		due, err := collectProposals(rows)
		if err != nil {
			return err
		}
		for _, p := range due {
			from, old := p.Status, p.Version
			c, err := store.ApplyExpire(p, now)
			if err != nil || c == nil {
				continue
			}
			if err := s.applyRow(tx, p, from, old, c, now, 0); err != nil {
				return fmt.Errorf("expire %s: %w", p.ID, err)
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("expire due", err)
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
	var changed []string
	for _, c := range out {
		if c.Proposal.Status != c.From {
			changed = append(changed, c.Proposal.ID)
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
