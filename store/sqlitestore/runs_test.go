package sqlitestore_test

import (
	"testing"

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
