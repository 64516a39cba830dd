package sqlitestore_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/countersign/countersign/store/storetest"
)

// BenchmarkSealEvents: storetest.BenchSealEvents on a fresh file, its
// events written by a second connection.
func BenchmarkSealEvents(b *testing.B) {
	s, _, path := freshB(b)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	storetest.BenchSealEvents(b, s, func(b *testing.B, n int) {
		if _, err := db.ExecContext(b.Context(), `WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?)
			INSERT INTO events (tenant, proposal_id, type, actor, via, status, detail, at)
			SELECT 't' || (n % 10), 'prp_' || n, 'proposal.decided', 'bob', 'api', 'approved', 'approved by bob', ? FROM g`,
			n, time.Now().UnixNano()); err != nil {
			b.Fatal(err)
		}
	})
}
