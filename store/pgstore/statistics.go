package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Planner statistics (store.Statistics). A schema's tables start empty, and
// PostgreSQL's autovacuum looks at a database once a minute
// (autovacuum_naptime). Until a table's first analysis the planner knows
// neither its size nor its columns, and a generic plan it caches for a
// prepared statement while a table is small stays in use as the table
// grows: measured on B3, the settlement's and the decision's
// UPDATE … FROM unnest(…) kept a sequential scan of proposals, and the call's
// lookup by tool call used the thread index rather than the unique one, so
// every write read more of the table than the last, and the throughput fell
// by four within half a minute (docs/profiles/scale.md, "Planner
// statistics"). RefreshStatistics analyzes such tables as soon as the
// worker's next run (every second) sees them; an analysis updates pg_class,
// which invalidates the cached plans.

// statisticsMinPages is the size below which a table that was never
// analyzed is left to autovacuum: the planner assumes ten pages of such a
// table, so its plans are already those of a table of this size.
const statisticsMinPages = 8

// staleTablesSQL lists the tables of schema $1 this role may analyze that
// need it: never analyzed (no row count) and at least $2 pages; or grown
// to twice the pages (and at least 2 × $2) and twice the live rows they
// had at their last analysis. The first reads the file's size alone, so a
// table loaded by another process counts before that process's counts
// reach the statistics collector.
//
// Rows changed in a table that did not grow are autovacuum's to analyze,
// not this service's: the plans depend on a table's size, and the planner
// already scales the row count of the last analysis by the file's current
// size. Hence the live rows beside the pages: a drain's updates leave the
// old versions behind, so the file of a table that holds as many rows as
// before doubles, and analyzing it then (and, before, after every table's
// worth of changed rows) was a tenth of the server's time in a drain
// (ADR 0048, "Growth only").
const staleTablesSQL = `SELECT c.relname
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1 AND c.relkind = 'r'
	AND (pg_catalog.pg_has_role(c.relowner, 'USAGE')
		OR (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user))
	AND (
		(c.reltuples < 0 AND pg_catalog.pg_relation_size(c.oid) >= $2 * current_setting('block_size')::bigint)
		OR (c.reltuples >= 0 AND pg_catalog.pg_relation_size(c.oid) >= 2 * greatest(c.relpages, $2) * current_setting('block_size')::bigint
			AND pg_catalog.pg_stat_get_live_tuples(c.oid) >= 2 * c.reltuples)
	)
	ORDER BY c.relname`

// RefreshStatistics implements store.Statistics. It holds a session
// advisory lock of the schema while it works, so that of the processes
// sharing the schema one analyzes and the others return at once; each
// table is analyzed in a transaction of its own, so no snapshot is held
// across them.
func (s *Store) RefreshStatistics(ctx context.Context) ([]string, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, wrap("refresh statistics", err)
	}
	defer conn.Release()
	key := "countersign_statistics_" + s.schema
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended($1, 0))`, key).Scan(&locked); err != nil {
		return nil, wrap("refresh statistics", err)
	}
	if !locked {
		return nil, nil
	}
	defer func() {
		// The lock is the session's: a connection that cannot give it back
		// is closed, which does, rather than returned to the pool with it.
		unlock := context.WithoutCancel(ctx)
		if _, err := conn.Exec(unlock, `SELECT pg_catalog.pg_advisory_unlock(pg_catalog.hashtextextended($1, 0))`, key); err != nil {
			_ = conn.Conn().Close(unlock)
		}
	}()
	rows, err := conn.Query(ctx, staleTablesSQL, s.schema, statisticsMinPages)
	if err != nil {
		return nil, wrap("refresh statistics", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrap("refresh statistics", err)
	}
	for i, table := range tables {
		if _, err := conn.Exec(ctx, `ANALYZE `+pgx.Identifier{s.schema, table}.Sanitize()); err != nil {
			return tables[:i], wrap("refresh statistics", fmt.Errorf("analyze %s: %w", table, err))
		}
	}
	return tables, nil
}
