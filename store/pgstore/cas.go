package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/store"
)

// This file holds the one way the store changes a proposal that exists: a
// compare-and-set write. The rules of store/transition.go are applied, in
// Go, to the row as last read (or remembered, see internal/rowmemory); the write
// sends the columns the rule changed, guarded by the version the row was
// read at, together with the transition's events, its outcome message, the
// grant it stores and the grants it activates, as one statement. So a
// transition is one round trip and one implicit transaction, and no lock is
// held while the network or the Go side works. A row that moved since it was
// read is not written, nor are its side rows: the caller reads it again and
// applies the rule to what it finds.
//
// One statement writes any number of rows (SettleMany and ExpireDue write
// their groups with it), each guarded by its own version, as parallel arrays
// unnested on the server.

// mutable names the columns a transition may change. version and updated_at
// change with every write and are always sent. TestRulesChangeOnlyMutableColumns
// pins that no rule changes any other column.
type mutable uint16

const (
	colStatus mutable = 1 << iota
	colDecisions
	colAttempt
	colLeaseOwner
	colLeaseToken
	colLeaseGeneration
	colLeaseExpiresAt
	colConsumedBy
	colNextAttemptAt
	colOutcome
	colApprovers
	colEscalateAt
	colRemindAt

	allMutable = colRemindAt<<1 - 1
)

// mutableColumns are the mutable columns in bit order: the column, the type
// of its array parameter, and the value it is set to from the unnested row v.
var mutableColumns = []struct {
	bit         mutable
	name, array string
	set         string
}{
	{colStatus, "status", "text[]", "v.status"},
	{colDecisions, "decisions", "text[]", "v.decisions::jsonb"},
	{colAttempt, "attempt", "bigint[]", "v.attempt"},
	{colLeaseOwner, "lease_owner", "text[]", "v.lease_owner"},
	{colLeaseToken, "lease_token", "text[]", "v.lease_token"},
	{colLeaseGeneration, "lease_generation", "bigint[]", "v.lease_generation"},
	// A lease a transition writes with a duration runs on the database's
	// clock (see the package documentation): its expiry is taken from
	// statement_timestamp() instead of the application's value.
	{colLeaseExpiresAt, "lease_expires_at", "timestamptz[]",
		"CASE WHEN v.lease_micros IS NULL THEN v.lease_expires_at ELSE statement_timestamp() + v.lease_micros * interval '1 microsecond' END"},
	{colConsumedBy, "consumed_by", "text[]", "v.consumed_by"},
	{colNextAttemptAt, "next_attempt_at", "timestamptz[]", "v.next_attempt_at"},
	{colOutcome, "outcome", "text[]", "v.outcome::jsonb"},
	// An escalation adds approvers: a row's list travels as JSON text,
	// since unnest would flatten an array of arrays.
	{colApprovers, "approvers", "text[]", "ARRAY(SELECT jsonb_array_elements_text(v.approvers::jsonb))"},
	{colEscalateAt, "escalate_at", "timestamptz[]", "v.escalate_at"},
	{colRemindAt, "remind_at", "timestamptz[]", "v.remind_at"},
}

// mutableValues are a row's mutable columns as they are stored.
type mutableValues struct {
	status               string
	decisions, outcome   *string // JSON text
	attempt              int64
	leaseOwner, leaseTok *string
	leaseGen             *int64
	leaseExp             *time.Time
	consumedBy           string
	next                 *time.Time
	approvers            string // JSON
	escalateAt, remindAt *time.Time
}

