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
			// Through a free seq, for (tenant, seq) is unique.
			exec(t, `UPDATE audit_chain SET seq = -1 WHERE tenant = ? AND seq = ?`, tenant, a)
			exec(t, `UPDATE audit_chain SET seq = ? WHERE tenant = ? AND seq = ?`, a, tenant, b)
			exec(t, `UPDATE audit_chain SET seq = ? WHERE tenant = ? AND seq = -1`, b, tenant)
		},
	})
}
