-- 0012_audit_checkpoints: signed checkpoints of the audit chain. With a
-- signing key, the sealer holding seal_lease signs every tenant's chain
-- head every checkpoint_every, so that a chain rewritten or cut short in
-- this database, by anyone without the key, no longer verifies
-- (docs/audit.md). A tenant has at most one checkpoint a seq: an idle chain
-- signed again replaces the one at its seq when the hash is the same and
-- the time later (pgstore's writeCheckpointsSQL), so the table grows with
-- the chain, not with time. hash is lowercase hex and signature standard
-- base64, as signed; at is signed as its RFC 3339 spelling, to the
-- microsecond this column keeps.
CREATE TABLE audit_checkpoints (
    tenant    TEXT COLLATE "C" NOT NULL,
    seq       BIGINT NOT NULL CHECK (seq >= 1),
    hash      TEXT NOT NULL,
    at        TIMESTAMPTZ NOT NULL,
    key_id    TEXT NOT NULL,
    signature TEXT NOT NULL,
    PRIMARY KEY (tenant, seq)
);
