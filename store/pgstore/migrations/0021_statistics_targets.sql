-- 0021_statistics_targets: no planner statistics for the columns that only
-- carry a payload. No query filters, joins, groups or sorts on them, so
-- their statistics were never read, and gathering them was most of an
-- ANALYZE's work: on the 9,711 proposals of a B3 run, 187 ms with them and
-- 54 ms without (medians of five). An ANALYZE runs as a schema grows (pgstore's
-- RefreshStatistics, then autovacuum), on the same cores as the writes
-- (docs/profiles/scale.md, "Statistics of payloads").
ALTER TABLE proposals
    ALTER COLUMN input SET STATISTICS 0,
    ALTER COLUMN raw_input SET STATISTICS 0,
    ALTER COLUMN preview SET STATISTICS 0,
    ALTER COLUMN confirmation SET STATISTICS 0,
    ALTER COLUMN decisions SET STATISTICS 0,
    ALTER COLUMN outcome SET STATISTICS 0,
    ALTER COLUMN approvers SET STATISTICS 0,
    ALTER COLUMN requester_roles SET STATISTICS 0,
    ALTER COLUMN channels SET STATISTICS 0,
    ALTER COLUMN remember_scopes SET STATISTICS 0,
    ALTER COLUMN escalate_to SET STATISTICS 0,
    ALTER COLUMN notify SET STATISTICS 0,
    ALTER COLUMN input_digest SET STATISTICS 0,
    ALTER COLUMN state_version SET STATISTICS 0,
    ALTER COLUMN operation_id SET STATISTICS 0,
    ALTER COLUMN trace_parent SET STATISTICS 0;

ALTER TABLE events ALTER COLUMN detail SET STATISTICS 0;

ALTER TABLE messages
    ALTER COLUMN text SET STATISTICS 0,
    ALTER COLUMN outcome SET STATISTICS 0,
    ALTER COLUMN tool_calls SET STATISTICS 0,
    ALTER COLUMN result SET STATISTICS 0;

ALTER TABLE audit_chain
    ALTER COLUMN prev_hash SET STATISTICS 0,
    ALTER COLUMN hash SET STATISTICS 0;
