// Package memstore is the in-memory driver of the store contract: the same
// semantics as the durable drivers, no durability. It is meant for tests and
// for single-process programs that can afford to lose their approvals.
//
// One mutex serialises every operation, which makes each compare-and-set
// trivially atomic; reads return deep copies so callers never share state.
package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/countersign/countersign/internal/cursor"
	"github.com/countersign/countersign/store"
)

// Options configures a Store. A nil *Options means the defaults.
type Options struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Store keeps everything in maps behind one mutex.
type Store struct {
	now    func() time.Time
	cursor *cursor.Codec

	mu         sync.Mutex
	proposals  map[string]*store.Proposal // by id
	byToolCall map[string]string          // tenant\x00thread\x00toolcall → id
	byConfirm  map[string]string          // tenant\x00confirmation → id
	order      []*store.Proposal          // in insertion order
	threads    map[string]*store.Thread   // tenant\x00thread
	messages   map[string][]*store.Message
	messageIDs map[string]bool // tenant\x00thread\x00message id: a thread's ids
	outcomes   map[string]bool // tenant\x00proposal\x00status: the outcome messages admitted
	grants     []*store.Grant
	events     []*store.Event
	sealed     int                            // events[:sealed] are chained; see audit.go
	chains     map[string][]*store.AuditEvent // tenant → its chain, in seq order
	chained    map[int64]*store.AuditEvent    // event id → its place in its chain
	checkpts   map[string][]*store.Checkpoint // tenant → its checkpoints, in seq order
	seal       store.SealLease
	nextGrant  int
	sessions   map[string]*store.Session           // by id; see sessions.go
	mcpNonces  map[string]mcpNonce                 // by tenant and nonce; see mcpnonces.go
	runs       map[string]*store.Run               // by id; see runs.go
	threadRuns map[string][]string                 // tenant\x00thread → run ids, oldest first
	outbox     outbox                              // see notifications.go
	slack      map[string]*store.SlackAnnouncement // by slackKey; see slack.go
	emailLinks emailLinks                          // see emaillinks.go
	pk         passkeyState                        // see passkeys.go
	closed     bool
}

var _ store.Store = (*Store)(nil)

// New returns an empty Store.
func New(opts *Options) *Store {
	if opts == nil {
		opts = &Options{}
	}
	codec, err := cursor.NewCodec(cursor.NewKey())
	if err != nil {
		panic(fmt.Sprintf("memstore: cursor codec: %v", err)) // a 32-byte key is always valid
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{
		now:        now,
		cursor:     codec,
		proposals:  map[string]*store.Proposal{},
		byToolCall: map[string]string{},
		byConfirm:  map[string]string{},
		threads:    map[string]*store.Thread{},
		messages:   map[string][]*store.Message{},
		messageIDs: map[string]bool{},
		outcomes:   map[string]bool{},
		chains:     map[string][]*store.AuditEvent{},
		chained:    map[int64]*store.AuditEvent{},
		checkpts:   map[string][]*store.Checkpoint{},
	}
}

func key(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return string(b)
}

func (s *Store) clock() time.Time { return s.now().UTC() }

// lock takes the mutex after checking ctx, so a cancelled caller does no work.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("memstore: closed")
	}
	return nil
}

func (s *Store) get(tenant, id string) (*store.Proposal, error) {
	p, ok := s.proposals[id]
	if !ok || p.Tenant != tenant {
		return nil, fmt.Errorf("proposal %s: %w", id, store.ErrNotFound)
	}
	return p, nil
}

