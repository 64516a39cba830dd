package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// The audit chain. Events are written unsealed; SealEvents, on the writer
// under the lease, reads the unsealed ones in id order (which on SQLite is
// commit order: ids are assigned under the write lock), chains them with
// store.ChainEvents onto their tenants' heads and writes their seq and
// hashes. Its transaction is the writer's, so two sealers in two processes
// take turns at SQLite's lock, and each reads the heads the other wrote.

// sealLeaseName names the store's one sealing lease.
const sealLeaseName = "audit"

// AcquireSealLease implements store.Store.
func (s *Store) AcquireSealLease(ctx context.Context, params *store.AcquireSealLeaseParams) (*store.SealLease, error) {
	if err := store.ValidateSealParams(params.Owner, "", params.LeaseDuration, 0); err != nil {
		return nil, err
	}
	var out *store.SealLease
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		var owner string
		var expires int64
		err := tx.QueryRowContext(ctx, `SELECT owner, expires_at FROM seal_lease WHERE name = ?`, sealLeaseName).Scan(&owner, &expires)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case now.UnixNano() < expires:
			return &store.SealLeaseHeldError{Owner: owner, ExpiresAt: fromNanos(expires)}
		}
		l := &store.SealLease{Owner: params.Owner, Token: store.NewToken(), ExpiresAt: now.Add(params.LeaseDuration)}
		if _, err := tx.ExecContext(ctx, `INSERT INTO seal_lease (name, owner, token, expires_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at`,
			sealLeaseName, l.Owner, l.Token, l.ExpiresAt.UnixNano()); err != nil {
			return err
		}
		out = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: acquire the sealing lease: %w", classify(err))
	}
	return out, nil
}

// SealEvents implements store.Store.
func (s *Store) SealEvents(ctx context.Context, params *store.SealEventsParams) (*store.SealResult, error) {
	if err := store.ValidateSealParams("", params.Token, params.LeaseDuration, params.Limit); err != nil {
		return nil, err
	}
	limit := params.Limit
	if limit == 0 {
		limit = store.DefaultSealBatch
	}
	var res *store.SealResult
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		l := &store.SealLease{Token: params.Token, ExpiresAt: now.Add(params.LeaseDuration)}
		err := tx.QueryRowContext(ctx, `UPDATE seal_lease SET expires_at = ? WHERE name = ? AND token = ? RETURNING owner`,
			l.ExpiresAt.UnixNano(), sealLeaseName, params.Token).Scan(&l.Owner)
		if errors.Is(err, sql.ErrNoRows) {
			return store.SealLeaseLost()
		}
		if err != nil {
			return err
		}
		evs, err := unsealedEvents(ctx, tx, limit)
		if err != nil {
			return err
		}
		heads := map[string]store.ChainHead{}
		for _, e := range evs {
			if _, ok := heads[e.Tenant]; ok {
				continue
			}
			var h store.ChainHead
			err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM events WHERE tenant = ? AND seq IS NOT NULL ORDER BY seq DESC LIMIT 1`, e.Tenant).Scan(&h.Seq, &h.Hash)
			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return fmt.Errorf("read the head of %s: %w", e.Tenant, err)
			default:
				heads[e.Tenant] = h
			}
		}
		if len(evs) > 0 {
			// One statement for the batch: the writer is shared, and a
			// statement per event held it several times longer.
			type sealed struct {
				ID   int64  `json:"i"`
				Seq  int64  `json:"s"`
				Prev string `json:"p"`
				Hash string `json:"h"`
			}
			chained := store.ChainEvents(heads, evs)
			rows := make([]sealed, len(chained))
			for i, ae := range chained {
				rows[i] = sealed{ae.ID, ae.Seq, ae.PrevHash, ae.Hash}
			}
			batch, err := json.Marshal(rows)
			if err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, sealBatchSQL, string(batch))
			if err != nil {
				return fmt.Errorf("seal events: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil || int(n) != len(chained) {
				// Only a writer outside the lease could have sealed them.
				return fmt.Errorf("sealed %d of %d events (%v): another sealer wrote meanwhile", n, len(chained), err)
			}
		}
		res = &store.SealResult{Sealed: len(evs), Lease: l}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: seal events: %w", classify(err))
	}
	return res, nil
}

// sealBatchSQL writes a batch's seqs and hashes, given as a JSON array of
// {"i": id, "s": seq, "p": prev_hash, "h": hash}, to events still unsealed.
const sealBatchSQL = `UPDATE events SET seq = j.value ->> 's', prev_hash = j.value ->> 'p', hash = j.value ->> 'h'
	FROM json_each(?) AS j WHERE events.id = j.value ->> 'i' AND events.seq IS NULL`

// unsealedEvents reads up to limit unsealed events from events_unsealed,
// in id order.
func unsealedEvents(ctx context.Context, tx *wtx, limit int) ([]*store.Event, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, tenant, proposal_id, type, actor, via, status, detail, at FROM events
		WHERE seq IS NULL ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("read unsealed events: %w", err)
	}
	defer rows.Close()
	var out []*store.Event
	for rows.Next() {
		e := &store.Event{}
		var typ, status string
		var at int64
		if err := rows.Scan(&e.ID, &e.Tenant, &e.ProposalID, &typ, &e.Actor, &e.Via, &status, &e.Detail, &at); err != nil {
			return nil, fmt.Errorf("read unsealed events: %w", err)
		}
		e.Type, e.Status, e.At = store.EventType(typ), store.Status(status), fromNanos(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// ReleaseSealLease implements store.Store.
func (s *Store) ReleaseSealLease(ctx context.Context, params *store.ReleaseSealLeaseParams) error {
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM seal_lease WHERE name = ? AND token = ?`, sealLeaseName, params.Token)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: release the sealing lease: %w", classify(err))
	}
	return nil
}

