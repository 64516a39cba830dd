-- The status a proposal's current lease was claimed from, so that the worker's
-- batch claim can be one UPDATE … RETURNING (whose RETURNING sees only new
-- values) and still tell a first execution from a recovery.
ALTER TABLE proposals ADD COLUMN claimed_from TEXT NOT NULL DEFAULT '';
