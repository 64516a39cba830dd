-- 0003_sessions: the inbox's signed-in browsers, so that a session survives
-- a restart and holds in every process on the schema. id is the SHA-256
-- (hex) of the session cookie and credential_sha256 that of the key or
-- token pasted at sign-in: nothing here is what a browser presents.
CREATE TABLE sessions (
    id                TEXT COLLATE "C" PRIMARY KEY,
    tenant            TEXT COLLATE "C" NOT NULL,
    actor             TEXT COLLATE "C" NOT NULL,
    roles             TEXT[],
    credential_sha256 TEXT COLLATE "C" NOT NULL,
    revocable         BOOLEAN NOT NULL,
    csrf              TEXT COLLATE "C" NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL,
    expires_at        TIMESTAMPTZ NOT NULL
);

-- The sweep of expired sessions reads them by expiry.
CREATE INDEX sessions_expiry ON sessions (expires_at, id);
