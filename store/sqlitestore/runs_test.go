package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/store/sqlitestore"

	"github.com/countersign/countersign/store/storetest"
)

// TestRunsAcrossStores: two stores on one database file, as two processes:
// of messages posted through both at once one starts a run, and of their
// claims of one parked run one resumes it.
func TestRunsAcrossStores(t *testing.T) {
	t.Parallel()
	a, c, path := fresh(t)
	b := open(t, path, c)
	storetest.RunsAcrossStores(t, a, b)
}

// TestRememberedRowIsOnlyAGuess: two stores on one database file, as two
// processes: a Store that remembers a row the other has changed since
// never writes over the change, and never answers from the stale row.
// Both run on the real clock, which the lease that lapses in it needs.
func TestRememberedRowIsOnlyAGuess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "countersign.db")
	open := func() *sqlitestore.Store {
		s, err := sqlitestore.Open(t.Context(), path, &sqlitestore.Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	storetest.RememberedRowsAcrossStores(t, open(), open())
}
