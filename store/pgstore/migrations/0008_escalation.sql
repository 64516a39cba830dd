-- 0008_escalation: due times on pending proposals, swept like expiry
-- (DESIGN.md §14). escalate_at is when escalate_to joins the approvers,
-- once, NULL after or when the rule has none; remind_at is when the next
-- reminder is due, remind_every (nanoseconds) the time between them, 0 for
-- none. ADD COLUMN without a default, or with a constant one, rewrites no
-- rows; existing rows have neither.
ALTER TABLE proposals ADD COLUMN escalate_at TIMESTAMPTZ;
ALTER TABLE proposals ADD COLUMN escalate_to TEXT[];
ALTER TABLE proposals ADD COLUMN remind_at TIMESTAMPTZ;
ALTER TABLE proposals ADD COLUMN remind_every BIGINT NOT NULL DEFAULT 0;

-- The sweeps read only the pending rows whose due time is set.
CREATE INDEX proposals_escalation ON proposals (escalate_at, id) WHERE status = 'pending' AND escalate_at IS NOT NULL;
CREATE INDEX proposals_reminder ON proposals (remind_at, id) WHERE status = 'pending' AND remind_at IS NOT NULL;
