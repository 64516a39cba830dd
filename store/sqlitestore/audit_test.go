package sqlitestore_test

import (
	"database/sql"
	"testing"

	"github.com/countersign/countersign/store/storetest"
)

// TestAuditAcrossStores: two stores on one file, as two processes, each
// with writers and a sealer: one chain per tenant, no gap, no fork.
func TestAuditAcrossStores(t *testing.T) {
	t.Parallel()
	a, c, path := fresh(t)
	b := open(t, path, c)
	storetest.AuditAcrossStores(t, a, b)
}

// TestAuditTampering edits, deletes and reorders sealed events with raw SQL
// on the file, and verification names each.
func TestAuditTampering(t *testing.T) {
	t.Parallel()
	s, _, path := fresh(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	exec := func(t *testing.T, query string, args ...any) {
		t.Helper()
		res, err := db.ExecContext(t.Context(), query, args...)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			t.Fatalf("%s %v: no row changed", query, args)
		}
	}
	storetest.AuditTampering(t, s, storetest.AuditTamper{
		Edit: func(t *testing.T, tenant string, seq int64) {
			exec(t, `UPDATE events SET detail = 'rewritten' WHERE id = (SELECT event_id FROM audit_chain WHERE tenant = ? AND seq = ?)`, tenant, seq)
		},
		Delete: func(t *testing.T, tenant string, seq int64) {
			exec(t, `DELETE FROM events WHERE id = (SELECT event_id FROM audit_chain WHERE tenant = ? AND seq = ?)`, tenant, seq)
		},
		Swap: func(t *testing.T, tenant string, a, b int64) {
			// The two events trade places in their blocks' id lists; the
			// hashes stay where they were.
			var idA, idB int64
			for seq, id := range map[int64]*int64{a: &idA, b: &idB} {
				if err := db.QueryRowContext(t.Context(), `SELECT event_id FROM audit_chain WHERE tenant = ? AND seq = ?`, tenant, seq).Scan(id); err != nil {
					t.Fatalf("the event at seq %d: %v", seq, err)
				}
			}
			place := `UPDATE audit_blocks SET ids = json_set(ids, '$[' || (?1 - first_seq) || ']', ?2) WHERE tenant = ?3 AND ?1 BETWEEN first_seq AND last_seq`
			exec(t, place, a, idB, tenant)
			exec(t, place, b, idA, tenant)
		},
		SwapBreaks: "hash does not match the event",
	})
}
