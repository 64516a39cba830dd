package pgstore

import (
	"context"
	"embed"
	"fmt"

	migfiles "github.com/countersign/countersign/internal/migrations"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/internal/cursor"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// metaCursorKey names the cursor-signing key in the meta table.
const metaCursorKey = "cursor_key"

// migration is one forward-only schema step.
type migration struct {
	version int
	name    string // file name, e.g. 0001_init.sql
	sql     string
	// after runs in the migration's transaction, after its SQL: for data
	// that SQL should not make, such as secrets from crypto/rand.
	after func(ctx context.Context, tx pgx.Tx) error
}

// afterHooks adds Go steps to migrations, by version.
var afterHooks = map[int]func(ctx context.Context, tx pgx.Tx) error{
	1: func(ctx context.Context, tx pgx.Tx) error {
		// The cursor key lives in the database, so cursors survive a
		// restart, are shared by every process on the schema, and are
		// rejected by any other schema or database.
		_, err := tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2)`, metaCursorKey, cursor.NewKey())
		return err
	},
}

// migrations returns the embedded migrations in version order, with their
// Go steps.
func migrations() ([]migration, error) {
	files, err := migfiles.Load(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	out := make([]migration, len(files))
	for i, f := range files {
		out[i] = migration{version: f.Version, name: f.Name, sql: f.SQL, after: afterHooks[f.Version]}
	}
	return out, nil
}

// LatestSchemaVersion is the schema version this build migrates to.
func LatestSchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// Migrate creates the schema if it does not exist and applies the
// migrations it lacks, each in its own transaction. It is idempotent, and
// safe to run from many processes at once: each migration takes a
// transaction-scoped advisory lock for the schema and re-checks the version
// under it, so one process applies it and the others find it applied. A
// schema migrated by a newer build (a version this build does not know) is
// refused rather than used.
//
// The migration files name their tables unqualified: each runs with
// search_path set, for its transaction only (SET LOCAL), to the schema.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	for _, m := range ms {
		if err := s.migrateOne(ctx, m, len(ms)); err != nil {
			return fmt.Errorf("pgstore: migrate %s: %s: %w", s.schema, m.name, classify(err))
		}
	}
	return nil
}

func (s *Store) migrateOne(ctx context.Context, m migration, latest int) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Held until the transaction ends; the key is the schema's, so
		// stores on other schemas migrate independently.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('countersign.migrate;' || $1, 0))`, s.schema); err != nil {
			return err
		}
		// Only a missing schema is created: CREATE SCHEMA needs the CREATE
		// privilege on the database even with IF NOT EXISTS.
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, s.schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s.q.schema); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+s.q.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return err
		}
		if current > latest {
			return fmt.Errorf("schema version %d is newer than this build's %d", current, latest)
		}
		if current >= m.version {
			return nil
		}
		// The simple protocol: a migration file holds many statements.
		if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		if m.after != nil {
			if err := m.after(ctx, tx); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
		return err
	})
}

// SchemaVersion returns the version of the latest migration applied to the
// schema, 0 when none is (or the schema does not exist).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+s.q.schema+`.schema_migrations`).Scan(&v)
	if isUndefinedTable(err) || pgCode(err) == codeInvalidSchemaName { // no table, or no schema
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgstore: schema version: %w", classify(err))
	}
	return v, nil
}