// apply persists a change made to p (already mutated in place) with its side
// effects. It is the in-memory counterpart of a driver's transaction.
func (s *Store) apply(p *store.Proposal, c *store.Change, now time.Time) {
	if c == nil {
		return
	}
	for _, e := range c.Events {
		e := e
		e.ID = int64(len(s.events) + 1)
		e.Tenant = p.Tenant
		e.ProposalID = p.ID
		e.Status = p.Status
		e.At = now
		s.events = append(s.events, &e)
		s.announce(&e)
	}
	if m := c.Admit; m != nil {
		// Once per proposal and outcome status, keyed apart from the
		// message's id, and only into a thread that still exists.
		tk := key(m.Tenant, m.ThreadID)
		settled := key(m.Tenant, m.ProposalID, string(m.Outcome.Status))
		if _, live := s.threads[tk]; live && !s.outcomes[settled] {
			s.outcomes[settled] = true
			s.messageIDs[key(m.Tenant, m.ThreadID, m.ID)] = true
			s.messages[tk] = append(s.messages[tk], m.Clone())
		}
	}
	if g := c.Grant; g != nil {
		s.nextGrant++
		gc := *g.Clone()
		if gc.ID == "" {
			gc.ID = fmt.Sprintf("grt_mem%08d", s.nextGrant)
		}
		gc.Tenant = p.Tenant
		gc.OriginProposalID = p.ID
		gc.CreatedAt = now
		gc.ActivatedAt = nil
		s.grants = append(s.grants, &gc)
	}
	if c.ActivateGrants {
		for _, g := range s.grants {
			if g.OriginProposalID == p.ID && g.ActivatedAt == nil {
				t := now
				g.ActivatedAt = &t
			}
		}
	}
}

// mutate runs one guarded transition on a working copy of the stored row. The
// copy replaces the row only when the transition produced a change, so an
// error leaves the stored row untouched.
func (s *Store) mutate(ctx context.Context, tenant, id string, fn func(p *store.Proposal, now time.Time) (*store.Change, error)) (*store.Proposal, store.Status, bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, "", false, err
	}
	defer s.mu.Unlock()
	cur, err := s.get(tenant, id)
	if err != nil {
		return nil, "", false, err
	}
	now := s.clock()
	w := cur.Clone()
	from := w.Status
	c, ferr := fn(w, now)
	if c != nil {
		store.Finish(w, now)
		s.apply(w, c, now)
		s.replace(w)
	}
	return w.Clone(), from, c != nil, ferr
}

func (s *Store) replace(p *store.Proposal) {
	s.proposals[p.ID] = p
	for i, q := range s.order {
		if q.ID == p.ID {
			s.order[i] = p
			return
		}
	}
}

// CreateProposal implements store.Store.
func (s *Store) CreateProposal(ctx context.Context, params *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	if err := store.ValidateCreateParams(params); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	n := params.Proposal.Clone()
	tk := key(n.Tenant, n.ThreadID)
	if t, ok := s.threads[tk]; ok && t.Owner != n.Requester {
		return nil, fmt.Errorf("memstore: create proposal in thread %s: %w", n.ThreadID, store.ErrNotThreadOwner)
	}
	if id, ok := s.byToolCall[key(n.Tenant, n.ThreadID, n.ToolCallID)]; ok {
		return &store.CreateProposalResult{Proposal: s.proposals[id].Clone()}, nil
	}
	if _, ok := s.proposals[n.ID]; ok {
		return nil, fmt.Errorf("memstore: create proposal: %w: id %s exists", store.ErrInvalidParams, n.ID)
	}
	if _, ok := s.byConfirm[key(n.Tenant, n.ConfirmationID)]; ok && n.ConfirmationID != "" {
		return nil, fmt.Errorf("memstore: create proposal: %w: confirmation id exists", store.ErrInvalidParams)
	}
	now := s.clock()
	if params.GrantID != "" {
		if g := s.grant(n.Tenant, params.GrantID); g == nil || !store.GrantApproves(g, n, now) {
			return nil, fmt.Errorf("memstore: create proposal approved by grant %s: %w", params.GrantID, store.ErrGrantNotLive)
		}
	}
	c := store.PrepareCreate(n, params, now)
	res := &store.CreateProposalResult{Created: true}
	for _, p := range s.order {
		if store.Supersedes(n, p) {
			w := p.Clone()
			c := store.ApplySupersede(w, n.ID, now)
			store.Finish(w, now)
			s.apply(w, c, now)
			s.replace(w)
			res.Superseded = append(res.Superseded, w.Clone())
		}
	}
	if _, ok := s.threads[tk]; !ok {
		s.threads[tk] = &store.Thread{Tenant: n.Tenant, ID: n.ThreadID, Owner: n.Requester, CreatedAt: now}
	}
	s.apply(n, c, now)
	s.proposals[n.ID] = n
	s.order = append(s.order, n)
	s.byToolCall[key(n.Tenant, n.ThreadID, n.ToolCallID)] = n.ID
	if n.ConfirmationID != "" {
		s.byConfirm[key(n.Tenant, n.ConfirmationID)] = n.ID
	}
	res.Proposal = n.Clone()
	return res, nil
}

