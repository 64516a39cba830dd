-- 0013_message_keys: a message id is its thread's, not the database's.
-- Message ids were UNIQUE across every tenant and thread, so a client
-- choosing an id (AG-UI sends its own) could take one that another thread
-- or tenant needed, and learn whether it existed; outcome messages, whose
-- ids were derived from their proposal, could be taken before they were
-- written, and were then never admitted. Ids are now unique per (tenant,
-- thread), and an outcome message is kept once per (tenant, proposal,
-- outcome status) by a key of its own, outcome_status, which only the
-- server writes ('' on every other message). Only outcome messages are
-- rewritten to fill it in.
ALTER TABLE messages ADD COLUMN outcome_status TEXT COLLATE "C" NOT NULL DEFAULT '';
UPDATE messages SET outcome_status = COALESCE(outcome->>'status', '') WHERE outcome IS NOT NULL;

ALTER TABLE messages DROP CONSTRAINT messages_id_key;
ALTER TABLE messages ADD CONSTRAINT messages_thread_message_key UNIQUE (tenant, thread_id, id);
CREATE UNIQUE INDEX messages_outcome ON messages (tenant, proposal_id, outcome_status) WHERE outcome_status <> '';
