package sqlitestore_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// BenchmarkSealEvents measures one seal of a batch of 1,000 committed
// events of 10 tenants: the sealer's whole cost per event (its statements,
// the hashing, the commit), which the audit scenario of the bench sets
// against B3's and B6's throughput.
func BenchmarkSealEvents(b *testing.B) {
	s, _, path := freshB(b)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	ctx := b.Context()
	l, err := s.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: "bench", LeaseDuration: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 1000
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := db.ExecContext(ctx, `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
			INSERT INTO events (tenant, proposal_id, type, actor, via, status, detail, at)
			SELECT 't' || (n % 10), 'prp_' || n, 'proposal.decided', 'bob', 'api', 'approved', 'approved by bob', ? FROM g`,
			batch, time.Now().UnixNano()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res, err := s.SealEvents(ctx, &store.SealEventsParams{Token: l.Token, LeaseDuration: time.Hour, Limit: batch})
		if err != nil || res.Sealed != batch {
			b.Fatalf("SealEvents = %+v, %v; want %d sealed", res, err, batch)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/event")
}
