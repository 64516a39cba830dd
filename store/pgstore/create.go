package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// This file holds CreateProposal: one pipelined batch, one round trip (two
// for a creation that inserts nothing: a replay, a refusal), run by
// PostgreSQL as one implicit transaction (pgx sends the batch with a
// single Sync). Each statement of the batch takes a snapshot of its own, so
// each sees what concurrent transactions committed while the statement
// before it waited on them:
//
//  1. the thread: INSERT … ON CONFLICT DO NOTHING, which waits for a
//     concurrent creation of the same thread;
//  2. with a grant id, the grant, read FOR SHARE: a revocation (an UPDATE
//     of the row) waits for this creation to commit, or this read waits for
//     the revocation;
//  3. the proposal and its events, inserted only when the thread is the
//     requester's and, with a grant id, the grant is live and matches the
//     call; ON CONFLICT on the tool call waits for a concurrent insert of
//     the same tool call and then inserts nothing (a replay);
//  4. with a replacement key, the replacement's advisory lock, then the
//     supersession of the pending proposals with the same key, which now
//     sees every creation with that key committed before the lock was
//     granted: concurrent creations take turns, and exactly one pending
//     proposal remains;
//  5. only when it inserted nothing, in a second round trip, what it needs
//     to say why: the thread's owner, and the tool call's record (which a
//     concurrent creation committed while the insert waited on it).

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

// errCreateAgain asks CreateProposal to run its batch again: the thread
// went between two of its statements.
var errCreateAgain = errors.New("thread deleted during the creation")

// CreateProposal implements store.Store; see the top of this file.
func (s *Store) CreateProposal(ctx context.Context, params *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	if err := store.ValidateCreateParams(params); err != nil {
		return nil, wrap("create proposal", err)
	}
	var err error
	for range maxCASAttempts {
		var res *store.CreateProposalResult
		res, err = s.createOnce(ctx, params)
		if errors.Is(err, errCreateAgain) || retryable(err) {
			continue
		}
		if err != nil {
			return nil, wrap("create proposal", err)
		}
		return res, nil
	}
	return nil, wrap("create proposal", err)
}

