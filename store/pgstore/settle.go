package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// This file holds SettleMany, the worker's group commit. A group's writes
// are set-based: one UPDATE of the settled rows, one INSERT of their events,
// one INSERT of their outcome messages and one UPDATE of the grants they
// activate, whatever the group's size, instead of three or four statements
// per proposal. Only the columns a settlement changes are sent
// (settledColumns); TestSettleChangesOnlySettledColumns pins that
// store.ApplySettle changes nothing else.

// settleRowsSQL writes the settled rows of a group, each guarded by the
// version it was read at. Parameters: ids, old versions, statuses, lease
// owners, tokens, generations and expiries, next attempts, outcomes (JSON
// text), new versions (parallel arrays, one element per row), and the
// update time. It returns the ids written.
const settleRowsSQL = `UPDATE _S_.proposals p SET
	status = v.status, lease_owner = v.lease_owner, lease_token = v.lease_token,
	lease_generation = v.lease_generation, lease_expires_at = v.lease_expires_at,
	next_attempt_at = v.next_attempt_at, outcome = v.outcome::jsonb, version = v.version, updated_at = $11
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::timestamptz[],
	$8::timestamptz[], $9::text[], $10::bigint[])
	AS v(id, old_version, status, lease_owner, lease_token, lease_generation, lease_expires_at, next_attempt_at, outcome, version)
WHERE p.id = v.id AND p.version = v.old_version
RETURNING p.id`

// insertEventsSQL appends the events of a group, in order. Parameters:
// tenants, proposal ids, types, actors, vias, statuses, details (parallel
// arrays), and the time.
const insertEventsSQL = `INSERT INTO _S_.events (tenant, proposal_id, type, actor, via, status, detail, at)
SELECT e.tenant, e.proposal_id, e.type, e.actor, e.via, e.status, e.detail, $8
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
	WITH ORDINALITY AS e(tenant, proposal_id, type, actor, via, status, detail, n)
ORDER BY e.n`

// admitMessagesSQL is admitMessage for a group, in order: each outcome is
// admitted once per message id, and only into a thread that still exists
// (FOR KEY SHARE waits for a concurrent DeleteThread). Parameters: ids,
// tenants, thread ids, roles, texts, proposal ids, outcomes (JSON text),
// times (parallel arrays).
const admitMessagesSQL = `INSERT INTO _S_.messages (id, tenant, thread_id, role, text, proposal_id, outcome, created_at)
SELECT m.id, t.tenant, t.id, m.role, m.text, m.proposal_id, m.outcome::jsonb, m.created_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[])
	WITH ORDINALITY AS m(id, tenant, thread_id, role, text, proposal_id, outcome, created_at, n)
JOIN _S_.threads t ON t.tenant = m.tenant AND t.id = m.thread_id
ORDER BY m.n
FOR KEY SHARE OF t
ON CONFLICT (id) DO NOTHING`

// activateGrantsManySQL is activateGrants for a group. Parameters: the
// time, the origin proposal ids.
const activateGrantsManySQL = `UPDATE _S_.grants SET activated_at = $1
WHERE origin_proposal_id = ANY($2::text[]) AND activated_at IS NULL`

// settleSet collects a group's writes, to be sent as four statements.
type settleSet struct {
	// The rows, one entry per proposal (a proposal settled twice in one
	// group is written once, in its last state, guarded by the version
	// read).
	index                               map[string]int
	ids, statuses                       []string
	owners, tokens                      []*string
	oldVersions, versions               []int64
	gens                                []*int64
	leaseExps, nexts                    []*time.Time
	outcomes                            []*string
	evTenants, evIDs, evTypes, evActors []string
	evVias, evStatuses, evDetails       []string
	msgIDs, msgTenants, msgThreads      []string
	msgRoles, msgTexts, msgProposals    []string
	msgOutcomes                         []*string
	msgTimes                            []time.Time
	activate                            []string
}

func newSettleSet(n int) *settleSet {
	return &settleSet{index: make(map[string]int, n)}
}

