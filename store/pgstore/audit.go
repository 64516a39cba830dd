package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// The audit chain. Events are insert-only: a transition writes its events
// and nothing in its statement touches the chain, so writers never wait for
// it, nor for each other because of it. The sealer appends them to
// audit_chain after they commit, in id order.
//
// SealEvents is one transaction of the lease holder. Its first statement
// renews the lease row, fenced by the token, and so locks it: sealing
// transactions of two processes (a stale holder among them) run one after
// the other, and an AcquireSealLease that would take the lease over waits
// for the seal in progress and then finds the lease renewed. The same
// statement reads where sealing stands (audit_sealed) and the oldest
// transaction still running. The second reads the events above `through`
// in id order, with the head of each of their tenants' chains; the chain is
// computed in Go (store.ChainEvents) and written by a third, with the new
// standing.
//
// Ids are drawn when an event is inserted, not when it commits, so the
// sealer can meet a hole: an id it cannot see, below ids it can. The hole
// is a transaction still running (it will commit, or roll back) or one that
// rolled back (the id will never exist). The sealer stops at the hole, so
// that the chain is always in id order and no event is passed over. It
// notes the hole with the first transaction id not yet assigned
// (pg_snapshot_xmax) once it has read past it; every id in the hole was
// drawn by a transaction that had its id by then (next_event_id in
// migration 0009 sees to it), so once the oldest running transaction is no
// older than that mark, a hole still unseen is final and the sealer goes on
// past it. A rolled-back writer thus holds the chain back until the
// transactions running beside it end, usually the next seal.

// sealLeaseName names the schema's one sealing lease.
const sealLeaseName = "audit"

// micros renders a duration for "$n * interval '1 microsecond'".
func micros(d time.Duration) int64 { return d.Microseconds() }

// AcquireSealLease implements store.Store. Expiry is judged by the
// database's clock, as for execution leases.
func (s *Store) AcquireSealLease(ctx context.Context, params *store.AcquireSealLeaseParams) (*store.SealLease, error) {
	if err := store.ValidateSealParams(params.Owner, "", params.LeaseDuration, 0); err != nil {
		return nil, wrap("acquire the sealing lease", err)
	}
	l := &store.SealLease{}
	err := s.pool.QueryRow(ctx, s.sql(`INSERT INTO _S_.seal_lease AS l (name, owner, token, expires_at)
		VALUES ($1, $2, $3, statement_timestamp() + $4 * interval '1 microsecond')
		ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at
		WHERE l.expires_at <= statement_timestamp()
		RETURNING owner, token, expires_at`), sealLeaseName, params.Owner, store.NewToken(), micros(params.LeaseDuration)).
		Scan(&l.Owner, &l.Token, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		held := &store.SealLeaseHeldError{}
		err := s.pool.QueryRow(ctx, s.sql(`SELECT owner, expires_at FROM _S_.seal_lease WHERE name = $1`), sealLeaseName).
			Scan(&held.Owner, &held.ExpiresAt)
		if errors.Is(err, pgx.ErrNoRows) {
			// Released between the two statements: the caller tries again.
			return nil, wrap("acquire the sealing lease", &store.SealLeaseHeldError{ExpiresAt: time.Now()})
		}
		if err != nil {
			return nil, wrap("acquire the sealing lease", err)
		}
		return nil, wrap("acquire the sealing lease", held)
	}
	if err != nil {
		return nil, wrap("acquire the sealing lease", err)
	}
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, nil
}

// sealStartSQL renews the lease ($1, $2 for $3 µs) and reads where
// sealing stands and the oldest running transaction (every transaction
// older than it has ended).
const sealStartSQL = `WITH l AS (
		UPDATE _S_.seal_lease SET expires_at = statement_timestamp() + $3 * interval '1 microsecond'
		WHERE name = $1 AND token = $2 RETURNING owner, expires_at
	)
	SELECT l.owner, l.expires_at, s.through, s.gap_upto, s.gap_xmax,
		pg_snapshot_xmin(pg_current_snapshot())::text::bigint
	FROM l, _S_.audit_sealed s WHERE s.name = $1`

// sealBatchSQL reads up to $2 events with id > $1 in id order, each with
// the head of its tenant's chain as it stands (NULL for a tenant without
// one). heads is materialised so that each tenant's head is looked up
// once, not once per event.
const sealBatchSQL = `WITH batch AS MATERIALIZED (
		SELECT id, tenant, proposal_id, type, actor, actor_kind, via, status, detail, at
		FROM _S_.events WHERE id > $1 ORDER BY id LIMIT $2
	), heads AS MATERIALIZED (
		SELECT t.tenant, h.seq, h.hash FROM (SELECT DISTINCT tenant FROM batch) t
		LEFT JOIN LATERAL (
			SELECT c.seq, c.hash FROM _S_.audit_chain c
			WHERE c.tenant = t.tenant ORDER BY c.seq DESC LIMIT 1
		) h ON true
	)
	SELECT b.id, b.tenant, b.proposal_id, b.type, b.actor, b.actor_kind, b.via, b.status, b.detail, b.at, h.seq, h.hash
	FROM batch b JOIN heads h ON h.tenant = b.tenant ORDER BY b.id`

