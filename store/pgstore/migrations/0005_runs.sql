-- 0005_runs: conversations. Messages of every role (a human's, with its
-- sender; an assistant's, with its tool calls; a tool's result, with the
-- call it answers), and runs: one model turn each, running → parked →
-- running → finished | failed | cancelled. threads.run_id names the run
-- that holds the thread ('' when none): starting a run is a compare-and-set
-- on it. ADD COLUMN with a constant default rewrites no rows, so the
-- upgrade takes no time on a large store; existing rows read as empty.
ALTER TABLE threads ADD COLUMN run_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN run_id TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN tool_calls JSONB;           -- [{id, action, input}]
ALTER TABLE messages ADD COLUMN tool_call_id TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN result BYTEA;               -- the tool's result, JSON verbatim

-- seq orders a thread's runs (newest first in listings). The lease is all
-- NULL when no process holds the run; times are on the application's
-- clock.
CREATE TABLE runs (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               TEXT COLLATE "C" NOT NULL UNIQUE,
    tenant           TEXT COLLATE "C" NOT NULL,
    thread_id        TEXT COLLATE "C" NOT NULL,
    agent            TEXT NOT NULL,
    roles            TEXT[] NOT NULL,                -- the owner's roles at the start
    status           TEXT NOT NULL CHECK (status IN ('running', 'parked', 'finished', 'failed', 'cancelled')),
    proposal_ids     TEXT[] NOT NULL,
    ready            BOOLEAN NOT NULL DEFAULT false,      -- parked, and its proposal left pending
    awaiting         TEXT COLLATE "C" NOT NULL,  -- the proposal a parked run waits for
    steps            INTEGER NOT NULL,
    error            TEXT NOT NULL,
    lease_owner      TEXT,
    lease_token      TEXT COLLATE "C",
    lease_generation BIGINT,
    lease_expires_at TIMESTAMPTZ,
    version          BIGINT NOT NULL,
    started_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL,
    ended_at         TIMESTAMPTZ,
    FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
);

CREATE INDEX runs_thread ON runs (tenant, thread_id, seq);

-- The runs ClaimRuns picks, longest unchanged first: running ones (their
-- lease may have run out) and parked ones marked ready. A parked run is
-- marked ready by the transition that moves its proposal out of pending
-- (runs_awaiting finds it), or when it parks on a proposal already decided;
-- so a claim never looks at the parked runs still waiting, however many.
CREATE INDEX runs_ready ON runs (updated_at, id) WHERE status = 'running' OR (status = 'parked' AND ready);
CREATE INDEX runs_awaiting ON runs (awaiting) WHERE status = 'parked';

-- Every open run, for ClaimRuns' sweep (store.ClaimRunsParams.Sweep).
CREATE INDEX runs_open ON runs (updated_at, id) WHERE status IN ('running', 'parked');
