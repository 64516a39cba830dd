-- 0018_approver_channels: the rule's approver channels (notify: a JSON
-- list, NULL for none) and its step-up ('' for none, 'passkey'), frozen on
-- the proposal at creation like the rule's other terms. Constant defaults:
-- every proposal from before is announced nowhere and needs no step-up,
-- which is what its rule said then.
ALTER TABLE proposals ADD COLUMN notify TEXT;
ALTER TABLE proposals ADD COLUMN step_up TEXT NOT NULL DEFAULT '';
