-- 0005_rule_fingerprint: the fingerprint of the rule a proposal was made
-- under, and of the rule a grant was made under (its origin proposal's). A
-- grant approves only calls under a rule of the same fingerprint, so a
-- changed rule retires its grants. Rows from before have '' and match only
-- calls without a fingerprint.
ALTER TABLE proposals ADD COLUMN rule_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE grants ADD COLUMN rule_fingerprint TEXT NOT NULL DEFAULT '';
