-- 0018_passkeys: the passkeys (WebAuthn credentials) step-up rules ask for,
-- the single-use links that enrol an actor's first, and the single-use
-- challenges of passkey ceremonies. credential and session are opaque
-- records of package passkey (JSON); hash columns are the SHA-256 (hex) of
-- what a browser presents, never the token or challenge itself.
CREATE TABLE passkeys (
    id           TEXT COLLATE "C" PRIMARY KEY,
    tenant       TEXT COLLATE "C" NOT NULL,
    actor        TEXT COLLATE "C" NOT NULL,
    name         TEXT NOT NULL,
    credential   BYTEA NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ
);

-- An actor's passkeys are read at every step-up.
CREATE INDEX passkeys_actor ON passkeys (tenant, actor, created_at);

CREATE TABLE passkey_enrollments (
    hash       TEXT COLLATE "C" PRIMARY KEY,
    tenant     TEXT COLLATE "C" NOT NULL,
    actor      TEXT COLLATE "C" NOT NULL,
    created_by TEXT COLLATE "C" NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    spent_at   TIMESTAMPTZ
);

CREATE INDEX passkey_enrollments_actor ON passkey_enrollments (tenant, actor);

CREATE TABLE passkey_challenges (
    hash            TEXT COLLATE "C" PRIMARY KEY,
    tenant          TEXT COLLATE "C" NOT NULL,
    actor           TEXT COLLATE "C" NOT NULL,
    purpose         TEXT COLLATE "C" NOT NULL,
    proposal_id     TEXT COLLATE "C" NOT NULL,
    input_digest    TEXT COLLATE "C" NOT NULL,
    enrollment_hash TEXT COLLATE "C" NOT NULL,
    session         BYTEA NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL
);

CREATE INDEX passkey_challenges_actor ON passkey_challenges (tenant, actor, expires_at);
