-- 0019_slack_announcements: the Slack messages that announce proposals
-- (store/slack.go), one per tenant, proposal and actor; the configured
-- channel's one post has the actor ''. channel and ts are '' until the
-- message is posted; prev_nonce is '' unless a rotated nonce is still
-- shown; post_token and post_until (Unix nanoseconds) fence a
-- post under way and are NULL once it is recorded.
CREATE TABLE slack_announcements (
    tenant        TEXT NOT NULL,
    proposal_id   TEXT NOT NULL,
    actor         TEXT NOT NULL,
    slack_user    TEXT NOT NULL,
    channel       TEXT NOT NULL,
    ts            TEXT NOT NULL,
    nonce         TEXT NOT NULL,
    nonce_version INTEGER NOT NULL,
    prev_nonce    TEXT NOT NULL,
    post_token    TEXT,
    post_until    INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant, proposal_id, actor)
) WITHOUT ROWID;
