package pgstore_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/storetest"
)

// BenchmarkStore runs the shared store benchmarks, each on a fresh schema.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		dsn, schema := pgtest.NewSchema(b)
		s, err := pgstore.Open(context.Background(), dsn, &pgstore.Options{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
