package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/countersign/countersign/store"
)

// The audit chain. Events are written as they always were; the sealer, under
// the lease, chains the ones above audit_sealed.through (ids are assigned
// under the write lock, so id order is commit order and what a read sees of
// them is a prefix) with store.ChainEvents onto their tenants' heads, and
// appends one audit_blocks row per tenant it sealed events of: their ids and
// their hashes (migration 0013 says why). No event row is rewritten for the
// chain. Its writes go through the writer, so two sealers in two processes
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
//
// The writer is SQLite's one, shared by every write of the process (and by
// their group commits), so the seal holds it only to check the lease and
// write the batch's seqs and hashes. What can be done before, is: the
// unsealed events and their tenants' heads are read on the read pool and
// chained there. Nothing they read can change before the write but by
// another sealer, and another sealer can seal only after taking the lease,
// which the write checks: a seal whose token is no longer the lease's writes
// nothing.
func (s *Store) SealEvents(ctx context.Context, params *store.SealEventsParams) (*store.SealResult, error) {
	if err := store.ValidateSealParams("", params.Token, params.LeaseDuration, params.Limit); err != nil {
		return nil, err
	}
	limit := params.Limit
	if limit == 0 {
		limit = store.DefaultSealBatch
	}
	from, chained, err := s.chainUnsealed(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: seal events: %w", classify(err))
	}
	blocks, err := newSealBlocks(chained)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: seal events: %w", err)
	}
	var res *store.SealResult
	err = s.write(ctx, func(tx *wtx, now time.Time) error {
		l := &store.SealLease{Token: params.Token, ExpiresAt: now.Add(params.LeaseDuration)}
		err := tx.QueryRowContext(ctx, `UPDATE seal_lease SET expires_at = ? WHERE name = ? AND token = ? RETURNING owner`,
			l.ExpiresAt.UnixNano(), sealLeaseName, params.Token).Scan(&l.Owner)
		if errors.Is(err, sql.ErrNoRows) {
			return store.SealLeaseLost()
		}
		if err != nil {
			return err
		}
		if len(chained) > 0 {
			// Where the batch starts must still be where sealing stands:
			// only a writer outside the lease could have moved it.
			r, err := tx.ExecContext(ctx, `UPDATE audit_sealed SET through = ? WHERE name = ? AND through = ?`,
				chained[len(chained)-1].ID, sealLeaseName, from)
			if err != nil {
				return fmt.Errorf("seal events: %w", err)
			}
			if n, err := r.RowsAffected(); err != nil || n != 1 {
				return fmt.Errorf("seal events after %d (%v): another sealer wrote meanwhile", from, err)
			}
			for _, b := range blocks {
				r, err := tx.ExecContext(ctx, sealBlockSQL, b.lastID, b.tenant, b.firstSeq, b.lastSeq, string(b.ids), b.prev, b.hashes)
				if err != nil {
					return fmt.Errorf("seal events of %s from seq %d: %w", b.tenant, b.firstSeq, err)
				}
				if n, err := r.RowsAffected(); err != nil || n != 1 {
					return fmt.Errorf("seal events of %s from seq %d (%v): its chain does not end at seq %d", b.tenant, b.firstSeq, err, b.firstSeq-1)
				}
			}
		}
		res = &store.SealResult{Sealed: len(chained), Lease: l}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: seal events: %w", classify(err))
	}
	return res, nil
}

// sealBlockSQL appends a block to a tenant's chain where the chain ends:
// its first seq must follow the tenant's last, and its prev_hash be that
// seq's hash, or nothing is written. With the unique (tenant, last_seq) no
// two events can share a seq (a fork), whatever a sealer does.
const sealBlockSQL = `INSERT INTO audit_blocks (last_id, tenant, first_seq, last_seq, ids, prev_hash, hashes)
	SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
	WHERE (SELECT COALESCE(max(last_seq), 0) FROM audit_blocks WHERE tenant = ?2) = ?3 - 1
		AND ?6 = COALESCE((SELECT substr(hashes, -32, 32) FROM audit_blocks WHERE tenant = ?2 AND last_seq = ?3 - 1), X'')`

// sealBlock is an audit_blocks row, as sealBlockSQL takes it: one tenant's
// events of one seal.
type sealBlock struct {
	tenant            string
	lastID            int64
	firstSeq, lastSeq int64
	ids               []byte // a JSON array, bound as text
	prev, hashes      []byte
}