// ListAudit implements store.Store: a range of events_chain.
func (s *Store) ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*store.AuditEvent, error) {
	limit := params.Limit
	if limit <= 0 || limit > store.MaxPageSize {
		limit = store.MaxPageSize
	}
	return s.listAudit(ctx, "list audit events", params.Tenant, `SELECT id, proposal_id, type, actor, via, status, detail, at, seq, prev_hash, hash FROM events
		WHERE tenant = ? AND seq IS NOT NULL AND seq > ? ORDER BY seq LIMIT ?`, params.Tenant, params.After, limit)
}

// ListProposalAudit implements store.Store.
func (s *Store) ListProposalAudit(ctx context.Context, params *store.ListProposalAuditParams) ([]*store.AuditEvent, error) {
	limit := params.Limit
	if limit <= 0 || limit > store.MaxPageSize {
		limit = store.MaxPageSize
	}
	return s.listAudit(ctx, "list a proposal's audit events", params.Tenant, `SELECT id, proposal_id, type, actor, via, status, detail, at,
			COALESCE(seq, 0), COALESCE(prev_hash, ''), COALESCE(hash, '') FROM events
		WHERE tenant = ? AND proposal_id = ? AND id > ? ORDER BY id LIMIT ?`, params.Tenant, params.ProposalID, params.AfterID, limit)
}

// listAudit reads chained events of tenant with query and args.
func (s *Store) listAudit(ctx context.Context, what, tenant, query string, args ...any) ([]*store.AuditEvent, error) {
	rows, err := s.rq.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", what, classify(err))
	}
	defer rows.Close()
	var out []*store.AuditEvent
	for rows.Next() {
		e := &store.AuditEvent{Event: store.Event{Tenant: tenant}}
		var typ, status string
		var at int64
		if err := rows.Scan(&e.ID, &e.ProposalID, &typ, &e.Actor, &e.Via, &status, &e.Detail, &at, &e.Seq, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("sqlitestore: %s: %w", what, classify(err))
		}
		e.Type, e.Status, e.At = store.EventType(typ), store.Status(status), fromNanos(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", what, classify(err))
	}
	return out, nil
}