// sealWriteSQL appends the chained events and records the new standing:
// through $6, and, when $7, a hole seen below $8, marked with this
// statement's first unassigned transaction id (taken after the events
// were read, as the mark must be).
const sealWriteSQL = `WITH c AS (
		INSERT INTO _S_.audit_chain (tenant, seq, event_id, prev_hash, hash)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[])
	)
	UPDATE _S_.audit_sealed SET through = $6,
		gap_upto = CASE WHEN $7 THEN $8 ELSE gap_upto END,
		gap_xmax = CASE WHEN $7 THEN pg_snapshot_xmax(pg_current_snapshot())::text::bigint ELSE gap_xmax END
	WHERE name = $9`

// sealStanding is where sealing stands: audit_sealed's row, and the oldest
// transaction running when the seal began.
type sealStanding struct {
	through, gapUpto, gapXmax, xmin int64
}

// sealable returns the prefix of evs (the events above through, in id
// order) that may be chained now, and the standing after it: through
// advances over the events chained and over holes known to be final; at a
// hole not known to be, it stops, and noteGap says that the hole is new
// and is to be marked, below noteUpto (the highest id read: drawn before
// this seal read it).
func sealable(st sealStanding, evs []*store.Event) (chain []*store.Event, through int64, noteGap bool, noteUpto int64) {
	next := st.through + 1
	for i, e := range evs {
		if e.ID > next && st.gapUpto >= next && st.xmin >= st.gapXmax {
			// A hole the sealer marked, whose transactions have all ended:
			// what is still unseen in it will never be.
			next = min(st.gapUpto, e.ID-1) + 1
		}
		if e.ID > next {
			// A hole: marked and not yet final, or met for the first time.
			return evs[:i], next - 1, st.gapUpto < next, evs[len(evs)-1].ID
		}
		next = e.ID + 1
	}
	return evs, next - 1, false, 0
}

// SealEvents implements store.Store.
func (s *Store) SealEvents(ctx context.Context, params *store.SealEventsParams) (*store.SealResult, error) {
	if err := store.ValidateSealParams("", params.Token, params.LeaseDuration, params.Limit); err != nil {
		return nil, wrap("seal events", err)
	}
	limit := params.Limit
	if limit == 0 {
		limit = store.DefaultSealBatch
	}
	var res *store.SealResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		l := &store.SealLease{Token: params.Token}
		var st sealStanding
		err := tx.QueryRow(ctx, s.sql(sealStartSQL), sealLeaseName, params.Token, micros(params.LeaseDuration)).
			Scan(&l.Owner, &l.ExpiresAt, &st.through, &st.gapUpto, &st.gapXmax, &st.xmin)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.SealLeaseLost()
		}
		if err != nil {
			return err
		}
		l.ExpiresAt = l.ExpiresAt.UTC()
		rows, err := tx.Query(ctx, s.sql(sealBatchSQL), st.through, limit)
		if err != nil {
			return err
		}
		var evs []*store.Event
		heads := map[string]store.ChainHead{}
		for rows.Next() {
			e := &store.Event{}
			var typ, status string
			var headSeq *int64
			var headHash *string
			if err := rows.Scan(&e.ID, &e.Tenant, &e.ProposalID, &typ, &e.Actor, &e.ActorKind, &e.Via, &status, &e.Detail, &e.At, &headSeq, &headHash); err != nil {
				rows.Close()
				return err
			}
			e.Type, e.Status, e.At = store.EventType(typ), store.Status(status), e.At.UTC()
			if headSeq != nil && headHash != nil {
				heads[e.Tenant] = store.ChainHead{Seq: *headSeq, Hash: *headHash}
			}
			evs = append(evs, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		ready, through, noteGap, noteUpto := sealable(st, evs)
		res = &store.SealResult{Sealed: len(ready), Blocked: len(ready) < len(evs), Lease: l}
		if through == st.through && !noteGap {
			return nil
		}
		chained := store.ChainEvents(heads, ready)
		tenants, seqs, ids := make([]string, len(chained)), make([]int64, len(chained)), make([]int64, len(chained))
		prevs, hashes := make([]string, len(chained)), make([]string, len(chained))
		for i, ae := range chained {
			tenants[i], seqs[i], ids[i], prevs[i], hashes[i] = ae.Tenant, ae.Seq, ae.ID, ae.PrevHash, ae.Hash
		}
		_, err = tx.Exec(ctx, s.sql(sealWriteSQL), tenants, seqs, ids, prevs, hashes, through, noteGap, noteUpto, sealLeaseName)
		return err
	})
	if err != nil {
		return nil, wrap("seal events", err)
	}
	return res, nil
}

