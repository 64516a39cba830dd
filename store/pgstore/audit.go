package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

// The audit chain. Events are written unsealed by their transitions, and
// nothing in a transition's statement touches the chain: writers never wait
// for it, nor for each other because of it.
//
// SealEvents is one transaction of the lease holder. Its first statement
// renews the lease row, fenced by the token, and so locks it: sealing
// transactions of two processes (a stale holder among them) run one after
// the other, and an AcquireSealLease that would take the lease over waits
// for the seal in progress and then finds the lease renewed. Its second
// reads, in id order from events_unsealed, the events committed when it
// began and not sealed yet, with the head of each of their tenants' chains
// (read after the lock, so the previous sealer's writes are seen); the
// chain is computed in Go (store.ChainEvents) and written by a third.
//
// Ids are drawn when an event is inserted, not when it commits, so an event
// may commit after events with higher ids were sealed. It is still unsealed,
// so the next seal finds it and gives it the next seq: no event is passed
// over, and none waits for a window of time to close. The chain is thus in
// the order events became visible to the sealer, which is commit order for
// any two events a seal separates, and id order (consistent with causality:
// a write that follows another's commit draws a higher id) within one seal.

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

// sealBatchSQL reads up to $1 unsealed events in id order, each with the
// head of its tenant's chain as it stands (NULL for a tenant without one).
// heads is materialised so that each tenant's head is looked up once, not
// once per event (the planner otherwise runs the lateral after the join).
const sealBatchSQL = `WITH batch AS MATERIALIZED (
		SELECT id, tenant, proposal_id, type, actor, via, status, detail, at
		FROM _S_.events WHERE seq IS NULL ORDER BY id LIMIT $1
	), heads AS MATERIALIZED (
		SELECT t.tenant, h.seq, h.hash FROM (SELECT DISTINCT tenant FROM batch) t
		LEFT JOIN LATERAL (
			SELECT x.seq, x.hash FROM _S_.events x
			WHERE x.tenant = t.tenant AND x.seq IS NOT NULL ORDER BY x.seq DESC LIMIT 1
		) h ON true
	)
	SELECT b.id, b.tenant, b.proposal_id, b.type, b.actor, b.via, b.status, b.detail, b.at, h.seq, h.hash
	FROM batch b JOIN heads h ON h.tenant = b.tenant ORDER BY b.id`

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
		err := tx.QueryRow(ctx, s.sql(`UPDATE _S_.seal_lease SET expires_at = statement_timestamp() + $3 * interval '1 microsecond'
			WHERE name = $1 AND token = $2 RETURNING owner, expires_at`), sealLeaseName, params.Token, micros(params.LeaseDuration)).
			Scan(&l.Owner, &l.ExpiresAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.SealLeaseLost()
		}
		if err != nil {
			return err
		}
		l.ExpiresAt = l.ExpiresAt.UTC()
		rows, err := tx.Query(ctx, s.sql(sealBatchSQL), limit)
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
			if err := rows.Scan(&e.ID, &e.Tenant, &e.ProposalID, &typ, &e.Actor, &e.Via, &status, &e.Detail, &e.At, &headSeq, &headHash); err != nil {
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
		if len(evs) > 0 {
			chained := store.ChainEvents(heads, evs)
			ids, seqs := make([]int64, len(chained)), make([]int64, len(chained))
			prevs, hashes := make([]string, len(chained)), make([]string, len(chained))
			for i, ae := range chained {
				ids[i], seqs[i], prevs[i], hashes[i] = ae.ID, ae.Seq, ae.PrevHash, ae.Hash
			}
			tag, err := tx.Exec(ctx, s.sql(`UPDATE _S_.events e SET seq = u.seq, prev_hash = u.prev_hash, hash = u.hash
				FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS u(id, seq, prev_hash, hash)
				WHERE e.id = u.id AND e.seq IS NULL`), ids, seqs, prevs, hashes)
			if err != nil {
				return err
			}
			if int(tag.RowsAffected()) != len(chained) {
				// Only a writer outside the lease could have sealed them.
				return fmt.Errorf("sealed %d of %d events: another sealer wrote meanwhile", tag.RowsAffected(), len(chained))
			}
		}
		res = &store.SealResult{Sealed: len(evs), Lease: l}
		return nil
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

// ListAudit implements store.Store: a range of events_chain.
func (s *Store) ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*store.AuditEvent, error) {
	limit := params.Limit
	if limit <= 0 || limit > store.MaxPageSize {
		limit = store.MaxPageSize
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT id, proposal_id, type, actor, via, status, detail, at, seq, prev_hash, hash
		FROM _S_.events WHERE tenant = $1 AND seq IS NOT NULL AND seq > $2 ORDER BY seq LIMIT $3`), params.Tenant, params.After, limit)
	if err != nil {
		return nil, wrap("list audit events", err)
	}
	defer rows.Close()
	var out []*store.AuditEvent
	for rows.Next() {
		e := &store.AuditEvent{Event: store.Event{Tenant: params.Tenant}}
		var typ, status string
		if err := rows.Scan(&e.ID, &e.ProposalID, &typ, &e.Actor, &e.Via, &status, &e.Detail, &e.At, &e.Seq, &e.PrevHash, &e.Hash); err != nil {
			return nil, wrap("list audit events", err)
		}
		e.Type, e.Status, e.At = store.EventType(typ), store.Status(status), e.At.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("list audit events", err)
	}
	return out, nil
}
