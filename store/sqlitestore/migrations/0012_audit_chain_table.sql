-- 0012_audit_chain_table: the audit chain moves out of events into a table
-- of its own, so that sealing appends narrow rows instead of rewriting
-- every event row (and maintaining two partial indexes on events for it).
-- On SQLite event ids are assigned under the write lock, in commit order,
-- so the sealer's queue is simply every event above audit_sealed.through.

-- The chain: event_id is the rowid, appended in increasing order; seq is a
-- tenant's position, unique, so that two events can never share one (a
-- fork) whatever a sealer does. Hashes are the 32 bytes of SHA-256 (the
-- genesis prev_hash is empty).
CREATE TABLE audit_chain (
    event_id  INTEGER PRIMARY KEY,
    tenant    TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    prev_hash BLOB NOT NULL,
    hash      BLOB NOT NULL,
    UNIQUE (tenant, seq)
) STRICT;
INSERT INTO audit_chain (event_id, tenant, seq, prev_hash, hash)
    SELECT id, tenant, seq, unhex(prev_hash), unhex(hash) FROM events WHERE seq IS NOT NULL ORDER BY id;

-- Where sealing stands: every event up to through is chained. The sealer
-- sealed in id order, so what it sealed before is a prefix.
CREATE TABLE audit_sealed (
    name    TEXT PRIMARY KEY,
    through INTEGER NOT NULL
) STRICT;
INSERT INTO audit_sealed (name, through)
    VALUES ('audit', COALESCE((SELECT max(id) FROM events WHERE seq IS NOT NULL), 0));

DROP INDEX events_chain;
DROP INDEX events_unsealed;
ALTER TABLE events DROP COLUMN seq;
ALTER TABLE events DROP COLUMN prev_hash;
ALTER TABLE events DROP COLUMN hash;