func valuesOf(p *store.Proposal) (mutableValues, error) {
	v := mutableValues{status: string(p.Status), attempt: int64(p.Attempt), consumedBy: p.ConsumedBy}
	d, err := encodeDecisions(p.Decisions)
	if err != nil {
		return v, fmt.Errorf("encode proposal %s: decisions: %w", p.ID, err)
	}
	v.decisions = textPtr(d)
	o, err := encodeOutcome(p.Outcome)
	if err != nil {
		return v, fmt.Errorf("encode proposal %s: outcome: %w", p.ID, err)
	}
	v.outcome = textPtr(o)
	if l := p.Lease; l != nil {
		owner, tok, gen, exp := l.Owner, l.Token, l.Generation, dbTime(l.ExpiresAt)
		v.leaseOwner, v.leaseTok, v.leaseGen, v.leaseExp = &owner, &tok, &gen, &exp
	}
	v.next = dbTimePtr(p.NextAttemptAt)
	approvers, err := json.Marshal(nonNilStrings(p.Approvers))
	if err != nil {
		return v, fmt.Errorf("encode proposal %s: approvers: %w", p.ID, err)
	}
	v.approvers = string(approvers)
	v.escalateAt, v.remindAt = dbTimePtr(p.EscalateAt), dbTimePtr(p.RemindAt)
	return v, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func textPtr(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func eqTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// changed returns the columns in which a and b differ.
func (a *mutableValues) changed(b *mutableValues) mutable {
	var m mutable
	set := func(bit mutable, differ bool) {
		if differ {
			m |= bit
		}
	}
	set(colStatus, a.status != b.status)
	set(colDecisions, !eqPtr(a.decisions, b.decisions))
	set(colAttempt, a.attempt != b.attempt)
	set(colLeaseOwner, !eqPtr(a.leaseOwner, b.leaseOwner))
	set(colLeaseToken, !eqPtr(a.leaseTok, b.leaseTok))
	set(colLeaseGeneration, !eqPtr(a.leaseGen, b.leaseGen))
	set(colLeaseExpiresAt, !eqTime(a.leaseExp, b.leaseExp))
	set(colConsumedBy, a.consumedBy != b.consumedBy)
	set(colNextAttemptAt, !eqTime(a.next, b.next))
	set(colOutcome, !eqPtr(a.outcome, b.outcome))
	set(colApprovers, a.approvers != b.approvers)
	set(colEscalateAt, !eqTime(a.escalateAt, b.escalateAt))
	set(colRemindAt, !eqTime(a.remindAt, b.remindAt))
	return m
}

// rowWrite is one transition to write: p as the rule left it (finished and
// normalized, so updated at the transition's time), guarded by the version
// old it was read at.
type rowWrite struct {
	p    *store.Proposal
	from store.Status
	old  int64
	// oldAt is the row's updated_at before the write: with its id, the key
	// of its claim queue row.
	oldAt time.Time
	cols  mutable
	vals  mutableValues
	// leaseMicros, when set, is the duration of the lease the transition
	// wrote, to run on the database's clock.
	leaseMicros *int64
	c           *store.Change
	// evSeq, when set, orders c's events among the events of the other rows
	// written with it (a group's item numbers); by default they follow the
	// order of the rows as given. evStatus, when set, is the status each
	// event records (the row's after the transition that made it, when
	// several transitions of one row are written as one); by default the
	// row's.
	evSeq    []int
	evStatus []store.Status
}

// newRowWrite prepares the write of w, which a rule changed (c) from cur;
// w is finished (store.Finish) and normalized. lease, when positive, is the
// duration of a lease the transition writes.
func newRowWrite(cur, w *store.Proposal, c *store.Change, lease time.Duration) (*rowWrite, error) {
	before, err := valuesOf(cur)
	if err != nil {
		return nil, err
	}
	after, err := valuesOf(w)
	if err != nil {
		return nil, err
	}
	rw := &rowWrite{p: w, from: cur.Status, old: cur.Version, oldAt: cur.UpdatedAt, vals: after, c: c}
	rw.cols = before.changed(&after)
	if lease > 0 && w.Lease != nil {
		m := lease.Microseconds()
		rw.leaseMicros = &m
		rw.cols |= colLeaseExpiresAt
	}
	if c.Grant != nil && c.Grant.ID == "" {
		g := c.Grant.Clone()
		g.ID = "grt_" + store.NewToken()
		c.Grant = g
	}
	return rw, nil
}

// sqlArgs builds a statement's text and its arguments together, so that
// they cannot disagree.
type sqlArgs struct {
	b    strings.Builder
	args []any
}

// arg adds a parameter and returns its placeholder, cast to typ when set.
func (q *sqlArgs) arg(v any, typ string) string {
	q.args = append(q.args, v)
	if typ == "" {
		return fmt.Sprintf("$%d", len(q.args))
	}
	return fmt.Sprintf("$%d::%s", len(q.args), typ)
}

func (q *sqlArgs) w(parts ...string) {
	for _, p := range parts {
		q.b.WriteString(p)
	}
}

// column gathers one field of every row into a parameter array.
func column[T any](ws []*rowWrite, f func(*rowWrite) T) []T {
	out := make([]T, len(ws))
	for i, w := range ws {
		out[i] = f(w)
	}
	return out
}

// casStatement builds the statement that writes ws at now. The rows are
// locked in id order, so that two statements writing overlapping groups
// never wait for each other in a cycle; the side rows are written in the
// order of ws (events by evSeq where set). work lists the rows whose write
// makes claimable work: when set, the statement sends the work notification
// in the same transaction. It returns the rows written: id, and the lease
// expiry as stored.
//
// Each row has its own time, its transition's (p.UpdatedAt), which its
// events, the grant it stores and the grants it activates take too: the
// rows of one statement may come from different callers (see casgroup.go).
func (s *Store) casStatement(given []*rowWrite, work []string) (string, []any) {
	ws := slices.Clone(given)
	slices.SortFunc(ws, func(a, b *rowWrite) int { return strings.Compare(a.p.ID, b.p.ID) })
	var cols mutable
	for _, w := range ws {
		cols |= w.cols
	}
	q := &sqlArgs{}
	S := s.q.schema + "."

	// The rows: key, guard, new version, then the changed columns.
	q.w(`WITH v AS (SELECT * FROM unnest(`,
		q.arg(column(ws, func(w *rowWrite) string { return w.p.Tenant }), "text[]"), `, `,
		q.arg(column(ws, func(w *rowWrite) string { return w.p.ID }), "text[]"), `, `,
		q.arg(column(ws, func(w *rowWrite) int64 { return w.old }), "bigint[]"), `, `,
		q.arg(column(ws, func(w *rowWrite) int64 { return w.p.Version }), "bigint[]"), `, `,
		q.arg(column(ws, func(w *rowWrite) time.Time { return w.p.UpdatedAt }), "timestamptz[]"))
	names := []string{"tenant", "id", "old_version", "version", "updated_at"}
	for _, mc := range mutableColumns {
		if cols&mc.bit == 0 {
			continue
		}
		var a any
		switch mc.bit {
		case colStatus:
			a = column(ws, func(w *rowWrite) string { return w.vals.status })
		case colDecisions:
			a = column(ws, func(w *rowWrite) *string { return w.vals.decisions })
		case colAttempt:
			a = column(ws, func(w *rowWrite) int64 { return w.vals.attempt })
		case colLeaseOwner:
			a = column(ws, func(w *rowWrite) *string { return w.vals.leaseOwner })
		case colLeaseToken:
			a = column(ws, func(w *rowWrite) *string { return w.vals.leaseTok })
		case colLeaseGeneration:
			a = column(ws, func(w *rowWrite) *int64 { return w.vals.leaseGen })
		case colLeaseExpiresAt:
			a = column(ws, func(w *rowWrite) *time.Time { return w.vals.leaseExp })
		case colConsumedBy:
			a = column(ws, func(w *rowWrite) string { return w.vals.consumedBy })
		case colNextAttemptAt:
			a = column(ws, func(w *rowWrite) *time.Time { return w.vals.next })
		case colOutcome:
			a = column(ws, func(w *rowWrite) *string { return w.vals.outcome })
		case colApprovers:
			a = column(ws, func(w *rowWrite) string { return w.vals.approvers })
		case colEscalateAt:
			a = column(ws, func(w *rowWrite) *time.Time { return w.vals.escalateAt })
		case colRemindAt:
			a = column(ws, func(w *rowWrite) *time.Time { return w.vals.remindAt })
		}
		q.w(`, `, q.arg(a, mc.array))
		names = append(names, mc.name)
		if mc.bit == colLeaseExpiresAt {
			q.w(`, `, q.arg(column(ws, func(w *rowWrite) *int64 { return w.leaseMicros }), "bigint[]"))
			names = append(names, "lease_micros")
		}
	}
	q.w(`) AS v(`, strings.Join(names, ", "), `)),
upd AS (UPDATE `, S, `proposals p SET version = v.version, updated_at = v.updated_at`)
	for _, mc := range mutableColumns {
		if cols&mc.bit != 0 {
			q.w(`, `, mc.name, ` = `, mc.set)
		}
	}
	q.w(`
	FROM v WHERE p.id = v.id AND p.tenant = v.tenant AND p.version = v.old_version
	RETURNING p.id, p.tenant, p.status, p.lease_expires_at, p.next_attempt_at, p.updated_at, p.escalate_at, p.remind_at)`)

	// The side rows, each only for a row written.
	type event struct {
		seq    int
		w      *rowWrite
		e      store.Event
		status store.Status
	}
	var ev []event
	var msg, gr []*rowWrite
	var act []string
	for i, w := range given {
		for j, e := range w.c.Events {
			seq, status := i, w.p.Status
			if w.evSeq != nil {
				seq = w.evSeq[j]
			}
			if w.evStatus != nil {
				status = w.evStatus[j]
			}
			ev = append(ev, event{seq, w, e, status})
		}
		if w.c.Admit != nil {
			msg = append(msg, w)
		}
		if w.c.Grant != nil {
			gr = append(gr, w)
		}
		if w.c.ActivateGrants {
			act = append(act, w.p.ID)
		}
	}
	if len(ev) > 0 {
		slices.SortStableFunc(ev, func(a, b event) int { return a.seq - b.seq })
		var tenants, ids, types, actors, kinds, vias, statuses, details []string
		for _, x := range ev {
			w, e := x.w, x.e
			tenants, ids, types = append(tenants, w.p.Tenant), append(ids, w.p.ID), append(types, string(e.Type))
			actors, kinds = append(actors, e.Actor), append(kinds, e.ActorKind)
			vias, details = append(vias, e.Via), append(details, e.Detail)
			statuses = append(statuses, string(x.status))
		}
		q.w(`,
ev AS (INSERT INTO `, S, `events (tenant, proposal_id, type, actor, actor_kind, via, status, detail, at)
	SELECT e.tenant, e.proposal_id, e.type, e.actor, e.actor_kind, e.via, e.status, e.detail, upd.updated_at
	FROM unnest(`, q.arg(tenants, "text[]"), `, `, q.arg(ids, "text[]"), `, `, q.arg(types, "text[]"), `, `,
			q.arg(actors, "text[]"), `, `, q.arg(kinds, "text[]"), `, `, q.arg(vias, "text[]"), `, `, q.arg(statuses, "text[]"), `, `, q.arg(details, "text[]"), `)
		WITH ORDINALITY AS e(tenant, proposal_id, type, actor, actor_kind, via, status, detail, n)
	JOIN upd ON upd.id = e.proposal_id
	ORDER BY e.n)`)
	}
	if len(msg) > 0 {
		// An outcome is admitted once per proposal and outcome status (the
		// key messages_outcome, never the message id: that is the server's
		// own and unguessable, so no message a client posted can stand in
		// for it), and only into a thread that still exists: FOR KEY SHARE
		// waits for a concurrent DeleteThread, and if the thread goes,
		// nothing is admitted (rather than the foreign key failing the
		// transition).
		m := func(w *rowWrite) *store.Message { return w.c.Admit }
		q.w(`,
msg AS (INSERT INTO `, S, `messages (id, tenant, thread_id, role, text, proposal_id, outcome, created_at, outcome_status)
	SELECT m.id, t.tenant, t.id, m.role, m.text, m.proposal_id, m.outcome::jsonb, m.created_at, m.outcome_status
	FROM unnest(`,
			q.arg(column(msg, func(w *rowWrite) string { return m(w).ID }), "text[]"), `, `,
			q.arg(column(msg, func(w *rowWrite) string { return m(w).Tenant }), "text[]"), `, `,
			q.arg(column(msg, func(w *rowWrite) string { return m(w).ThreadID }), "text[]"), `, `,
			q.arg(column(msg, func(w *rowWrite) string { return m(w).Role }), "text[]"), `, `,
			q.arg(column(msg, func(w *rowWrite) string { return m(w).Text }), "text[]"), `, `,
			q.arg(column(msg, func(w *rowWrite) string { return m(w).ProposalID }), "text[]"), `, `,
			q.arg(column(msg, messageOutcome), "text[]"), `, `,
			q.arg(column(msg, func(w *rowWrite) time.Time { return dbTime(m(w).CreatedAt) }), "timestamptz[]"), `, `,
			q.arg(column(msg, func(w *rowWrite) string { return string(m(w).Outcome.Status) }), "text[]"), `)
		WITH ORDINALITY AS m(id, tenant, thread_id, role, text, proposal_id, outcome, created_at, outcome_status, n)
	JOIN `, S, `threads t ON t.tenant = m.tenant AND t.id = m.thread_id
	WHERE m.proposal_id IN (SELECT id FROM upd)
	ORDER BY m.n
	FOR KEY SHARE OF t
	ON CONFLICT (tenant, proposal_id, outcome_status) WHERE outcome_status <> '' DO NOTHING)`)
	}
	if len(gr) > 0 {
		g := func(w *rowWrite) *store.Grant { return w.c.Grant }
		q.w(`,
gr AS (INSERT INTO `, S, `grants (`, grantColumns, `)
	SELECT g.id, g.tenant, g.requester, g.scope, g.thread_id, g.run_id, g.action, g.action_version, g.input_digest,
		g.origin_proposal_id, g.granted_by, upd.updated_at, NULL, g.expires_at, g.revoked_at, g.revoked_by, g.rule_fingerprint
	FROM unnest(`,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).ID }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return w.p.Tenant }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).Requester }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return string(g(w).Scope) }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).ThreadID }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).RunID }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).Action }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).ActionVersion }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).InputDigest }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return w.p.ID }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).GrantedBy }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) *time.Time { return dbTimePtr(g(w).ExpiresAt) }), "timestamptz[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) *time.Time { return dbTimePtr(g(w).RevokedAt) }), "timestamptz[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).RevokedBy }), "text[]"), `, `,
			q.arg(column(gr, func(w *rowWrite) string { return g(w).RuleFingerprint }), "text[]"), `)
		AS g(id, tenant, requester, scope, thread_id, run_id, action, action_version, input_digest,
			origin_proposal_id, granted_by, expires_at, revoked_at, revoked_by, rule_fingerprint)
	JOIN upd ON upd.id = g.origin_proposal_id)`)
	}
	if len(act) > 0 {
		q.w(`,
act AS (UPDATE `, S, `grants g SET activated_at = upd.updated_at FROM upd
	WHERE g.origin_proposal_id = upd.id AND upd.id = ANY(`, q.arg(act, "text[]"), `) AND g.activated_at IS NULL)`)
	}
	claimQueueCTEs(q, S, ws)
	openCTEs(q, S, ws)
	// A proposal that leaves pending readies the runs parked on it
	// (runs.go, claimReady), in the transaction that moves it.
	var left []string
	for _, w := range given {
		if w.from == store.StatusPending && w.p.Status != store.StatusPending {
			left = append(left, w.p.ID)
		}
	}
	if len(left) > 0 {
		q.w(`,
rdy AS (UPDATE `, S, `runs r SET ready = true FROM upd
	WHERE upd.id = ANY(`, q.arg(left, "text[]"), `) AND r.awaiting = upd.id AND r.tenant = upd.tenant
	AND r.status = 'parked' AND NOT r.ready)`)
	}
	notify := ""
	if len(work) > 0 {
		q.w(`,
nt AS (SELECT pg_notify(`, q.arg(s.channel, "text"), `, `, q.arg(payloadWork, "text"), `) FROM upd
	WHERE upd.id = ANY(`, q.arg(work, "text[]"), `) LIMIT 1)`)
		notify = `, (SELECT count(*) FROM nt)`
	}
	q.w(`
SELECT upd.id, upd.lease_expires_at`, notify, ` FROM upd`)
	return q.b.String(), q.args
}

