package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// TestUnreachableClassifier pins which SQLite failures are
// store.ErrUnavailable (the file cannot be reached: try again later) and
// which are not, with errors the driver really returns.
func TestUnreachableClassifier(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	t.Run("no such directory: CANTOPEN", func(t *testing.T) {
		_, err := Open(ctx, filepath.Join(dir, "gone", "cs.db"), nil)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Open in a missing directory: %v, want store.ErrUnavailable", err)
		}
	})

	t.Run("not a database: NOTADB", func(t *testing.T) {
		path := filepath.Join(dir, "garbage.db")
		if err := os.WriteFile(path, []byte("this is not an SQLite file, not at all, it is much too plain"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, path, nil)
		if err == nil || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Open of a file that is not a database: %v, want an error that is not store.ErrUnavailable", err)
		}
	})

	t.Run("lock held past busy_timeout: BUSY", func(t *testing.T) {
		path := filepath.Join(dir, "busy.db")
		s, err := Open(ctx, path, &Options{BusyTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// Another process's long write transaction.
		other, err := sql.Open("sqlite", dsn(path, time.Millisecond, true))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx, err := other.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "CREATE TABLE hold (x)"); err != nil {
			t.Fatal(err)
		}
		_, err = s.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: "o", LeaseDuration: time.Minute})
		if err == nil {
			t.Fatal("a write under another's lock succeeded")
		}
		if errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("SQLITE_BUSY classified as unavailable: %v", err)
		}
	})

	t.Run("errors of other kinds pass unchanged", func(t *testing.T) {
		for _, err := range []error{nil, context.Canceled, store.ErrNotFound, errors.New("boom")} {
			if got := classify(err); got != err {
				t.Errorf("classify(%v) = %v", err, got)
			}
		}
	})
}
