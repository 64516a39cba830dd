-- 0021_passkeys: the passkeys (WebAuthn credentials) step-up rules ask for,
-- the single-use links that enrol an actor's first, and the single-use
-- challenges of passkey ceremonies. credential and session are opaque
-- records of package passkey (JSON); hash columns are the SHA-256 (hex) of
-- what a browser presents, never the token or challenge itself. Times are
-- Unix nanoseconds.
CREATE TABLE passkeys (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    actor        TEXT NOT NULL,
    name         TEXT NOT NULL,
    credential   BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
) STRICT, WITHOUT ROWID;

-- An actor's passkeys are read at every step-up.
CREATE INDEX passkeys_actor ON passkeys (tenant, actor, created_at);

CREATE TABLE passkey_enrollments (
    hash       TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    actor      TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    spent_at   INTEGER
) STRICT, WITHOUT ROWID;

CREATE INDEX passkey_enrollments_actor ON passkey_enrollments (tenant, actor);

CREATE TABLE passkey_challenges (
    hash            TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    actor           TEXT NOT NULL,
    purpose         TEXT NOT NULL,
    proposal_id     TEXT NOT NULL,
    input_digest    TEXT NOT NULL,
    enrollment_hash TEXT NOT NULL,
    session         BLOB NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX passkey_challenges_actor ON passkey_challenges (tenant, actor, expires_at);