// newSealBlocks groups chained (the events of one seal, in id order) into
// one block per tenant, in the order the tenants first appear.
func newSealBlocks(chained []*store.AuditEvent) ([]*sealBlock, error) {
	var blocks []*sealBlock
	byTenant := map[string]*sealBlock{}
	for _, ae := range chained {
		b := byTenant[ae.Tenant]
		if b == nil {
			// The genesis prev_hash is an empty blob, never NULL.
			prev, err := hex.AppendDecode([]byte{}, []byte(ae.PrevHash))
			if err != nil {
				return nil, fmt.Errorf("seal event %d: its prev_hash is not hex: %w", ae.ID, err)
			}
			b = &sealBlock{tenant: ae.Tenant, firstSeq: ae.Seq, prev: prev, ids: []byte{'['}}
			byTenant[ae.Tenant] = b
			blocks = append(blocks, b)
		} else if ae.Seq != b.lastSeq+1 {
			return nil, fmt.Errorf("seal event %d: seq %d does not follow %d", ae.ID, ae.Seq, b.lastSeq)
		} else {
			b.ids = append(b.ids, ',')
		}
		b.lastID, b.lastSeq = ae.ID, ae.Seq
		b.ids = strconv.AppendInt(b.ids, ae.ID, 10)
		if len(ae.Hash) != 2*sha256.Size {
			return nil, fmt.Errorf("seal event %d: its hash %q is not %d hex digits", ae.ID, ae.Hash, 2*sha256.Size)
		}
		var err error
		if b.hashes, err = hex.AppendDecode(b.hashes, []byte(ae.Hash)); err != nil {
			return nil, fmt.Errorf("seal event %d: its hash is not hex: %w", ae.ID, err)
		}
	}
	for _, b := range blocks {
		b.ids = append(b.ids, ']')
	}
	return blocks, nil
}

// chainUnsealed reads up to limit unsealed events, in id order, and chains
// them onto their tenants' heads. It returns where sealing stood (the
// events after from are the ones chained).
func (s *Store) chainUnsealed(ctx context.Context, limit int) (from int64, _ []*store.AuditEvent, _ error) {
	if err := s.rq.QueryRowContext(ctx, `SELECT through FROM audit_sealed WHERE name = ?`, sealLeaseName).Scan(&from); err != nil {
		return 0, nil, fmt.Errorf("read where sealing stands: %w", err)
	}
	evs, err := unsealedEvents(ctx, &s.rq, from, limit)
	if err != nil || len(evs) == 0 {
		return from, nil, err
	}
	heads := map[string]store.ChainHead{}
	read := map[string]bool{}
	for _, e := range evs {
		if read[e.Tenant] {
			continue
		}
		read[e.Tenant] = true
		var h store.ChainHead
		var hash []byte
		err := s.rq.QueryRowContext(ctx, chainHeadSQL, e.Tenant).Scan(&h.Seq, &hash)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return 0, nil, fmt.Errorf("read the head of %s: %w", e.Tenant, err)
		default:
			h.Hash = hex.EncodeToString(hash)
			heads[e.Tenant] = h
		}
	}
	return from, store.ChainEvents(heads, evs), nil
}

// The sealer's reads: a tenant's head, and the events after where sealing
// stands.
const (
	chainHeadSQL = `SELECT last_seq, substr(hashes, -32, 32) FROM audit_blocks WHERE tenant = ? ORDER BY last_seq DESC LIMIT 1`
	unsealedSQL  = `SELECT id, tenant, proposal_id, type, actor, actor_kind, via, status, detail, at FROM events
		WHERE id > ? ORDER BY id LIMIT ?`
)

