package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/sqlitestore"
	"github.com/countersign/countersign/store/storetest"
)

// TestConformance runs the shared store suite against a fresh SQLite file per test.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "countersign.db"), &sqlitestore.Options{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, storetest.WithRuleQuery(sqlitestore.QueryRule))
}
