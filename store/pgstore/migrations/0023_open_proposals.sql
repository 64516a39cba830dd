-- 0023_open_proposals: a decision updates its proposal in place (HOT),
-- inserting into none of its indexes, as a claim and a settlement have done
-- since 0022.
--
-- A decision moves a proposal out of pending, and five partial indexes of
-- proposals (the inbox's, the replacement's, the escalation's, the
-- reminder's and the expiry's) named status in their predicates, through
-- the generated columns undecided and expiring. So each decision was a new
-- row version with an entry in every index of proposals: the primary key,
-- the tool call's, the confirmation's and both listings' (docs/profiles/
-- scale.md, change 16).
--
-- Those five indexes move to a table of their own, open_proposals: a row
-- for each proposal that may still expire (pending, or approved in wait or
-- two-phase mode and not yet taken by its caller: store.Due's statuses),
-- with the columns the five indexes and their queries read, every one
-- fixed at creation but status (undecided), escalate_at and remind_at. The statement
-- that writes a proposal writes its row here too (openproposals.go).
CREATE TABLE open_proposals (
    id              TEXT COLLATE "C" PRIMARY KEY,
    tenant          TEXT COLLATE "C" NOT NULL,
    thread_id       TEXT COLLATE "C" NOT NULL,
    requester       TEXT COLLATE "C" NOT NULL,
    action          TEXT COLLATE "C" NOT NULL,
    replacement_key TEXT COLLATE "C" NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    -- status = 'pending'; false for an approval its caller has yet to take.
    undecided       BOOLEAN NOT NULL,
    escalate_at     TIMESTAMPTZ,
    remind_at       TIMESTAMPTZ,
    remind_every    BIGINT NOT NULL -- nanoseconds; 0: never reminded
);

INSERT INTO open_proposals (id, tenant, thread_id, requester, action, replacement_key, created_at, expires_at,
        undecided, escalate_at, remind_at, remind_every)
    SELECT id, tenant, thread_id, requester, action, replacement_key, created_at, expires_at,
        status = 'pending', escalate_at, remind_at, remind_every
    FROM proposals WHERE expiring;

CREATE INDEX open_proposals_pending ON open_proposals (tenant, created_at DESC, id DESC) WHERE undecided;
CREATE INDEX open_proposals_replacement ON open_proposals (tenant, thread_id, requester, action, replacement_key)
    WHERE undecided AND replacement_key <> '';
CREATE INDEX open_proposals_escalation ON open_proposals (escalate_at, id) WHERE undecided AND escalate_at IS NOT NULL;
-- A reminder without a positive interval is never due (store.Remindable).
CREATE INDEX open_proposals_reminder ON open_proposals (remind_at, id)
    WHERE undecided AND remind_at IS NOT NULL AND remind_every > 0;
CREATE INDEX open_proposals_expiry ON open_proposals (expires_at, id);

DROP INDEX proposals_pending;
DROP INDEX proposals_replacement;
DROP INDEX proposals_escalation;
DROP INDEX proposals_reminder;
DROP INDEX proposals_expiry;
ALTER TABLE proposals DROP COLUMN undecided, DROP COLUMN expiring;

ANALYZE open_proposals;
