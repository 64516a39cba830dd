-- 0015_audit_checkpoints: signed checkpoints of the audit chain. With a
-- signing key, the sealer holding seal_lease signs every tenant's chain
-- head every checkpoint_every, so that a chain rewritten or cut short in
-- this file, by anyone without the key, no longer verifies (docs/audit.md).
-- A tenant has at most one checkpoint a seq: an idle chain signed again
-- replaces the one at its seq when the hash is the same and the time later
-- (sqlitestore's writeCheckpointSQL), so the table grows with the chain,
-- not with time. hash is lowercase hex, as signed; at is Unix nanoseconds,
-- signed as its RFC 3339 spelling; signature is standard base64.
CREATE TABLE audit_checkpoints (
    tenant    TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    hash      TEXT NOT NULL,
    at        INTEGER NOT NULL,
    key_id    TEXT NOT NULL,
    signature TEXT NOT NULL,
    PRIMARY KEY (tenant, seq),
    CHECK (seq >= 1)
) STRICT, WITHOUT ROWID;