// ReleaseSealLease implements store.Store.
func (s *Store) ReleaseSealLease(ctx context.Context, params *store.ReleaseSealLeaseParams) error {
	_, err := s.pool.Exec(ctx, s.sql(`DELETE FROM _S_.seal_lease WHERE name = $1 AND token = $2`), sealLeaseName, params.Token)
	return wrap("release the sealing lease", err)
}

// ListAudit implements store.Store: a range of audit_chain, with the
// events it chains. An event deleted from events leaves a hole in the seqs
// read, which verification names.
func (s *Store) ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*store.AuditEvent, error) {
	limit := store.PageLimit(params.Limit)
	return s.listAudit(ctx, "list audit events", `SELECT e.id, e.proposal_id, e.type, e.actor, e.actor_kind, e.via, e.status, e.detail, e.at, c.seq, c.prev_hash, c.hash
		FROM _S_.audit_chain c JOIN _S_.events e ON e.id = c.event_id
		WHERE c.tenant = $1 AND c.seq > $2 ORDER BY c.seq LIMIT $3`, params.Tenant, params.Tenant, params.After, limit)
}

// ListProposalAudit implements store.Store: the proposal's events, each
// with its place in the chain where it has one.
func (s *Store) ListProposalAudit(ctx context.Context, params *store.ListProposalAuditParams) ([]*store.AuditEvent, error) {
	limit := store.PageLimit(params.Limit)
	return s.listAudit(ctx, "list a proposal's audit events", `SELECT e.id, e.proposal_id, e.type, e.actor, e.actor_kind, e.via, e.status, e.detail, e.at,
			COALESCE(c.seq, 0), COALESCE(c.prev_hash, ''), COALESCE(c.hash, '')
		FROM _S_.events e LEFT JOIN _S_.audit_chain c ON c.event_id = e.id
		WHERE e.tenant = $1 AND e.proposal_id = $2 AND e.id > $3 ORDER BY e.id LIMIT $4`, params.Tenant, params.Tenant, params.ProposalID, params.AfterID, limit)
}

// listAudit reads chained events of tenant with query and args.
func (s *Store) listAudit(ctx context.Context, what, query, tenant string, args ...any) ([]*store.AuditEvent, error) {
	rows, err := s.pool.Query(ctx, s.sql(query), args...)
	if err != nil {
		return nil, wrap(what, err)
	}
	defer rows.Close()
	var out []*store.AuditEvent
	for rows.Next() {
		e := &store.AuditEvent{Event: store.Event{Tenant: tenant}}
		var typ, status string
		if err := rows.Scan(&e.ID, &e.ProposalID, &typ, &e.Actor, &e.ActorKind, &e.Via, &status, &e.Detail, &e.At, &e.Seq, &e.PrevHash, &e.Hash); err != nil {
			return nil, wrap(what, err)
		}
		e.Type, e.Status, e.At = store.EventType(typ), store.Status(status), e.At.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(what, err)
	}
	return out, nil
}

// The checkpoints (migration 0012): the chains' heads, each tenant's newest
// checkpoint, and a tenant's checkpoints.
const (
	// chainHeadsSQL walks the tenants of audit_chain in byte order (its
	// tenant is COLLATE "C"), one probe of the primary key each rather than
	// a scan of every link, and reads each one's last link and newest
	// checkpoint. The walk counts its steps (n) and stops at the page's
	// limit, $2, so that the page's sort sorts no more than the page.
	chainHeadsSQL = `WITH RECURSIVE t(tenant, n) AS (
			(SELECT tenant, 1 FROM _S_.audit_chain WHERE tenant > $1 ORDER BY tenant LIMIT 1)
			UNION ALL
			SELECT (SELECT c.tenant FROM _S_.audit_chain c WHERE c.tenant > t.tenant ORDER BY c.tenant LIMIT 1), t.n + 1
			FROM t WHERE t.tenant IS NOT NULL AND t.n < $2
		)
		SELECT t.tenant, h.seq, h.hash, k.seq, k.hash, k.at, k.key_id, k.signature
		FROM t
		CROSS JOIN LATERAL (SELECT c.seq, c.hash FROM _S_.audit_chain c WHERE c.tenant = t.tenant ORDER BY c.seq DESC LIMIT 1) h
		LEFT JOIN LATERAL (SELECT k.seq, k.hash, k.at, k.key_id, k.signature FROM _S_.audit_checkpoints k
			WHERE k.tenant = t.tenant ORDER BY k.seq DESC LIMIT 1) k ON true
		WHERE t.tenant IS NOT NULL
		ORDER BY t.tenant`
	// writeCheckpointsSQL renews the lease, fenced by its token ($1, $2 for
	// $3 µs), and stores the checkpoints, or signs idle chains again: one
	// for a stored seq replaces it only with the same hash and a later
	// time. The renewal locks the lease row, as a seal's does, and the
	// checkpoints are written only when it renewed. It returns the renewed
	// lease, or no row when the token is no longer the lease's.
	writeCheckpointsSQL = `WITH l AS (
			UPDATE _S_.seal_lease SET expires_at = statement_timestamp() + $3 * interval '1 microsecond'
			WHERE name = $1 AND token = $2 RETURNING owner, expires_at
		), w AS (
			INSERT INTO _S_.audit_checkpoints AS k (tenant, seq, hash, at, key_id, signature)
			SELECT c.* FROM unnest($4::text[], $5::bigint[], $6::text[], $7::timestamptz[], $8::text[], $9::text[]) c, l
			ON CONFLICT (tenant, seq) DO UPDATE SET at = EXCLUDED.at, key_id = EXCLUDED.key_id, signature = EXCLUDED.signature
			WHERE k.hash = EXCLUDED.hash AND k.at < EXCLUDED.at
		)
		SELECT owner, expires_at FROM l`
	listCheckpointsSQL = `SELECT seq, hash, at, key_id, signature FROM _S_.audit_checkpoints
		WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3`
)

