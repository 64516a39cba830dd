package pgstore_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/storetest"
)

// TestRunsAcrossStores: four stores on one schema, as four processes: of
// messages posted through all of them at once one starts a run, and of
// their claims of one parked run one resumes it.
func TestRunsAcrossStores(t *testing.T) {
	t.Parallel()
	first, dsn := openTestStore(t, nil)
	stores := []store.Store{first}
	for range 3 {
		s, err := pgstore.Open(context.Background(), withPoolSize(dsn), &pgstore.Options{Schema: first.Schema()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	storetest.RunsAcrossStores(t, stores...)
}