// unsealedEvents reads up to limit events after the event id from, in id
// order.
func unsealedEvents(ctx context.Context, q querier, from int64, limit int) ([]*store.Event, error) {
	rows, err := q.QueryContext(ctx, unsealedSQL, from, limit)
	if err != nil {
		return nil, fmt.Errorf("read unsealed events: %w", err)
	}
	defer rows.Close()
	var out []*store.Event
	for rows.Next() {
		e := &store.Event{}
		var typ, status string
		var at int64
		if err := rows.Scan(&e.ID, &e.Tenant, &e.ProposalID, &typ, &e.Actor, &e.ActorKind, &e.Via, &status, &e.Detail, &at); err != nil {
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

// ListAudit implements store.Store: a range of a tenant's audit_chain, with
// its events. A chain row whose event is gone, or moved to another tenant,
// is left out, for verification to find the gap.
func (s *Store) ListAudit(ctx context.Context, params *store.ListAuditParams) ([]*store.AuditEvent, error) {
	limit := store.PageLimit(params.Limit)
	return s.listAudit(ctx, "list audit events", params.Tenant, listAuditSQL, params.Tenant, params.After, limit)
}

// ListProposalAudit implements store.Store.
func (s *Store) ListProposalAudit(ctx context.Context, params *store.ListProposalAuditParams) ([]*store.AuditEvent, error) {
	limit := store.PageLimit(params.Limit)
	return s.listAudit(ctx, "list a proposal's audit events", params.Tenant, listProposalAuditSQL, params.Tenant, params.ProposalID, params.AfterID, limit)
}

// The chain's reads: a range of a tenant's chain, and a proposal's events
// with their links, if they have them. A block's events are its ids' JSON
// array, read with json_each in array order: the event at key k has seq
// first_seq + k, its hash at byte 32k of hashes, and its prev_hash just
// before it (the block's prev_hash for the first).
const (
	listAuditSQL = `SELECT e.id, e.proposal_id, e.type, e.actor, e.actor_kind, e.via, e.status, e.detail, e.at, b.first_seq + j.key,
			CASE j.key WHEN 0 THEN b.prev_hash ELSE substr(b.hashes, 32 * j.key - 31, 32) END,
			substr(b.hashes, 32 * j.key + 1, 32)
		FROM audit_blocks b CROSS JOIN json_each(b.ids) j CROSS JOIN events e ON e.id = j.value AND e.tenant = b.tenant
		WHERE b.tenant = ?1 AND b.last_seq > ?2 AND b.first_seq + j.key > ?2 ORDER BY b.last_seq, j.key LIMIT ?3`
	// An event's block is its tenant's first whose last event is not
	// before it; an event not in it (not sealed yet) has no link.
	listProposalAuditSQL = `SELECT e.id, e.proposal_id, e.type, e.actor, e.actor_kind, e.via, e.status, e.detail, e.at,
			COALESCE(b.first_seq + j.key, 0),
			COALESCE(CASE j.key WHEN 0 THEN b.prev_hash ELSE substr(b.hashes, 32 * j.key - 31, 32) END, X''),
			COALESCE(substr(b.hashes, 32 * j.key + 1, 32), X'')
		FROM events e
		LEFT JOIN audit_blocks b ON b.last_id = (SELECT min(x.last_id) FROM audit_blocks x WHERE x.tenant = e.tenant AND x.last_id >= e.id)
		LEFT JOIN json_each(b.ids) j ON j.value = e.id
		WHERE e.tenant = ? AND e.proposal_id = ? AND e.id > ? ORDER BY e.id LIMIT ?`
)

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
		var prev, hash []byte
		if err := rows.Scan(&e.ID, &e.ProposalID, &typ, &e.Actor, &e.ActorKind, &e.Via, &status, &e.Detail, &at, &e.Seq, &prev, &hash); err != nil {
			return nil, fmt.Errorf("sqlitestore: %s: %w", what, classify(err))
		}
		e.PrevHash, e.Hash = hex.EncodeToString(prev), hex.EncodeToString(hash)
		e.Type, e.Status, e.At = store.EventType(typ), store.Status(status), fromNanos(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", what, classify(err))
	}
	return out, nil
}

// The checkpoints (migration 0015): the chains' heads, each tenant's newest
// checkpoint, and a tenant's checkpoints.
const (
	// chainHeadsSQL walks the tenants of audit_blocks in byte order, one
	// index probe each (not a scan of every block), and reads each one's
	// last block and newest checkpoint. The walk stops after ?2 rows, or at
	// the NULL that ends it when fewer tenants are left.
	chainHeadsSQL = `WITH RECURSIVE t(tenant) AS (
			SELECT (SELECT min(tenant) FROM audit_blocks WHERE tenant > ?1)
			UNION ALL
			SELECT (SELECT min(b.tenant) FROM audit_blocks b WHERE b.tenant > t.tenant) FROM t WHERE t.tenant IS NOT NULL
			LIMIT ?2
		)
		SELECT t.tenant, h.last_seq, substr(h.hashes, -32, 32),
			k.seq, k.hash, k.at, k.key_id, k.signature
		FROM t
		JOIN audit_blocks h ON h.tenant = t.tenant AND h.last_seq = (SELECT max(last_seq) FROM audit_blocks x WHERE x.tenant = t.tenant)
		LEFT JOIN audit_checkpoints k ON k.tenant = t.tenant AND k.seq = (SELECT max(seq) FROM audit_checkpoints y WHERE y.tenant = t.tenant)
		WHERE t.tenant IS NOT NULL
		ORDER BY t.tenant`
	// writeCheckpointSQL stores a checkpoint, or signs an idle chain's
	// again: one for a stored seq replaces it only with the same hash and a
	// later time.
	writeCheckpointSQL = `INSERT INTO audit_checkpoints (tenant, seq, hash, at, key_id, signature) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, seq) DO UPDATE SET at = excluded.at, key_id = excluded.key_id, signature = excluded.signature
		WHERE audit_checkpoints.hash = excluded.hash AND audit_checkpoints.at < excluded.at`
	listCheckpointsSQL = `SELECT seq, hash, at, key_id, signature FROM audit_checkpoints
		WHERE tenant = ? AND seq > ? ORDER BY seq LIMIT ?`
)

// ListChainHeads implements store.Store.
func (s *Store) ListChainHeads(ctx context.Context, params *store.ListChainHeadsParams) ([]*store.TenantChain, error) {
	limit := store.PageLimit(params.Limit)
	rows, err := s.rq.QueryContext(ctx, chainHeadsSQL, params.AfterTenant, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list chain heads: %w", classify(err))
	}
	defer rows.Close()
	var out []*store.TenantChain
	for rows.Next() {
		tc := &store.TenantChain{}
		var hash []byte
		var seq, at sql.NullInt64
		var cpHash, keyID, sig sql.NullString
		if err := rows.Scan(&tc.Tenant, &tc.Head.Seq, &hash, &seq, &cpHash, &at, &keyID, &sig); err != nil {
			return nil, fmt.Errorf("sqlitestore: list chain heads: %w", classify(err))
		}
		tc.Head.Hash = hex.EncodeToString(hash)
		if seq.Valid {
			tc.Checkpoint = &store.Checkpoint{Tenant: tc.Tenant, Seq: seq.Int64, Hash: cpHash.String, At: fromNanos(at.Int64), KeyID: keyID.String, Signature: sig.String}
		}
		out = append(out, tc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list chain heads: %w", classify(err))
	}
	return out, nil
}

// WriteCheckpoints implements store.Store: the lease is renewed, fenced by
// its token, and the checkpoints stored, in one write.
func (s *Store) WriteCheckpoints(ctx context.Context, params *store.WriteCheckpointsParams) (*store.SealLease, error) {
	if err := store.ValidateCheckpoints(params); err != nil {
		return nil, err
	}
	var out *store.SealLease
	err := s.write(ctx, func(tx *wtx, now time.Time) error {
		l := &store.SealLease{Token: params.Token, ExpiresAt: now.Add(params.LeaseDuration)}
		err := tx.QueryRowContext(ctx, `UPDATE seal_lease SET expires_at = ? WHERE name = ? AND token = ? RETURNING owner`,
			l.ExpiresAt.UnixNano(), sealLeaseName, params.Token).Scan(&l.Owner)
		if errors.Is(err, sql.ErrNoRows) {
			return store.CheckpointLeaseLost()
		}
		if err != nil {
			return err
		}
		for _, c := range params.Checkpoints {
			if _, err := tx.ExecContext(ctx, writeCheckpointSQL, c.Tenant, c.Seq, c.Hash, c.At.UnixNano(), c.KeyID, c.Signature); err != nil {
				return fmt.Errorf("checkpoint of %s at seq %d: %w", c.Tenant, c.Seq, err)
			}
		}
		out = l
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: write audit checkpoints: %w", classify(err))
	}
	return out, nil
}

// ListCheckpoints implements store.Store.
func (s *Store) ListCheckpoints(ctx context.Context, params *store.ListCheckpointsParams) ([]*store.Checkpoint, error) {
	limit := store.PageLimit(params.Limit)
	rows, err := s.rq.QueryContext(ctx, listCheckpointsSQL, params.Tenant, params.After, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list audit checkpoints: %w", classify(err))
	}
	defer rows.Close()
	var out []*store.Checkpoint
	for rows.Next() {
		c := &store.Checkpoint{Tenant: params.Tenant}
		var at int64
		if err := rows.Scan(&c.Seq, &c.Hash, &at, &c.KeyID, &c.Signature); err != nil {
			return nil, fmt.Errorf("sqlitestore: list audit checkpoints: %w", classify(err))
		}
		c.At = fromNanos(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list audit checkpoints: %w", classify(err))
	}
	return out, nil
}