// ListChainHeads implements store.Store.
func (s *Store) ListChainHeads(ctx context.Context, params *store.ListChainHeadsParams) ([]*store.TenantChain, error) {
	limit := store.PageLimit(params.Limit)
	rows, err := s.pool.Query(ctx, s.sql(chainHeadsSQL), params.AfterTenant, limit)
	if err != nil {
		return nil, wrap("list chain heads", err)
	}
	defer rows.Close()
	var out []*store.TenantChain
	for rows.Next() {
		tc := &store.TenantChain{}
		var seq *int64
		var at *time.Time
		var hash, keyID, sig *string
		if err := rows.Scan(&tc.Tenant, &tc.Head.Seq, &tc.Head.Hash, &seq, &hash, &at, &keyID, &sig); err != nil {
			return nil, wrap("list chain heads", err)
		}
		if seq != nil && hash != nil && at != nil && keyID != nil && sig != nil {
			tc.Checkpoint = &store.Checkpoint{Tenant: tc.Tenant, Seq: *seq, Hash: *hash, At: at.UTC(), KeyID: *keyID, Signature: *sig}
		}
		out = append(out, tc)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list chain heads", err)
	}
	return out, nil
}

// WriteCheckpoints implements store.Store: one statement renews the lease
// and writes the checkpoints.
func (s *Store) WriteCheckpoints(ctx context.Context, params *store.WriteCheckpointsParams) (*store.SealLease, error) {
	if err := store.ValidateCheckpoints(params); err != nil {
		return nil, wrap("write audit checkpoints", err)
	}
	n := len(params.Checkpoints)
	tenants, seqs, hashes, ats := make([]string, n), make([]int64, n), make([]string, n), make([]time.Time, n)
	keyIDs, sigs := make([]string, n), make([]string, n)
	for i, c := range params.Checkpoints {
		tenants[i], seqs[i], hashes[i], ats[i], keyIDs[i], sigs[i] = c.Tenant, c.Seq, c.Hash, c.At, c.KeyID, c.Signature
	}
	l := &store.SealLease{Token: params.Token}
	err := s.pool.QueryRow(ctx, s.sql(writeCheckpointsSQL), sealLeaseName, params.Token, micros(params.LeaseDuration),
		tenants, seqs, hashes, ats, keyIDs, sigs).Scan(&l.Owner, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.CheckpointLeaseLost()
	}
	if err != nil {
		return nil, wrap("write audit checkpoints", err)
	}
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, nil
}

// ListCheckpoints implements store.Store.
func (s *Store) ListCheckpoints(ctx context.Context, params *store.ListCheckpointsParams) ([]*store.Checkpoint, error) {
	limit := store.PageLimit(params.Limit)
	rows, err := s.pool.Query(ctx, s.sql(listCheckpointsSQL), params.Tenant, params.After, limit)
	if err != nil {
		return nil, wrap("list audit checkpoints", err)
	}
	defer rows.Close()
	var out []*store.Checkpoint
	for rows.Next() {
		c := &store.Checkpoint{Tenant: params.Tenant}
		if err := rows.Scan(&c.Seq, &c.Hash, &c.At, &c.KeyID, &c.Signature); err != nil {
			return nil, wrap("list audit checkpoints", err)
		}
		c.At = c.At.UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list audit checkpoints", err)
	}
	return out, nil
}
