-- 0013_audit_chain_blocks: the audit chain is stored a block at a time.
-- A seal used to append one audit_chain row per event, two b-tree inserts
-- each (the rowid and the (tenant, seq) key) through the one writer that
-- every write of the process shares: about 6 of the seal's 10 µs an event,
-- and on the busiest path (B3) most of what the chain cost. A seal now
-- writes one row per tenant it sealed events of: the events' ids, in seq
-- order, and their hashes side by side. Nothing the chain says changes:
-- every event still has its seq, its prev_hash and its own hash, which the
-- view audit_chain below shows one row an event, as the table did.

-- A block: the tenant's events first_seq..last_seq. last_id, the id of its
-- last event, is the rowid (event ids are unique, and a tenant's blocks
-- follow each other in id order as in seq order), so that the block of an
-- event is the tenant's first one whose last_id is at or above the event's
-- id. ids is a JSON array of the events' ids in seq order; hashes holds
-- their hashes, 32 bytes each (SHA-256), in the same order; prev_hash is the
-- hash before first_seq (the previous block's last; empty at genesis).
-- (tenant, last_seq) is unique, and a seal appends a block only where the
-- tenant's chain ends (sqlitestore's sealBlockSQL), so that two events can
-- never share a seq (a fork) whatever a sealer does.
CREATE TABLE audit_blocks (
    last_id   INTEGER PRIMARY KEY,
    tenant    TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    ids       TEXT NOT NULL,
    prev_hash BLOB NOT NULL,
    hashes    BLOB NOT NULL,
    UNIQUE (tenant, last_seq),
    CHECK (first_seq >= 1 AND last_seq >= first_seq),
    CHECK (json_array_length(ids) = last_seq - first_seq + 1),
    CHECK (length(hashes) = 32 * (last_seq - first_seq + 1))
) STRICT;
-- A tenant's blocks in last_id (rowid) order: the block of an event.
CREATE INDEX audit_blocks_tenant ON audit_blocks (tenant);

-- The chain sealed so far moves over in blocks of at most 1,000 events (a
-- seal's default batch), so that reading one event's link never reads more.
-- A block holds consecutive seqs only: were a link missing (deleted by
-- hand), the blocks on either side of it keep the gap, for verification to
-- name, as it did.
INSERT INTO audit_blocks (last_id, tenant, first_seq, last_seq, ids, prev_hash, hashes)
    WITH links AS (
        SELECT c.event_id, c.tenant, c.seq, c.prev_hash, c.hash,
               c.seq - row_number() OVER (PARTITION BY c.tenant ORDER BY c.seq) AS run
        FROM audit_chain c
    ), placed AS (
        SELECT l.*, first_value(l.prev_hash) OVER (PARTITION BY l.tenant, l.run, (l.seq - 1) / 1000 ORDER BY l.seq) AS block_prev
        FROM links l
    )
    SELECT max(event_id), tenant, min(seq), max(seq),
           json_group_array(event_id ORDER BY seq), min(block_prev),
           unhex(group_concat(hex(hash), '' ORDER BY seq))
    FROM placed
    GROUP BY tenant, run, (seq - 1) / 1000
    ORDER BY tenant, min(seq);

DROP TABLE audit_chain;

-- The chain one row an event, as audit_chain was: for reading by hand, by
-- tests and by tools. The store's own queries read audit_blocks directly.
CREATE VIEW audit_chain (event_id, tenant, seq, prev_hash, hash) AS
    SELECT j.value, b.tenant, b.first_seq + j.key,
           CASE j.key WHEN 0 THEN b.prev_hash ELSE substr(b.hashes, 32 * j.key - 31, 32) END,
           substr(b.hashes, 32 * j.key + 1, 32)
    FROM audit_blocks b, json_each(b.ids) j;