// add records the settlement of p (now w, read at version old) and its change.
func (ss *settleSet) add(w *store.Proposal, old int64, c *store.Change, now time.Time) error {
	var outcome *string
	if w.Outcome != nil {
		b, err := encodeOutcome(w.Outcome)
		if err != nil {
			return fmt.Errorf("encode proposal %s: outcome: %w", w.ID, err)
		}
		s := string(b)
		outcome = &s
	}
	var (
		owner, token *string
		gen          *int64
		exp          *time.Time
	)
	if l := w.Lease; l != nil {
		o, t, g, e := l.Owner, l.Token, l.Generation, dbTime(l.ExpiresAt)
		owner, token, gen, exp = &o, &t, &g, &e
	}
	var next *time.Time
	if w.NextAttemptAt != nil {
		t := dbTime(*w.NextAttemptAt)
		next = &t
	}
	i, seen := ss.index[w.ID]
	if !seen {
		i = len(ss.ids)
		ss.index[w.ID] = i
		ss.ids = append(ss.ids, w.ID)
		ss.oldVersions = append(ss.oldVersions, old)
		ss.statuses = append(ss.statuses, "")
		ss.owners = append(ss.owners, nil)
		ss.tokens = append(ss.tokens, nil)
		ss.gens = append(ss.gens, nil)
		ss.leaseExps = append(ss.leaseExps, nil)
		ss.nexts = append(ss.nexts, nil)
		ss.outcomes = append(ss.outcomes, nil)
		ss.versions = append(ss.versions, 0)
	}
	ss.statuses[i] = string(w.Status)
	ss.owners[i], ss.tokens[i], ss.gens[i], ss.leaseExps[i] = owner, token, gen, exp
	ss.nexts[i] = next
	ss.outcomes[i] = outcome
	ss.versions[i] = w.Version

	for _, e := range c.Events {
		ss.evTenants = append(ss.evTenants, w.Tenant)
		ss.evIDs = append(ss.evIDs, w.ID)
		ss.evTypes = append(ss.evTypes, string(e.Type))
		ss.evActors = append(ss.evActors, e.Actor)
		ss.evVias = append(ss.evVias, e.Via)
		ss.evStatuses = append(ss.evStatuses, string(w.Status))
		ss.evDetails = append(ss.evDetails, e.Detail)
	}
	if m := c.Admit; m != nil {
		mo := outcome
		// The message's outcome is the row's (store.settle clones it);
		// encode it again only if it is not.
		if !sameOutcome(m.Outcome, w.Outcome) {
			b, err := encodeOutcome(m.Outcome)
			if err != nil {
				return fmt.Errorf("admit message: %w", err)
			}
			mo = nil
			if b != nil {
				s := string(b)
				mo = &s
			}
		}
		ss.msgIDs = append(ss.msgIDs, m.ID)
		ss.msgTenants = append(ss.msgTenants, m.Tenant)
		ss.msgThreads = append(ss.msgThreads, m.ThreadID)
		ss.msgRoles = append(ss.msgRoles, m.Role)
		ss.msgTexts = append(ss.msgTexts, m.Text)
		ss.msgProposals = append(ss.msgProposals, m.ProposalID)
		ss.msgOutcomes = append(ss.msgOutcomes, mo)
		ss.msgTimes = append(ss.msgTimes, dbTime(m.CreatedAt))
	}
	if c.Grant != nil {
		// ApplySettle never stores a grant; a rule that did would need the
		// row-at-a-time path.
		return fmt.Errorf("settle %s: a settlement cannot store a grant", w.ID)
	}
	if c.ActivateGrants {
		ss.activate = append(ss.activate, w.ID)
	}
	return nil
}

