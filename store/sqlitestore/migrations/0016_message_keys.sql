-- 0016_message_keys: a message id is its thread's, not the database's.
-- Message ids were UNIQUE across every tenant and thread, so a client
-- choosing an id (AG-UI sends its own) could take one that another thread
-- or tenant needed, and learn whether it existed; outcome messages, whose
-- ids were derived from their proposal, could be taken before they were
-- written, and were then never admitted. Ids are now unique per (tenant,
-- thread), and an outcome message is kept once per (tenant, proposal,
-- outcome status) by a key of its own, outcome_status, which only the
-- server writes ('' on every other message).
--
-- SQLite cannot drop a UNIQUE constraint, so the table is rebuilt: every
-- row is copied with its seq (the threads' order), AUTOINCREMENT's
-- high-water mark is carried over (so that no seq is ever drawn twice, as
-- before), and the indexes are made again. Nothing refers to messages, so
-- dropping the old table deletes nothing else; the rename moves the new
-- table's sqlite_sequence row to the old name.
CREATE TABLE messages_0015 (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    id             TEXT NOT NULL,
    tenant         TEXT NOT NULL,
    thread_id      TEXT NOT NULL,
    role           TEXT NOT NULL,
    text           TEXT NOT NULL,
    proposal_id    TEXT NOT NULL,
    outcome        TEXT,                    -- JSON outcome
    created_at     INTEGER NOT NULL,
    sender         TEXT NOT NULL DEFAULT '',
    run_id         TEXT NOT NULL DEFAULT '',
    tool_calls     TEXT,                    -- JSON [{id, action, input, client}]
    tool_call_id   TEXT NOT NULL DEFAULT '',
    result         BLOB,                    -- the tool's result, JSON verbatim
    decision       INTEGER NOT NULL DEFAULT 0,
    outcome_status TEXT NOT NULL DEFAULT '', -- an outcome message's status; '' otherwise
    UNIQUE (tenant, thread_id, id),
    FOREIGN KEY (tenant, thread_id) REFERENCES threads (tenant, id) ON DELETE CASCADE
) STRICT;

INSERT INTO messages_0015 (seq, id, tenant, thread_id, role, text, proposal_id, outcome, created_at,
        sender, run_id, tool_calls, tool_call_id, result, decision, outcome_status)
    SELECT seq, id, tenant, thread_id, role, text, proposal_id, outcome, created_at,
        sender, run_id, tool_calls, tool_call_id, result, decision,
        CASE WHEN outcome IS NULL THEN '' ELSE COALESCE(json_extract(outcome, '$.status'), '') END
    FROM messages ORDER BY seq;

DELETE FROM sqlite_sequence WHERE name = 'messages_0015';
INSERT INTO sqlite_sequence (name, seq) SELECT 'messages_0015', seq FROM sqlite_sequence WHERE name = 'messages';

DROP TABLE messages;
ALTER TABLE messages_0015 RENAME TO messages;

CREATE INDEX messages_thread ON messages (tenant, thread_id, seq);
CREATE UNIQUE INDEX messages_outcome ON messages (tenant, proposal_id, outcome_status) WHERE outcome_status <> '';
