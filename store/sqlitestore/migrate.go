package sqlitestore

import (
	"context"
	"embed"
	"fmt"
	"time"

	migfiles "github.com/countersign/countersign/internal/migrations"

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
	after func(ctx context.Context, tx *wtx) error
}

// afterHooks adds Go steps to migrations, by version.
var afterHooks = map[int]func(ctx context.Context, tx *wtx) error{
	1: func(ctx context.Context, tx *wtx) error {
		// The cursor key lives in the database, so cursors survive a
		// restart, are shared by every process on the file, and are
		// rejected by any other database.
		_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?)`, metaCursorKey, cursor.NewKey())
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

// Migrate applies the migrations the database lacks, each in its own write
// transaction. It is idempotent, and safe to run from several processes at
// once: each migration re-checks, under the write lock, whether another
// process applied it first. A database migrated by a newer build (a version
// this build does not know) is refused rather than used.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", classify(err))
	}
	err = s.writeSchema(ctx, func(tx *wtx, _ time.Time) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at INTEGER NOT NULL
		) STRICT`)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", classify(err))
	}
	for _, m := range ms {
		err := s.writeSchema(ctx, func(tx *wtx, now time.Time) error {
			var current int
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
				return err
			}
			if current > len(ms) {
				return fmt.Errorf("database schema version %d is newer than this build's %d", current, len(ms))
			}
			if current >= m.version {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			if m.after != nil {
				if err := m.after(ctx, tx); err != nil {
					return err
				}
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.version, m.name, now.UnixNano())
			return err
		})
		if err != nil {
			return fmt.Errorf("sqlitestore: migrate: %s: %w", m.name, classify(err))
		}
	}
	return nil
}

// SchemaVersion returns the version of the latest migration applied to the
// database, 0 when none is.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	if err != nil {
		// Before the first migration there is no table to read.
		var n int
		if err2 := s.r.QueryRowContext(ctx,
			`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n); err2 == nil && n == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("sqlitestore: schema version: %w", classify(err))
	}
	return v, nil
}
