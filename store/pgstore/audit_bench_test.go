package pgstore_test

import (
	"testing"

	"github.com/countersign/countersign/store/storetest"
)

// BenchmarkSealEvents: storetest.BenchSealEvents on a fresh schema.
func BenchmarkSealEvents(b *testing.B) {
	s, dsn := openTestStore(b, nil)
	conn := rawConn(b, dsn, s.Schema())
	storetest.BenchSealEvents(b, s, func(b *testing.B, n int) {
		if _, err := conn.Exec(b.Context(), `INSERT INTO events (tenant, proposal_id, type, actor, via, status, detail, at)
			SELECT 't' || (g % 10), 'prp_' || g, 'proposal.decided', 'bob', 'api', 'approved', 'approved by bob', now()
			FROM generate_series(1, $1) g`, n); err != nil {
			b.Fatal(err)
		}
	})
}