// messageOutcome is the JSON text of an admitted message's outcome.
func messageOutcome(w *rowWrite) *string {
	m := w.c.Admit
	// The message's outcome is the row's (store.settle clones it); encode
	// it again only if it is not.
	if sameOutcome(m.Outcome, w.p.Outcome) {
		return w.vals.outcome
	}
	b, err := encodeOutcome(m.Outcome)
	if err != nil {
		// encodeOutcome fails only on a time json cannot encode, which
		// the row's own encoding (valuesOf) would have refused first.
		return nil
	}
	return textPtr(b)
}

// maxCASAttempts bounds how often one transition is tried again because its
// row moved meanwhile. Every failed attempt means another writer succeeded,
// so the store as a whole always progresses; the bound stops one caller
// from trying forever under a storm of writes to one row.
const maxCASAttempts = 100

// writeRows writes ws at now, in one statement, and reports which rows were
// written; a row whose version moved since it was read is not, nor its side
// rows. Rows written are remembered, their lease expiry set as stored, and
// their notifications published once the statement committed.
func (s *Store) writeRows(ctx context.Context, ws []*rowWrite) ([]bool, error) {
	written := make([]bool, len(ws))
	if len(ws) == 0 {
		return written, nil
	}
	var work []string
	for _, w := range ws {
		if w.p.Status != w.from && w.p.Status == store.StatusApproved && w.p.Mode == store.ModeIndependent {
			work = append(work, w.p.ID)
		}
	}
	workNow := len(work) > 0 && s.work.reserve()
	var notified []string
	if workNow {
		notified = work
	}
	sql, args := s.casStatement(ws, notified)
	type result struct {
		exp  *time.Time
		sent int64
	}
	var got map[string]result
	var err error
	for range maxAttempts {
		got, err = func() (map[string]result, error) {
			rows, err := s.pool.Query(ctx, sql, args...)
			if err != nil {
				return nil, err
			}
			defer rows.Close()
			out := make(map[string]result, len(ws))
			for rows.Next() {
				var id string
				var r result
				dest := []any{&id, &r.exp}
				if workNow {
					dest = append(dest, &r.sent)
				}
				if err := rows.Scan(dest...); err != nil {
					return nil, err
				}
				out[id] = r
			}
			return out, rows.Err()
		}()
		if !retryable(err) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var changed []*store.Proposal
	workLater := false
	for i, w := range ws {
		r, ok := got[w.p.ID]
		if !ok {
			continue
		}
		written[i] = true
		if w.p.Lease != nil && r.exp != nil {
			w.p.Lease.ExpiresAt = r.exp.UTC()
		}
		if w.p.Status != w.from {
			changed = append(changed, w.p)
			if !workNow && slices.Contains(work, w.p.ID) {
				workLater = true
			}
		}
		s.rows.Put(w.p)
	}
	s.publish(changed, workLater)
	return written, nil
}
