-- 0017_email_links: the email channel's decision links. A link is known by
-- the SHA-256 (lowercase hex) of its token only: the token is in the mail,
-- never here. Each belongs to one tenant, proposal, approver (actor),
-- verdict and notification (the outbox row whose delivery mailed it).
-- sent_at is set once the message was accepted for delivery; retired_at
-- when a later attempt of the same notification replaced the link unsent.
CREATE TABLE email_links (
    token_sha256    TEXT COLLATE "C" PRIMARY KEY,
    tenant          TEXT COLLATE "C" NOT NULL,
    proposal_id     TEXT COLLATE "C" NOT NULL,
    actor           TEXT COLLATE "C" NOT NULL,
    verdict         TEXT COLLATE "C" NOT NULL,
    notification_id TEXT COLLATE "C" NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ NOT NULL,
    sent_at         TIMESTAMPTZ,
    retired_at      TIMESTAMPTZ
);

-- An approver's links of one notification: a retried delivery retires them.
CREATE INDEX email_links_message ON email_links (tenant, proposal_id, actor, notification_id);

-- At most one spend per approver and proposal: the key is what makes
-- spending one link spend all of that approver's links, whichever is used
-- first, across every process (a second insert waits for the first and
-- then does nothing).
CREATE TABLE email_link_spends (
    tenant       TEXT COLLATE "C" NOT NULL,
    proposal_id  TEXT COLLATE "C" NOT NULL,
    actor        TEXT COLLATE "C" NOT NULL,
    token_sha256 TEXT COLLATE "C" NOT NULL,
    verdict      TEXT COLLATE "C" NOT NULL,
    spent_at     TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant, proposal_id, actor)
);
