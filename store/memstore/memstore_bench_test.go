package memstore_test

import (
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

// BenchmarkStore runs the shared store benchmarks against the in-memory driver.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		s := memstore.New(nil)
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
