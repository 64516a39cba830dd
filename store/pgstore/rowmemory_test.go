package pgstore

import (
	"context"
	"testing"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store/storetest"
)

// TestRememberedRowIsOnlyAGuess: two stores on one schema, as two
// processes: a Store that remembers a row the other has changed since
// never writes over the change, and never answers from the stale row
// (storetest.RememberedRowsAcrossStores).
func TestRememberedRowIsOnlyAGuess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(t)
	open := func() *Store {
		s, err := Open(ctx, pgtest.WithParam(dsn, "pool_max_conns", "2"), &Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	storetest.RememberedRowsAcrossStores(t, open(), open())
}
