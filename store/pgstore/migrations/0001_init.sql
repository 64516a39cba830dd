-- 0001_init: the first schema. Applied migrations are never edited; change the
-- schema with a new file.
--
-- Migrate runs every file with search_path set to the store's schema, so the
-- names here are unqualified. Times are timestamptz (microseconds, UTC).
-- Identifiers that are compared or ordered are COLLATE "C": byte order, as Go
-- compares strings, and cheaper than a linguistic collation. Raw JSON the
-- caller sent is bytea, kept byte for byte; JSON that is only read back whole
-- is jsonb. A NULL array or JSON column is a nil slice, an empty one an empty
-- slice.

-- meta holds per-database secrets and settings, such as the cursor-signing
-- key (inserted by the migration code, from crypto/rand).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE proposals (
    id                   TEXT COLLATE "C" PRIMARY KEY,
    tenant               TEXT COLLATE "C" NOT NULL,
    requester            TEXT COLLATE "C" NOT NULL,
    requester_roles      TEXT[],
    thread_id            TEXT COLLATE "C" NOT NULL,
    run_id               TEXT COLLATE "C" NOT NULL,
    tool_call_id         TEXT COLLATE "C" NOT NULL,
    action               TEXT COLLATE "C" NOT NULL,
    action_version       TEXT COLLATE "C" NOT NULL,
    input                BYTEA,           -- validated input, verbatim
    raw_input            BYTEA,           -- input as the caller sent it, verbatim
    input_digest         TEXT COLLATE "C" NOT NULL,
    preview              TEXT NOT NULL,
    state_version        TEXT NOT NULL,
    confirmation         JSONB NOT NULL,  -- {title, verb}
    confirmation_id      TEXT COLLATE "C" NOT NULL, -- '' when none
    mode                 TEXT NOT NULL CHECK (mode IN ('wait', 'two_phase', 'independent')),
    status               TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'executing', 'succeeded',
                             'failed', 'reconciling', 'unknown', 'rejected', 'expired', 'superseded', 'cancelled')),
    approvers            TEXT[],
    quorum               INTEGER NOT NULL,
    forbid_self_approval BOOLEAN NOT NULL,
    channels             TEXT[],
    remember_scopes      TEXT[],
    grant_any_input      BOOLEAN NOT NULL,
    grant_ttl            BIGINT NOT NULL, -- nanoseconds
    replacement_key      TEXT COLLATE "C" NOT NULL,
    decisions            JSONB,           -- array of decisions
    expires_at           TIMESTAMPTZ NOT NULL, -- the deadline, on the application's clock
    operation_id         TEXT NOT NULL,
    attempt              INTEGER NOT NULL,
    -- The lease: all four NULL when no one holds it. lease_expires_at is on
    -- the database's clock.
    lease_owner          TEXT,
    lease_token          TEXT COLLATE "C",
    lease_generation     BIGINT,
    lease_expires_at     TIMESTAMPTZ,
    consumed_by          TEXT NOT NULL,
    next_attempt_at      TIMESTAMPTZ,     -- the application's clock
    outcome              JSONB,           -- NULL until settled
    version              BIGINT NOT NULL,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL,
    CONSTRAINT proposals_lease_whole CHECK (
        (lease_token IS NULL) = (lease_owner IS NULL) AND
        (lease_token IS NULL) = (lease_generation IS NULL) AND
        (lease_token IS NULL) = (lease_expires_at IS NULL))
);

-- Idempotent creation: one proposal per tool call. CreateProposal names
-- these columns in ON CONFLICT.
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

-- Worker claims, in claim order: the row that has waited longest since its
-- last change first. The claim query repeats the WHERE clause verbatim, so
-- the planner can prove it implies the index predicate (store.Claimable).
CREATE INDEX proposals_claim ON proposals (updated_at, id)
    WHERE (status = 'approved' AND mode = 'independent') OR status IN ('executing', 'reconciling');

-- The expiry sweep, most overdue first; the same rule as store.Due.
CREATE INDEX proposals_expiry ON proposals (expires_at, id)
    WHERE status = 'pending' OR (status = 'approved' AND mode IN ('wait', 'two_phase'));

-- A thread is owned by its first caller. Proposals outlive their thread, so
-- they hold no foreign key to it.
CREATE TABLE threads (
    tenant     TEXT COLLATE "C" NOT NULL,
    id         TEXT COLLATE "C" NOT NULL,
    owner      TEXT COLLATE "C" NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant, id)
);

-- Outcome messages. id is the Message.ID of store.Change.Admit, deterministic
-- per proposal and status, so ON CONFLICT DO NOTHING admits each outcome
-- once. seq orders a thread's messages. Deleting a thread deletes its
-- messages.
CREATE TABLE messages (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          TEXT COLLATE "C" NOT NULL UNIQUE,
    tenant      TEXT COLLATE "C" NOT NULL,
    thread_id   TEXT COLLATE "C" NOT NULL,
    role        TEXT NOT NULL,
    text        TEXT NOT NULL,
    proposal_id TEXT COLLATE "C" NOT NULL,
    outcome     JSONB,
    created_at  TIMESTAMPTZ NOT NULL,
    FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

CREATE INDEX messages_thread ON messages (tenant, thread_id, seq);

-- Remembered approvals. seq gives "newest first" a strict order even when
-- several grants share a timestamp.
CREATE TABLE grants (
    seq                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                 TEXT COLLATE "C" NOT NULL UNIQUE,
    tenant             TEXT COLLATE "C" NOT NULL,
    requester          TEXT COLLATE "C" NOT NULL,
    scope              TEXT NOT NULL CHECK (scope IN ('run', 'thread')),
    thread_id          TEXT COLLATE "C" NOT NULL,
    run_id             TEXT COLLATE "C" NOT NULL,
    action             TEXT COLLATE "C" NOT NULL,
    action_version     TEXT COLLATE "C" NOT NULL,
    input_digest       TEXT COLLATE "C" NOT NULL, -- '' matches any input
    origin_proposal_id TEXT COLLATE "C" NOT NULL,
    granted_by         TEXT NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    activated_at       TIMESTAMPTZ,
    expires_at         TIMESTAMPTZ,
    revoked_at         TIMESTAMPTZ,
    revoked_by         TEXT NOT NULL
);

CREATE INDEX grants_match ON grants (tenant, requester, action, action_version, thread_id);
CREATE INDEX grants_list ON grants (tenant, seq);
CREATE INDEX grants_inactive ON grants (origin_proposal_id) WHERE activated_at IS NULL;

-- The audit trail. Ids come from an identity sequence: they grow, but they
-- are handed out when a row is inserted, not when its transaction commits
-- (see the package documentation on reading events as a stream).
CREATE TABLE events (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant      TEXT COLLATE "C" NOT NULL,
    proposal_id TEXT COLLATE "C" NOT NULL,
    type        TEXT NOT NULL,
    actor       TEXT NOT NULL,
    via         TEXT NOT NULL,
    status      TEXT NOT NULL,
    detail      TEXT NOT NULL,
    at          TIMESTAMPTZ NOT NULL
);

CREATE INDEX events_tenant ON events (tenant, id);
CREATE INDEX events_proposal ON events (tenant, proposal_id, id);
