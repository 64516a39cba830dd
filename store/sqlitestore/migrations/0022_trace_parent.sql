-- 0022_trace_parent: the W3C traceparent of the call that made the proposal
-- ('' when it was not traced), written once at creation, so that spans about
-- the proposal in any process (a decision, the worker's execution) continue
-- the caller's trace. A constant default: every proposal from before was not
-- traced.
ALTER TABLE proposals ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
