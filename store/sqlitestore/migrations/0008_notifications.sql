-- 0008_notifications: the notification outbox. A notification is written
-- in the transaction of the event it announces, by a trigger on events, so
-- that every write path that appends an event (creations, decisions,
-- claims, settlements, sweeps) writes its notifications without knowing of
-- them, and a transaction that rolls back takes both away.
--
-- notification_targets is the configuration's receivers, by name, and the
-- event types each is sent; serve and worker replace it at start.
CREATE TABLE notification_targets (
    target     TEXT NOT NULL,
    event_type TEXT NOT NULL,
    PRIMARY KEY (event_type, target)
) STRICT, WITHOUT ROWID;

-- One notification per event and target. Times are Unix nanoseconds on the
-- application's clock, like every time of this driver; the lease columns
-- are NULL unless a worker holds the notification.
CREATE TABLE notifications (
    id               TEXT PRIMARY KEY,
    tenant           TEXT NOT NULL,
    target           TEXT NOT NULL,
    event_id         INTEGER NOT NULL,
    event_type       TEXT NOT NULL,
    proposal_id      TEXT NOT NULL,
    at               INTEGER NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL,
    next_attempt_at  INTEGER NOT NULL,
    last_error       TEXT NOT NULL,
    payload          BLOB,
    lease_owner      TEXT,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    updated_at       INTEGER NOT NULL
) STRICT;

-- The workers' claims, earliest due first, and the operators' listings.
CREATE INDEX notifications_due ON notifications (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX notifications_list ON notifications (tenant, event_id DESC, target DESC);

CREATE TRIGGER events_notify AFTER INSERT ON events
BEGIN
    INSERT INTO notifications (id, tenant, target, event_id, event_type, proposal_id, at, status,
        attempts, next_attempt_at, last_error, updated_at)
    SELECT 'ntf_' || NEW.id || '_' || t.target, NEW.tenant, t.target, NEW.id, NEW.type, NEW.proposal_id, NEW.at,
        'pending', 0, NEW.at, '', NEW.at
    FROM notification_targets t WHERE t.event_type = NEW.type;
END;
