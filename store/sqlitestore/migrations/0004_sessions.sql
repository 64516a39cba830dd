-- 0004_sessions: the inbox's signed-in browsers, so that a session survives
-- a restart and holds in every process on the file. id is the SHA-256 (hex)
-- of the session cookie and credential_sha256 that of the key or token
-- pasted at sign-in: nothing here is what a browser presents. roles is a
-- JSON array, NULL for none; revocable is 0 or 1. Times are Unix
-- nanoseconds.
CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    tenant            TEXT NOT NULL,
    actor             TEXT NOT NULL,
    roles             TEXT,
    credential_sha256 TEXT NOT NULL,
    revocable         INTEGER NOT NULL,
    csrf              TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    expires_at        INTEGER NOT NULL
) WITHOUT ROWID;

-- The sweep of expired sessions reads them by expiry.
CREATE INDEX sessions_expiry ON sessions (expires_at, id);