// GetProposal implements store.Store.
func (s *Store) GetProposal(ctx context.Context, params *store.GetProposalParams) (*store.Proposal, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	p, err := s.get(params.Tenant, params.ID)
	if err != nil {
		return nil, err
	}
	return p.Clone(), nil
}

// GetProposalByToolCall implements store.Store.
func (s *Store) GetProposalByToolCall(ctx context.Context, params *store.GetProposalByToolCallParams) (*store.Proposal, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	id, ok := s.byToolCall[key(params.Tenant, params.ThreadID, params.ToolCallID)]
	if !ok {
		return nil, fmt.Errorf("tool call %s: %w", params.ToolCallID, store.ErrNotFound)
	}
	return s.proposals[id].Clone(), nil
}

// GetProposalByConfirmation implements store.Store.
func (s *Store) GetProposalByConfirmation(ctx context.Context, params *store.GetProposalByConfirmationParams) (*store.Proposal, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	id, ok := s.byConfirm[key(params.Tenant, params.ConfirmationID)]
	if !ok || params.ConfirmationID == "" {
		return nil, fmt.Errorf("confirmation: %w", store.ErrNotFound)
	}
	return s.proposals[id].Clone(), nil
}

// ListProposals implements store.Store.
func (s *Store) ListProposals(ctx context.Context, params *store.ListProposalsParams) (*store.ProposalPage, error) {
	limit := params.Limit
	if limit < 0 || limit > store.MaxPageSize {
		return nil, fmt.Errorf("memstore: list proposals: %w: limit %d", store.ErrInvalidParams, limit)
	}
	if limit == 0 {
		limit = store.MaxPageSize
	}
	var after *cursor.Position
	if params.After != "" {
		pos, err := s.cursor.Decode(params.After)
		if err != nil {
			return nil, fmt.Errorf("memstore: list proposals: %w", store.ErrInvalidCursor)
		}
		after = &pos
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var rows []*store.Proposal
	for _, p := range s.order {
		if p.Tenant != params.Tenant ||
			(len(params.Statuses) > 0 && !slices.Contains(params.Statuses, p.Status)) ||
			(params.Action != "" && p.Action != params.Action) ||
			(params.ThreadID != "" && p.ThreadID != params.ThreadID) {
			continue
		}
		if after != nil && !olderThan(p, *after) {
			continue
		}
		if !store.CanSee(p, params.Visible) {
			continue
		}
		rows = append(rows, p)
	}
	slices.SortFunc(rows, func(a, b *store.Proposal) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	page := &store.ProposalPage{}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[limit-1]
		page.Next = s.cursor.Encode(cursor.Position{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	for _, p := range rows {
		page.Proposals = append(page.Proposals, p.Clone())
	}
	return page, nil
}

// olderThan reports whether p sorts after pos in newest-first order.
func olderThan(p *store.Proposal, pos cursor.Position) bool {
	if c := p.CreatedAt.Compare(pos.CreatedAt); c != 0 {
		return c < 0
	}
	return p.ID < pos.ID
}

// Decide implements store.Store.
func (s *Store) Decide(ctx context.Context, params *store.DecideParams) (*store.DecideResult, error) {
	var out store.DecideOutcome
	p, from, _, err := s.mutate(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		var c *store.Change
		var err error
		out, c, err = store.ApplyDecision(p, params, now)
		return c, err
	})
	if err != nil {
		return nil, err
	}
	return &store.DecideResult{Outcome: out, Proposal: p, From: from, To: p.Status}, nil
}

func (s *Store) transition(ctx context.Context, tenant, id string, fn func(p *store.Proposal, now time.Time) (*store.Change, error)) (*store.TransitionResult, error) {
	p, from, changed, err := s.mutate(ctx, tenant, id, fn)
	if p == nil {
		return nil, err
	}
	return &store.TransitionResult{Proposal: p, From: from, Changed: changed}, err
}

// Cancel implements store.Store.
func (s *Store) Cancel(ctx context.Context, params *store.CancelParams) (*store.TransitionResult, error) {
	return s.transition(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyCancel(p, params, now)
	})
}

// Expire implements store.Store.
func (s *Store) Expire(ctx context.Context, params *store.ExpireParams) (*store.TransitionResult, error) {
	return s.transition(ctx, params.Tenant, params.ID, store.ApplyExpire)
}

// ExpireDue implements store.Store.
func (s *Store) ExpireDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "expire due", params, store.Due, func(p *store.Proposal) time.Time { return p.ExpiresAt },
		func(p *store.Proposal, now time.Time) (*store.Change, error) { return store.ApplyExpire(p, now) })
}

