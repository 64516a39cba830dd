package memstore_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

// TestConformance runs the shared store suite against the in-memory driver.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		s := memstore.New(&memstore.Options{Now: now})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
