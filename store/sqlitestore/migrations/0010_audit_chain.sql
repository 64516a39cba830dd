-- 0010_audit_chain: every tenant's events form a hash chain (store/audit.go).
-- An event is written unsealed (seq, prev_hash and hash NULL) and sealed
-- after it commits by the one sealer holding seal_lease, so that writers
-- never wait for the chain. events_unsealed holds just the unsealed rows,
-- in id order, the sealer's queue; events_chain is each tenant's chain in
-- seq order, and being unique it refuses two events one seq (a fork)
-- whatever a sealer does. Existing events are sealed by the first sealer
-- that runs. ADD COLUMN without a default rewrites no rows.
ALTER TABLE events ADD COLUMN seq INTEGER;
ALTER TABLE events ADD COLUMN prev_hash TEXT;
ALTER TABLE events ADD COLUMN hash TEXT;
CREATE UNIQUE INDEX events_chain ON events (tenant, seq) WHERE seq IS NOT NULL;
CREATE INDEX events_unsealed ON events (id) WHERE seq IS NULL;

-- The sealing lease: at most one row, named 'audit'. Its token fences
-- every seal; expires_at is Unix nanoseconds by the store's clock.
CREATE TABLE seal_lease (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    token      TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;