// EscalateDue implements store.Store.
func (s *Store) EscalateDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "escalate due", params, store.Escalatable, func(p *store.Proposal) time.Time { return *p.EscalateAt },
		store.ApplyEscalate)
}

// RemindDue implements store.Store.
func (s *Store) RemindDue(ctx context.Context, params *store.ExpireDueParams) ([]*store.Proposal, error) {
	return s.sweepDue(ctx, "remind due", params, store.Remindable, func(p *store.Proposal) time.Time { return *p.RemindAt },
		store.ApplyRemind)
}

// sweepDue applies apply to up to params.Limit proposals that are due by
// now, the one due longest first.
func (s *Store) sweepDue(ctx context.Context, op string, params *store.ExpireDueParams, due func(*store.Proposal, time.Time) bool,
	dueAt func(*store.Proposal) time.Time, apply func(*store.Proposal, time.Time) (*store.Change, error)) ([]*store.Proposal, error) {
	if params.Limit <= 0 {
		return nil, fmt.Errorf("memstore: %s: %w: limit %d", op, store.ErrInvalidParams, params.Limit)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	var ready []*store.Proposal
	for _, p := range s.order {
		if due(p, now) {
			ready = append(ready, p)
		}
	}
	slices.SortStableFunc(ready, func(a, b *store.Proposal) int { return dueAt(a).Compare(dueAt(b)) })
	var out []*store.Proposal
	for _, p := range ready[:min(len(ready), params.Limit)] {
		w := p.Clone()
		c, err := apply(w, now)
		if err != nil || c == nil {
			continue
		}
		store.Finish(w, now)
		s.apply(w, c, now)
		s.replace(w)
		out = append(out, w.Clone())
	}
	return out, nil
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, params *store.ClaimParams) (*store.Proposal, error) {
	p, _, changed, err := s.mutate(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyClaim(p, params, now)
	})
	if err != nil {
		if changed && p.Status == store.StatusExpired {
			return p, err
		}
		return nil, err
	}
	return p, nil
}

