-- 0014_credential_kinds: the kind of credential ("human" or "agent") that
-- made a proposal's call. '' on rows from before, which did not record it
-- (the API then leaves requester_kind out). A decision's actor_kind lives
-- in the decisions JSON, absent on decisions from before.
ALTER TABLE proposals ADD COLUMN requester_kind TEXT NOT NULL DEFAULT '';