// sameOutcome reports whether a and b encode alike.
func sameOutcome(a, b *store.Outcome) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ProposalID == b.ProposalID && a.Status == b.Status && eqPtr(a.Executed, b.Executed) &&
		a.Receipt == b.Receipt && string(a.Result) == string(b.Result) && (a.Result == nil) == (b.Result == nil) &&
		eqPtr(a.Error, b.Error) && a.Summary == b.Summary && a.Note == b.Note && a.ResolvedBy == b.ResolvedBy &&
		a.Reconciles == b.Reconciles && dbTime(a.At).Equal(dbTime(b.At))
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// queue queues the group's statements on tx.
func (ss *settleSet) queue(s *Store, tx *txn, now time.Time) {
	if len(ss.ids) > 0 {
		want := len(ss.ids)
		tx.queue(s.q.settleRows, ss.ids, ss.oldVersions, ss.statuses, ss.owners, ss.tokens, ss.gens,
			ss.leaseExps, ss.nexts, ss.outcomes, ss.versions, now).Query(func(rows pgx.Rows) error {
			written := make(map[string]bool, want)
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				written[id] = true
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if len(written) == want {
				return nil
			}
			for i, id := range ss.ids {
				if !written[id] {
					return fmt.Errorf("proposal %s: row changed since version %d was read: %w", id, ss.oldVersions[i], store.ErrConflict)
				}
			}
			return fmt.Errorf("settle: %d rows written, want %d: %w", len(written), want, store.ErrConflict)
		})
	}
	if len(ss.evIDs) > 0 {
		tx.queue(s.q.insertEvents, ss.evTenants, ss.evIDs, ss.evTypes, ss.evActors, ss.evVias, ss.evStatuses, ss.evDetails, now)
	}
	if len(ss.msgIDs) > 0 {
		tx.queue(s.q.admitMessages, ss.msgIDs, ss.msgTenants, ss.msgThreads, ss.msgRoles, ss.msgTexts, ss.msgProposals, ss.msgOutcomes, ss.msgTimes)
	}
	if len(ss.activate) > 0 {
		tx.queue(s.q.activateGrantsMany, now, ss.activate)
	}
}

// SettleMany implements store.Store: one transaction, and one round trip
// for the writes, for the group. The group's rows are locked in one
// statement, in id order, so that groups never deadlock.
func (s *Store) SettleMany(ctx context.Context, params []*store.SettleParams) ([]*store.TransitionResult, []error, error) {
	results := make([]*store.TransitionResult, len(params))
	errs := make([]error, len(params))
	if len(params) == 0 {
		return results, errs, nil
	}
	tenants, ids := make([]string, len(params)), make([]string, len(params))
	for i, sp := range params {
		tenants[i], ids[i] = sp.Tenant, sp.ID
	}
	type key struct{ tenant, id string }
	var (
		locked  []*store.Proposal
		readErr error
	)
	err := s.write(ctx, func(b *pgx.Batch) {
		b.Queue(s.q.lockMany, tenants, ids).Query(func(rows pgx.Rows) error {
			locked, readErr = collectProposals(rows)
			return nil
		})
	}, func(tx *txn, now time.Time) error {
		clear(results)
		clear(errs)
		if readErr != nil {
			return readErr
		}
		cur := make(map[key]*store.Proposal, len(locked))
		for _, p := range locked {
			cur[key{p.Tenant, p.ID}] = p
		}
		read := make(map[string]int64, len(locked))
		ss := newSettleSet(len(params))
		for i, sp := range params {
			k := key{sp.Tenant, sp.ID}
			p := cur[k]
			if p == nil {
				errs[i] = wrap("settle", notFound(sp.ID))
				continue
			}
			w := p.Clone()
			c, ferr := store.ApplySettle(w, sp, now)
			if ferr != nil {
				errs[i] = wrap("settle", ferr)
				results[i] = &store.TransitionResult{Proposal: p.Clone(), From: p.Status}
				continue
			}
			store.Finish(w, now)
			normalize(w)
			old, ok := read[sp.ID]
			if !ok {
				old = p.Version
				read[sp.ID] = old
			}
			if err := ss.add(w, old, c, now); err != nil {
				return err
			}
			s.announce(tx, w, p.Status)
			results[i] = &store.TransitionResult{Proposal: w, From: p.Status, Changed: true}
			// A later item for the same proposal sees this one's result.
			cur[k] = w.Clone()
		}
		ss.queue(s, tx, now)
		return nil
	})
	if err != nil {
		return nil, nil, wrap("settle many", err)
	}
	return results, errs, nil
}
