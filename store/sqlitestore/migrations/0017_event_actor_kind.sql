-- 0017_event_actor_kind: the kind of credential ("human" or "agent") behind
-- an audit event: the requester's for a creation, the decider's, the
-- canceller's, the resolving operator's. '' on events with no credential
-- behind them (a worker's claim, an expiry) and on every event from before,
-- which did not record it. The chain hashes actor_kind only when it is not
-- '', so every event sealed before this column existed hashes, and
-- verifies, exactly as it was sealed. The view audit_chain names no event
-- column, so it stands as it is.
ALTER TABLE events ADD COLUMN actor_kind TEXT NOT NULL DEFAULT '';
