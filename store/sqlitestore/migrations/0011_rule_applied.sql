-- 0011_rule_applied: the policy rule that applied to a proposal's call, as
-- the proposal shows it: its match and its condition (a when expression, or
-- a Go condition's name). Both '' when no rule applied and the defaults
-- decided, and on rows from before, which did not record it.
ALTER TABLE proposals ADD COLUMN rule_match TEXT NOT NULL DEFAULT '';
ALTER TABLE proposals ADD COLUMN rule_when TEXT NOT NULL DEFAULT '';
