package sqlitestore_test

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// TestAuditRewriting rewrites a sealed chain consistently on the file (an
// event edited and every later hash recomputed in audit_blocks, or the chain
// cut short, blocks trimmed), with and without deleting the checkpoints that
// would show it: the chain's own check holds, the signed checkpoints' fails.
func TestAuditRewriting(t *testing.T) {
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
	storetest.AuditRewriting(t, s, storetest.AuditRewrite{
		Edit: func(t *testing.T, tenant string, seq int64, detail string) {
			exec(t, `UPDATE events SET detail = ? WHERE id = (SELECT event_id FROM audit_chain WHERE tenant = ? AND seq = ?)`, detail, tenant, seq)
		},
		Relink: func(t *testing.T, tenant string, seq int64, prevHash, hash string) {
			// The event's hash is its 32 bytes in its block's hashes; its
			// prev_hash the block's own when it is the block's first.
			var first int64
			var hashes []byte
			if err := db.QueryRowContext(t.Context(), `SELECT first_seq, hashes FROM audit_blocks WHERE tenant = ? AND ? BETWEEN first_seq AND last_seq`, tenant, seq).Scan(&first, &hashes); err != nil {
				t.Fatal(err)
			}
			h, _ := hex.DecodeString(hash)
			copy(hashes[32*(seq-first):], h)
			exec(t, `UPDATE audit_blocks SET hashes = ? WHERE tenant = ? AND first_seq = ?`, hashes, tenant, first)
			if seq == first {
				prev, _ := hex.DecodeString(prevHash)
				exec(t, `UPDATE audit_blocks SET prev_hash = ? WHERE tenant = ? AND first_seq = ?`, prev, tenant, first)
			}
		},
		Truncate: func(t *testing.T, tenant string, from int64) {
			exec(t, `DELETE FROM events WHERE id IN (SELECT event_id FROM audit_chain WHERE tenant = ? AND seq >= ?)`, tenant, from)
			if _, err := db.ExecContext(t.Context(), `DELETE FROM audit_blocks WHERE tenant = ? AND first_seq >= ?`, tenant, from); err != nil {
				t.Fatal(err)
			}
			// The block the cut falls in keeps its events before it; its
			// rowid becomes the id of its new last event.
			var first int64
			var ids string
			var hashes []byte
			err := db.QueryRowContext(t.Context(), `SELECT first_seq, ids, hashes FROM audit_blocks WHERE tenant = ? AND last_seq >= ?`, tenant, from).Scan(&first, &ids, &hashes)
			if errors.Is(err, sql.ErrNoRows) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var list []int64
			if err := json.Unmarshal([]byte(ids), &list); err != nil {
				t.Fatal(err)
			}
			keep := from - first
			kept, _ := json.Marshal(list[:keep])
			exec(t, `UPDATE audit_blocks SET last_id = ?, last_seq = ?, ids = ?, hashes = ? WHERE tenant = ? AND first_seq = ?`,
				list[keep-1], from-1, string(kept), hashes[:32*keep], tenant, first)
		},
		DeleteCheckpoints: func(t *testing.T, tenant string, from int64) {
			exec(t, `DELETE FROM audit_checkpoints WHERE tenant = ? AND seq >= ?`, tenant, from)
		},
	})
}