func (s *Store) createOnce(ctx context.Context, params *store.CreateProposalParams) (*store.CreateProposalResult, error) {
	now := s.clock()
	n := params.Proposal.Clone()
	c := store.PrepareCreate(n, params, now)
	normalize(n)
	vals, err := proposalValues(n)
	if err != nil {
		return nil, err
	}
	// An allowed execution's lease runs by the database's clock.
	var leaseMicros *int64
	if params.Allowed != nil {
		m := params.Allowed.LeaseDuration.Microseconds()
		leaseMicros = &m
	}
	work := n.Status == store.StatusApproved && n.Mode == store.ModeIndependent
	workNow := work && s.work.reserve()

	var (
		inserted   bool
		superseded []*store.Proposal
		owner      string
		existing   *store.Proposal
	)
	b := &pgx.Batch{}
	b.Queue(s.q.ensureThread, n.Tenant, n.ThreadID, n.Requester, now)
	if params.GrantID != "" {
		b.Queue(s.q.lockGrant, n.Tenant, params.GrantID)
	}
	insert, args := s.insertStatement(vals, leaseMicros, params.GrantID, c, queued(n.Status, n.Mode), open(n.Status, n.Mode), workNow)
	b.Queue(insert, args...).QueryRow(func(row pgx.Row) error {
		var exp *time.Time
		dest := []any{&exp}
		var sent int64
		if workNow {
			dest = append(dest, &sent)
		}
		err := row.Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // refused, or a replay: see the report below
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
	if n.ReplacementKey != "" {
		b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, s.replacementLock(n))
		args := s.supersedeArgs(n, now)
		b.Queue(s.q.supersede, args...).Query(func(rows pgx.Rows) error {
			var err error
			superseded, err = collectProposals(rows)
			return err
		})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if !inserted {
		// What a creation that inserted nothing needs to say why, read
		// after its transaction, which saw the same: the thread's owner, and
		// the tool call's record.
		r := &pgx.Batch{}
		r.Queue(s.q.getThread, n.Tenant, n.ThreadID).QueryRow(func(row pgx.Row) error {
			var run string
			var created time.Time
			if err := row.Scan(&owner, &run, &created); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return nil
		})
		r.Queue(s.q.getReplayed, n.Tenant, n.ThreadID, n.ToolCallID, n.ID).QueryRow(func(row pgx.Row) error {
			p, err := scanProposal(row)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			existing = p
			return err
		})
		if err := s.pool.SendBatch(ctx, r).Close(); err != nil {
			return nil, err
		}
	}

	if inserted {
		s.rows.Put(n)
		s.rows.PutAll(superseded)
		s.publish(superseded, work && !workNow)
		return &store.CreateProposalResult{Proposal: n, Created: true, Superseded: superseded}, nil
	}
	// Nothing was inserted: the checks in the order the contract gives them.
	switch {
	case owner == "":
		return nil, errCreateAgain
	case owner != n.Requester:
		return nil, fmt.Errorf("thread %s: %w", n.ThreadID, store.ErrNotThreadOwner)
	case existing != nil:
		s.rows.Put(existing)
		return &store.CreateProposalResult{Proposal: existing}, nil
	case params.GrantID != "":
		return nil, fmt.Errorf("approved by grant %s: %w", params.GrantID, store.ErrGrantNotLive)
	}
	return nil, fmt.Errorf("proposal %s: inserted nothing, for no reason the store knows", n.ID)
}

// insertStatement builds the statement that inserts the proposal whose
// column values are vals, with its creation events (c), when the thread is
// the requester's and, with a grant id, the grant approves the proposal
// (store.GrantApproves in SQL: TestGrantApprovesInSQL pins them together).
// A proposal created in one of the claim queue's statuses (queue) gets its
// queue row, one that may expire (opened) its open row (openproposals.go).
// It returns the lease expiry as stored, and the work
// notification's count when notify.
func (s *Store) insertStatement(vals []any, leaseMicros *int64, grantID string, c *store.Change, queue, opened, notify bool) (string, []any) {
	S := s.q.schema + "."
	q := &sqlArgs{args: vals}
	col := func(name string) string { return fmt.Sprintf("$%d", columnIndex(name)+1) }
	sel := make([]string, len(vals))
	for i := range vals {
		sel[i] = fmt.Sprintf("$%d", i+1)
	}
	micros := q.arg(leaseMicros, "bigint")
	sel[columnIndex("lease_expires_at")] = `CASE WHEN ` + micros + ` IS NULL THEN ` + col("lease_expires_at") + `::timestamptz
		ELSE statement_timestamp() + ` + micros + ` * interval '1 microsecond' END`
	q.w(`WITH ins AS (INSERT INTO `, S, `proposals (`, proposalColumns, `)
	SELECT `, strings.Join(sel, ", "), `
	WHERE EXISTS (SELECT 1 FROM `, S, `threads t WHERE t.tenant = `, col("tenant"), ` AND t.id = `, col("thread_id"),
		` AND t.owner = `, col("requester"), `)`)
	if grantID != "" {
		q.w(`
	AND EXISTS (SELECT 1 FROM `, S, `grants g WHERE g.tenant = `, col("tenant"), ` AND g.id = `, q.arg(grantID, "text"), `
		AND g.requester = `, col("requester"), ` AND g.action = `, col("action"), ` AND g.action_version = `, col("action_version"), `
		AND g.thread_id = `, col("thread_id"), ` AND g.rule_fingerprint = `, col("rule_fingerprint"), `
		AND (g.input_digest = '' OR g.input_digest = `, col("input_digest"), `)
		AND (g.scope = 'thread' OR (g.scope = 'run' AND g.run_id = `, col("run_id"), `))
		AND g.activated_at IS NOT NULL AND g.revoked_at IS NULL
		AND (g.expires_at IS NULL OR g.expires_at > `, col("created_at"), `))`)
	}
	q.w(`
	ON CONFLICT (tenant, thread_id, tool_call_id) DO NOTHING
	RETURNING id, tenant, status, lease_expires_at, next_attempt_at, updated_at)`)
	if len(c.Events) > 0 {
		var types, actors, kinds, vias, details []string
		for _, e := range c.Events {
			types, actors, kinds = append(types, string(e.Type)), append(actors, e.Actor), append(kinds, e.ActorKind)
			vias, details = append(vias, e.Via), append(details, e.Detail)
		}
		q.w(`,
ev AS (INSERT INTO `, S, `events (tenant, proposal_id, type, actor, actor_kind, via, status, detail, at)
	SELECT ins.tenant, ins.id, e.type, e.actor, e.actor_kind, e.via, ins.status, e.detail, `, col("created_at"), `
	FROM ins, unnest(`, q.arg(types, "text[]"), `, `, q.arg(actors, "text[]"), `, `, q.arg(kinds, "text[]"), `, `, q.arg(vias, "text[]"), `, `,
			q.arg(details, "text[]"), `) WITH ORDINALITY AS e(type, actor, actor_kind, via, detail, n)
	ORDER BY e.n)`)
	}
	if queue {
		q.w(`,
cq AS (INSERT INTO `, S, `claim_queue (`, claimQueueColumns, `) SELECT `, claimQueueColumns, ` FROM ins)`)
	}
	if opened {
		q.w(`,
op AS (INSERT INTO `, S, `open_proposals (`, openColumns, `)
	SELECT ins.id, ins.tenant, `, col("thread_id"), `, `, col("requester"), `, `, col("action"), `, `, col("replacement_key"), `, `,
			col("created_at"), `, `, col("expires_at"), `, ins.status = 'pending', `,
			col("escalate_at"), `, `, col("remind_at"), `, `, col("remind_every"), ` FROM ins)`)
	}
	notifyCol := ""
	if notify {
		q.w(`,
nt AS (SELECT pg_notify(`, q.arg(s.channel, "text"), `, `, q.arg(payloadWork, "text"), `) FROM ins)`)
		notifyCol = `, (SELECT count(*) FROM nt)`
	}
	q.w(`
SELECT lease_expires_at`, notifyCol, ` FROM ins`)
	return q.b.String(), q.args
}

// columnIndex is the position of a column in proposalColumns.
func columnIndex(name string) int {
	for i, c := range columnList() {
		if c == name {
			return i
		}
	}
	panic("pgstore: no proposal column " + name)
}

// supersedeSQL is store.Supersedes and store.ApplySupersede in SQL
// (TestSupersedeInSQL pins them together): the pending proposals of the
// same tenant, thread, requester, action and replacement key as the new one
// ($6), oldest first, locked, become superseded: no lease, no next attempt,
// the outcome $7 (the proposal id filled in), one more version, updated at
// $8; each gets its event ($9 type, $10 status, $11 detail) and its outcome
// message ($12 text, an id of 122 random bits: store.NewMessageID's kind,
// made by the database, which alone knows how many it supersedes), once, if
// its thread still exists. It supersedes only
// when the new proposal was inserted by this transaction. It returns the
// superseded rows as they now stand.
const supersedeSQL = `WITH old AS (
	SELECT p.id FROM _S_.open_proposals o JOIN _S_.proposals p ON p.id = o.id
	WHERE o.tenant = $1 AND o.thread_id = $2 AND o.requester = $3 AND o.action = $4 AND o.replacement_key = $5
	AND o.undecided AND o.replacement_key <> '' AND o.id <> $6 AND p.status = 'pending'
	AND EXISTS (SELECT 1 FROM _S_.proposals n WHERE n.id = $6 AND n.tenant = $1)
	ORDER BY p.created_at, p.id
	FOR UPDATE OF p
), sup AS (
	UPDATE _S_.proposals p SET status = $10,
		outcome = jsonb_set($7::jsonb, '{proposal_id}', to_jsonb(p.id::text)),
		lease_owner = NULL, lease_token = NULL, lease_generation = NULL, lease_expires_at = NULL,
		next_attempt_at = NULL, version = p.version + 1, updated_at = $8
	FROM old WHERE p.id = old.id
	RETURNING PCOLS
), ev AS (
	INSERT INTO _S_.events (tenant, proposal_id, type, actor, via, status, detail, at)
	SELECT tenant, id, $9, '', '', status, $11, $8 FROM sup ORDER BY created_at, id
), msg AS (
	INSERT INTO _S_.messages (id, tenant, thread_id, role, text, proposal_id, outcome, created_at, outcome_status)
	SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), t.tenant, t.id, 'assistant', $12, sup.id, sup.outcome, $8, sup.status
	FROM sup JOIN _S_.threads t ON t.tenant = sup.tenant AND t.id = sup.thread_id
	ORDER BY sup.created_at, sup.id
	FOR KEY SHARE OF t
	ON CONFLICT (tenant, proposal_id, outcome_status) WHERE outcome_status <> '' DO NOTHING
), opd AS (
	DELETE FROM _S_.open_proposals o USING sup WHERE o.id = sup.id
), rdy AS (
	UPDATE _S_.runs r SET ready = true FROM sup
	WHERE r.awaiting = sup.id AND r.tenant = sup.tenant AND r.status = 'parked' AND NOT r.ready
)
SELECT ` + proposalColumns + ` FROM sup ORDER BY created_at, id`

// supersedeArgs are supersedeSQL's parameters for the creation of n at now:
// what store.ApplySupersede makes of any proposal n replaces.
func (s *Store) supersedeArgs(n *store.Proposal, now time.Time) []any {
	// The rule applied to a stand-in for the superseded proposal: its id is
	// filled in by the statement.
	w := &store.Proposal{ID: "", Tenant: n.Tenant, ThreadID: n.ThreadID, Action: n.Action, Status: store.StatusPending}
	c := store.ApplySupersede(w, n.ID, now)
	outcome, _ := encodeOutcome(w.Outcome) // a time of now always encodes
	e := c.Events[0]
	return []any{n.Tenant, n.ThreadID, n.Requester, n.Action, n.ReplacementKey, n.ID,
		string(outcome), now, string(e.Type), string(w.Status), e.Detail, c.Admit.Text}
}
