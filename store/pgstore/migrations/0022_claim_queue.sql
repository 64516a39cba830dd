-- 0022_claim_queue: a proposal's claim and settlement update its row in
-- place (HOT), inserting into none of its indexes.
--
-- An update can stay on its page without new index entries only when no
-- column an index names (in its key or its predicate) changes. Every
-- partial index of proposals named status, and the claim order named
-- updated_at, so each claim and settlement inserted an entry into each of
-- the five indexes the new row version belonged to (docs/profiles/
-- postgres.md, "The drain's floor": the drain's SQL alone ran at × 0.71 of
-- River's; without those entries, × 0.96).
--
-- Two stored generated columns stand for status in the predicates. They
-- change when a proposal is decided (or, for expiring, when a waiting
-- caller's approval is taken), never when it is claimed, renewed or
-- settled. Adding them rewrites the table once.
ALTER TABLE proposals
    ADD COLUMN undecided BOOLEAN GENERATED ALWAYS AS (status = 'pending') STORED,
    ADD COLUMN expiring BOOLEAN GENERATED ALWAYS AS
        (status = 'pending' OR (status = 'approved' AND mode IN ('wait', 'two_phase'))) STORED;

-- Room on each page for the row's next versions (new pages only; the
-- rewrite above leaves its pages full).
ALTER TABLE proposals SET (fillfactor = 50);

DROP INDEX proposals_pending;
CREATE INDEX proposals_pending ON proposals (tenant, created_at DESC, id DESC) WHERE undecided;
DROP INDEX proposals_replacement;
CREATE INDEX proposals_replacement ON proposals (tenant, thread_id, requester, action, replacement_key)
    WHERE undecided AND replacement_key <> '';
DROP INDEX proposals_escalation;
CREATE INDEX proposals_escalation ON proposals (escalate_at, id) WHERE undecided AND escalate_at IS NOT NULL;
DROP INDEX proposals_reminder;
CREATE INDEX proposals_reminder ON proposals (remind_at, id) WHERE undecided AND remind_at IS NOT NULL;
DROP INDEX proposals_expiry;
CREATE INDEX proposals_expiry ON proposals (expires_at, id) WHERE expiring;

-- The claim order leaves proposals: one row per proposal a worker may claim
-- by its status (approved and independent, executing, reconciling:
-- store.Claimable's statuses), holding what the claim's choice reads of it
-- (status, lease expiry, next attempt) and its updated_at, the claim order.
-- The statement that writes a proposal writes its row here too; a
-- settlement deletes it. lease_token is NULL exactly when lease_expires_at
-- is (proposals_lease_whole), so the expiry alone says whether a lease is
-- held. Its one index is the claim order, and the key by which a writer
-- finds a proposal's row: the writer knows the updated_at it replaces.
DROP INDEX proposals_claim;
CREATE TABLE claim_queue (
    id               TEXT COLLATE "C" NOT NULL,
    tenant           TEXT COLLATE "C" NOT NULL,
    status           TEXT NOT NULL,
    lease_expires_at TIMESTAMPTZ,
    next_attempt_at  TIMESTAMPTZ,
    updated_at       TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (updated_at, id)
);
INSERT INTO claim_queue (id, tenant, status, lease_expires_at, next_attempt_at, updated_at)
    SELECT id, tenant, status, lease_expires_at, next_attempt_at, updated_at FROM proposals
    WHERE (status = 'approved' AND mode = 'independent') OR status IN ('executing', 'reconciling');
