-- 0016_slack_announcements: the Slack messages that announce proposals
-- (store/slack.go), one per tenant, proposal and actor; the configured
-- channel's one post has the actor ''. channel and ts are '' until the
-- message is posted; prev_nonce is '' unless a rotated nonce is still
-- shown; post_token and post_until fence a post under way and
-- are NULL once it is recorded.
CREATE TABLE slack_announcements (
    tenant        TEXT COLLATE "C" NOT NULL,
    proposal_id   TEXT COLLATE "C" NOT NULL,
    actor         TEXT COLLATE "C" NOT NULL,
    slack_user    TEXT COLLATE "C" NOT NULL,
    channel       TEXT COLLATE "C" NOT NULL,
    ts            TEXT COLLATE "C" NOT NULL,
    nonce         TEXT COLLATE "C" NOT NULL,
    nonce_version BIGINT NOT NULL,
    prev_nonce    TEXT COLLATE "C" NOT NULL,
    post_token    TEXT COLLATE "C",
    post_until    TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant, proposal_id, actor)
);