// ClaimBatch implements store.Store.
func (s *Store) ClaimBatch(ctx context.Context, params *store.ClaimBatchParams) ([]*store.Claimed, error) {
	if params.Limit <= 0 || params.LeaseDuration <= 0 {
		return nil, fmt.Errorf("memstore: claim batch: %w: limit and lease must be positive", store.ErrInvalidParams)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	var cands []*store.Proposal
	for _, p := range s.order {
		if store.Claimable(p, now) {
			cands = append(cands, p)
		}
	}
	// Claim order: the row that has waited longest since its last change.
	slices.SortStableFunc(cands, func(a, b *store.Proposal) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	var out []*store.Claimed
	for _, p := range cands {
		if len(out) == params.Limit {
			break
		}
		w := p.Clone()
		cl, c := store.ApplyClaimBatch(w, params, now)
		store.Finish(w, now)
		s.apply(w, c, now)
		s.replace(w)
		cl.Proposal = w.Clone()
		out = append(out, cl)
	}
	return out, nil
}

// RenewLease implements store.Store.
func (s *Store) RenewLease(ctx context.Context, params *store.RenewLeaseParams) (*store.Lease, error) {
	p, _, _, err := s.mutate(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyRenew(p, params, now)
	})
	if err != nil {
		return nil, err
	}
	l := *p.Lease
	return &l, nil
}

// BeginRetry implements store.Store.
func (s *Store) BeginRetry(ctx context.Context, params *store.BeginRetryParams) (*store.Proposal, error) {
	p, _, _, err := s.mutate(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyBeginRetry(p, params, now)
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Settle implements store.Store.
func (s *Store) Settle(ctx context.Context, params *store.SettleParams) (*store.TransitionResult, error) {
	return s.transition(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplySettle(p, params, now)
	})
}

// Resolve implements store.Store.
func (s *Store) Resolve(ctx context.Context, params *store.ResolveParams) (*store.TransitionResult, error) {
	return s.transition(ctx, params.Tenant, params.ID, func(p *store.Proposal, now time.Time) (*store.Change, error) {
		return store.ApplyResolve(p, params, now)
	})
}

// grant returns the tenant's grant id, or nil.
func (s *Store) grant(tenant, id string) *store.Grant {
	for _, g := range s.grants {
		if g.ID == id && g.Tenant == tenant {
			return g
		}
	}
	return nil
}

// FindGrant implements store.Store.
func (s *Store) FindGrant(ctx context.Context, params *store.FindGrantParams) (*store.Grant, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if g := s.findGrant(params); g != nil {
		return g.Clone(), nil
	}
	return nil, fmt.Errorf("grant: %w", store.ErrNotFound)
}

// findGrant returns the newest live grant matching params, or nil. The
// caller holds the mutex.
func (s *Store) findGrant(params *store.FindGrantParams) *store.Grant {
	now := s.clock()
	for i := len(s.grants) - 1; i >= 0; i-- {
		g := s.grants[i]
		if g.Live(now) && store.GrantMatches(g, params) {
			return g
		}
	}
	return nil
}

// ListGrants implements store.Store.
func (s *Store) ListGrants(ctx context.Context, params *store.ListGrantsParams) ([]*store.Grant, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*store.Grant
	for i := len(s.grants) - 1; i >= 0; i-- {
		g := s.grants[i]
		if g.Tenant != params.Tenant ||
			(params.Requester != "" && g.Requester != params.Requester) ||
			(params.ThreadID != "" && g.ThreadID != params.ThreadID) {
			continue
		}
		out = append(out, g.Clone())
	}
	return out, nil
}

// RevokeGrant implements store.Store.
func (s *Store) RevokeGrant(ctx context.Context, params *store.RevokeGrantParams) (*store.Grant, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	g := s.grant(params.Tenant, params.ID)
	if g == nil {
		return nil, fmt.Errorf("grant %s: %w", params.ID, store.ErrNotFound)
	}
	if g.RevokedAt == nil {
		t := s.clock()
		g.RevokedAt = &t
		g.RevokedBy = params.Actor
	}
	return g.Clone(), nil
}

// EnsureThread implements store.Store.
func (s *Store) EnsureThread(ctx context.Context, params *store.EnsureThreadParams) (*store.Thread, error) {
	if params.Tenant == "" || params.ID == "" {
		return nil, fmt.Errorf("memstore: ensure thread: %w: tenant and id required", store.ErrInvalidParams)
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	tk := key(params.Tenant, params.ID)
	t, ok := s.threads[tk]
	if !ok {
		t = &store.Thread{Tenant: params.Tenant, ID: params.ID, Owner: params.Owner, CreatedAt: s.clock()}
		s.threads[tk] = t
	}
	tc := *t
	return &tc, nil
}

// GetThread implements store.Store.
func (s *Store) GetThread(ctx context.Context, params *store.GetThreadParams) (*store.Thread, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	t, ok := s.threads[key(params.Tenant, params.ID)]
	if !ok {
		return nil, fmt.Errorf("thread %s: %w", params.ID, store.ErrNotFound)
	}
	tc := *t
	return &tc, nil
}

// DeleteThread implements store.Store.
func (s *Store) DeleteThread(ctx context.Context, params *store.GetThreadParams) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	tk := key(params.Tenant, params.ID)
	if _, ok := s.threads[tk]; !ok {
		return fmt.Errorf("thread %s: %w", params.ID, store.ErrNotFound)
	}
	delete(s.threads, tk)
	// The thread's ids go with its messages: a thread made again under
	// the same id starts with none.
	for _, m := range s.messages[tk] {
		delete(s.messageIDs, key(m.Tenant, m.ThreadID, m.ID))
	}
	delete(s.messages, tk)
	for _, id := range s.threadRuns[tk] {
		delete(s.runs, id)
	}
	delete(s.threadRuns, tk)
	return nil
}

// ListMessages implements store.Store.
func (s *Store) ListMessages(ctx context.Context, params *store.ListMessagesParams) ([]*store.Message, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	tk := key(params.Tenant, params.ThreadID)
	if _, ok := s.threads[tk]; !ok {
		return nil, fmt.Errorf("thread %s: %w", params.ThreadID, store.ErrNotFound)
	}
	var out []*store.Message
	for _, m := range s.messages[tk] {
		out = append(out, m.Clone())
	}
	return out, nil
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, params *store.ListEventsParams) ([]*store.Event, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = 1000
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []*store.Event
	for _, e := range s.events {
		if e.ID <= params.AfterID || e.Tenant != params.Tenant ||
			(params.ProposalID != "" && e.ProposalID != params.ProposalID) {
			continue
		}
		ec := *e
		out = append(out, &ec)
		if len(out) == limit {
			break
		}
	}
	return out, nil
}

// LastEventID implements store.Store.
func (s *Store) LastEventID(ctx context.Context, params *store.LastEventIDParams) (int64, error) {
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	for i := len(s.events) - 1; i >= 0; i-- {
		if e := s.events[i]; e.Tenant == params.Tenant {
			return e.ID, nil
		}
	}
	return 0, nil
}

// Close implements store.Store. Later calls fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// SettleMany implements store.Store.
func (s *Store) SettleMany(ctx context.Context, params []*store.SettleParams) ([]*store.TransitionResult, []error, error) {
	if err := s.lock(ctx); err != nil {
		return nil, nil, err
	}
	defer s.mu.Unlock()
	now := s.clock()
	results := make([]*store.TransitionResult, len(params))
	errs := make([]error, len(params))
	for i, sp := range params {
		cur, err := s.get(sp.Tenant, sp.ID)
		if err != nil {
			errs[i] = err
			continue
		}
		w := cur.Clone()
		c, err := store.ApplySettle(w, sp, now)
		if err != nil {
			errs[i] = err
			results[i] = &store.TransitionResult{Proposal: cur.Clone(), From: cur.Status}
			continue
		}
		store.Finish(w, now)
		s.apply(w, c, now)
		s.replace(w)
		results[i] = &store.TransitionResult{Proposal: w.Clone(), From: cur.Status, Changed: true}
	}
	return results, errs, nil
}

// ProposalTenant implements store.Store.
func (s *Store) ProposalTenant(ctx context.Context, id string) (string, error) {
	if err := s.lock(ctx); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	p, ok := s.proposals[id]
	if !ok {
		return "", fmt.Errorf("proposal %s: %w", id, store.ErrNotFound)
	}
	return p.Tenant, nil
}

// CountByStatus implements store.Store.
func (s *Store) CountByStatus(ctx context.Context) (map[store.Status]int, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := map[store.Status]int{}
	for _, p := range s.order {
		out[p.Status]++
	}
	return out, nil
}
