-- 0001_init: the first schema. Applied migrations are never edited; change the
-- schema with a new file.
--
-- Times are INTEGER Unix nanoseconds (UTC). JSON columns hold what is only
-- ever read back whole; everything a query filters, orders or guards on is a
-- scalar column. A NULL JSON column is a nil slice, '[]' an empty one.

-- meta holds per-database secrets and settings, such as the cursor-signing
-- key (inserted by the migration code, from crypto/rand).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

CREATE TABLE proposals (
    id                   TEXT PRIMARY KEY,
    tenant               TEXT NOT NULL,
    requester            TEXT NOT NULL,
    requester_roles      TEXT,            -- JSON array of strings
    thread_id            TEXT NOT NULL,
    run_id               TEXT NOT NULL,
    tool_call_id         TEXT NOT NULL,
    action               TEXT NOT NULL,
    action_version       TEXT NOT NULL,
    input                TEXT,            -- validated input, verbatim
    raw_input            TEXT,            -- input as the caller sent it, verbatim
    input_digest         TEXT NOT NULL,
    preview              TEXT NOT NULL,
    state_version        TEXT NOT NULL,
    confirmation         TEXT NOT NULL,   -- JSON {title, verb}
    confirmation_id      TEXT NOT NULL,   -- '' when none
    mode                 TEXT NOT NULL,
    status               TEXT NOT NULL,
    approvers            TEXT,            -- JSON array of strings
    quorum               INTEGER NOT NULL,
    forbid_self_approval INTEGER NOT NULL,
    channels             TEXT,            -- JSON array of strings
    remember_scopes      TEXT,            -- JSON array of strings
    grant_any_input      INTEGER NOT NULL,
    grant_ttl            INTEGER NOT NULL, -- nanoseconds
    replacement_key      TEXT NOT NULL,
    decisions            TEXT,            -- JSON array of decisions
    expires_at           INTEGER NOT NULL,
    operation_id         TEXT NOT NULL,
    attempt              INTEGER NOT NULL,
    -- The lease: all four NULL when no one holds it.
    lease_owner          TEXT,
    lease_token          TEXT,
    lease_generation     INTEGER,
    lease_expires_at     INTEGER,
    consumed_by          TEXT NOT NULL,
    next_attempt_at      INTEGER,
    outcome              TEXT,            -- JSON outcome, NULL until settled
    version              INTEGER NOT NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
) STRICT;

-- Idempotent creation: one proposal per tool call.
CREATE UNIQUE INDEX proposals_tool_call ON proposals (tenant, thread_id, tool_call_id);

-- Two-phase evidence names exactly one proposal.
CREATE UNIQUE INDEX proposals_confirmation ON proposals (tenant, confirmation_id)
    WHERE confirmation_id <> '';

-- Keyset listing, newest first, for a tenant and for one thread.
CREATE INDEX proposals_list ON proposals (tenant, created_at DESC, id DESC);
CREATE INDEX proposals_thread_list ON proposals (tenant, thread_id, created_at DESC, id DESC);

-- Replacement: the pending proposals a new one may supersede.
CREATE INDEX proposals_replacement ON proposals (tenant, thread_id, requester, action, replacement_key)
    WHERE status = 'pending' AND replacement_key <> '';

-- Worker claims, oldest change first. The WHERE clause is repeated verbatim
-- by the claim query (SQLite uses a partial index only for a query whose
-- WHERE clause contains the index's term); see store.Claimable.
CREATE INDEX proposals_claim ON proposals (updated_at)
    WHERE (status = 'approved' AND mode = 'independent') OR status IN ('executing', 'reconciling');

-- The expiry sweep; the same rule as for proposals_claim, see store.Due.
CREATE INDEX proposals_expiry ON proposals (expires_at)
    WHERE status = 'pending' OR (status = 'approved' AND mode IN ('wait', 'two_phase'));

-- A thread is owned by its first caller. Proposals outlive their thread, so
-- they hold no foreign key to it.
CREATE TABLE threads (
    tenant     TEXT NOT NULL,
    id         TEXT NOT NULL,
    owner      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
) STRICT, WITHOUT ROWID;

-- Outcome messages. id is the Message.ID of store.Change.Admit, deterministic
-- per proposal and status, so INSERT OR IGNORE admits each outcome once. seq
-- orders a thread's messages; AUTOINCREMENT needs an INTEGER PRIMARY KEY, so
-- id is UNIQUE rather than the key.
CREATE TABLE messages (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    id          TEXT NOT NULL UNIQUE,
    tenant      TEXT NOT NULL,
    thread_id   TEXT NOT NULL,
    role        TEXT NOT NULL,
    text        TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    outcome     TEXT,                    -- JSON outcome
    created_at  INTEGER NOT NULL,
    FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT;

CREATE INDEX messages_thread ON messages (tenant, thread_id, seq);

-- Remembered approvals. seq gives "newest first" a strict order even when
-- several grants share a timestamp.
CREATE TABLE grants (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    id                 TEXT NOT NULL UNIQUE,
    tenant             TEXT NOT NULL,
    requester          TEXT NOT NULL,
    scope              TEXT NOT NULL,
    thread_id          TEXT NOT NULL,
    run_id             TEXT NOT NULL,
    action             TEXT NOT NULL,
    action_version     TEXT NOT NULL,
    input_digest       TEXT NOT NULL,    -- '' matches any input
    origin_proposal_id TEXT NOT NULL,
    granted_by         TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    activated_at       INTEGER,
    expires_at         INTEGER,
    revoked_at         INTEGER,
    revoked_by         TEXT NOT NULL
) STRICT;

CREATE INDEX grants_match ON grants (tenant, requester, action, action_version, thread_id);
CREATE INDEX grants_list ON grants (tenant, seq);
CREATE INDEX grants_inactive ON grants (origin_proposal_id) WHERE activated_at IS NULL;

-- The audit trail. AUTOINCREMENT never reuses an id, and the single writer
-- assigns ids in commit order, so an id is a resumable stream position.
CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant      TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    type        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    via         TEXT NOT NULL,
    status      TEXT NOT NULL,
    detail      TEXT NOT NULL,
    at          INTEGER NOT NULL
) STRICT;

CREATE INDEX events_tenant ON events (tenant, id);
CREATE INDEX events_proposal ON events (tenant, proposal_id, id);
