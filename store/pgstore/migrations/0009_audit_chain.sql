-- 0009_audit_chain: every tenant's events form a hash chain (store/audit.go,
-- pgstore/audit.go). Events stay insert-only: the sealer, the one process
-- holding seal_lease, appends each committed event to audit_chain in id
-- order after it commits, so that writers never wait for the chain and no
-- event row is ever rewritten for it.

-- The chain: seq is a tenant's position, unique, so that two events can
-- never share one (a fork) whatever a sealer does; an event is chained at
-- most once.
CREATE TABLE audit_chain (
    tenant    TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL,
    event_id  BIGINT NOT NULL UNIQUE,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL,
    PRIMARY KEY (tenant, seq)
);

-- Where sealing stands: every event id up to through is chained or can
-- never exist (its transaction rolled back). A hole the sealer met (an id
-- below gap_upto it could not see) is known to be final once every
-- transaction older than gap_xmax, the first transaction id unassigned
-- when the hole was seen, has ended.
CREATE TABLE audit_sealed (
    name     TEXT PRIMARY KEY,
    through  BIGINT NOT NULL,
    gap_upto BIGINT NOT NULL,
    gap_xmax BIGINT NOT NULL
);
INSERT INTO audit_sealed (name, through, gap_upto, gap_xmax) VALUES ('audit', 0, 0, 0);

-- That a hole's transaction is older than gap_xmax holds only if a
-- transaction has its id before it draws an event id. An INSERT's defaults
-- are computed before its row is written, which is when a transaction that
-- has written nothing yet is given its id; so the event id is drawn by a
-- function that asks for the transaction id first. The sequence and the
-- function are bound by OID here, whatever the callers' search_path.
CREATE FUNCTION next_event_id(seq regclass) RETURNS bigint
    LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_current_xact_id();
    RETURN nextval(seq);
END
$$;
ALTER TABLE events ALTER COLUMN id DROP IDENTITY;
CREATE SEQUENCE events_id_seq OWNED BY events.id;
SELECT setval('events_id_seq', COALESCE((SELECT max(id) FROM events), 0) + 1, false);
ALTER TABLE events ALTER COLUMN id SET DEFAULT next_event_id('events_id_seq'::regclass);

-- The sealing lease: at most one row, named 'audit'. Its token fences
-- every seal; expires_at is judged by the database's clock.
CREATE TABLE seal_lease (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    token      TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
