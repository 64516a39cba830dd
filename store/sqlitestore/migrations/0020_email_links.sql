-- 0020_email_links: the email channel's decision links. A link is known by
-- the SHA-256 (lowercase hex) of its token only: the token is in the mail,
-- never here. Each belongs to one tenant, proposal, approver (actor),
-- verdict and notification (the outbox row whose delivery mailed it).
-- sent_at is set once the message was accepted for delivery; retired_at
-- when a later attempt of the same notification replaced the link unsent.
-- Times are Unix nanoseconds, NULL for "not yet".
CREATE TABLE email_links (
    token_sha256    TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    proposal_id     TEXT NOT NULL,
    actor           TEXT NOT NULL,
    verdict         TEXT NOT NULL,
    notification_id TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    sent_at         INTEGER,
    retired_at      INTEGER
) WITHOUT ROWID;

-- An approver's links of one notification: a retried delivery retires them.
CREATE INDEX email_links_message ON email_links (tenant, proposal_id, actor, notification_id);

-- At most one spend per approver and proposal: the key is what makes
-- spending one link spend all of that approver's links, whichever is
-- used first.
CREATE TABLE email_link_spends (
    tenant       TEXT NOT NULL,
    proposal_id  TEXT NOT NULL,
    actor        TEXT NOT NULL,
    token_sha256 TEXT NOT NULL,
    verdict      TEXT NOT NULL,
    spent_at     INTEGER NOT NULL,
    PRIMARY KEY (tenant, proposal_id, actor)
) WITHOUT ROWID;
