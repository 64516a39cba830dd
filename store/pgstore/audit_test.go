package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/storetest"
)

// TestAuditAcrossStores: three stores on one schema, as three processes,
// each with writers and a sealer: one chain per tenant, no gap, no fork.
func TestAuditAcrossStores(t *testing.T) {
	t.Parallel()
	first, dsn := openTestStore(t, nil)
	stores := []store.Store{first}
	for range 2 {
		s, err := pgstore.Open(context.Background(), withPoolSize(dsn), &pgstore.Options{Schema: first.Schema()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores = append(stores, s)
	}
	storetest.AuditAcrossStores(t, stores...)
}

// rawConn opens a connection of the test's own on the store's database,
// with the store's schema first on its search path.
func rawConn(t *testing.T, dsn, schema string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), `SET search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestAuditTampering edits, deletes and reorders sealed events with raw SQL,
// and verification names each.
func TestAuditTampering(t *testing.T) {
	t.Parallel()
	s, dsn := openTestStore(t, nil)
	conn := rawConn(t, dsn, s.Schema())
	exec := func(t *testing.T, query string, args ...any) {
		t.Helper()
		tag, err := conn.Exec(t.Context(), query, args...)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if tag.RowsAffected() == 0 {
			t.Fatalf("%s %v: no row changed", query, args)
		}
	}
	storetest.AuditTampering(t, s, storetest.AuditTamper{
		Edit: func(t *testing.T, tenant string, seq int64) {
			exec(t, `UPDATE events SET detail = 'rewritten' WHERE tenant = $1 AND seq = $2`, tenant, seq)
		},
		Delete: func(t *testing.T, tenant string, seq int64) {
			exec(t, `DELETE FROM events WHERE tenant = $1 AND seq = $2`, tenant, seq)
		},
		Swap: func(t *testing.T, tenant string, a, b int64) {
			// Through a free seq, for events_chain is unique.
			exec(t, `UPDATE events SET seq = -1 WHERE tenant = $1 AND seq = $2`, tenant, a)
			exec(t, `UPDATE events SET seq = $2 WHERE tenant = $1 AND seq = $3`, tenant, a, b)
			exec(t, `UPDATE events SET seq = $2 WHERE tenant = $1 AND seq = -1`, tenant, b)
		},
	})
}

// TestAuditLateCommit: an event whose transaction commits after events with
// higher ids were sealed is not passed over. It is sealed by the next seal,
// after them, and the chain holds every event once.
func TestAuditLateCommit(t *testing.T) {
	t.Parallel()
	s, dsn := openTestStore(t, nil)
	ctx := t.Context()
	conn := rawConn(t, dsn, s.Schema())
	const tn = "acme"

	// A transaction draws an event id and stays open, as a slow writer's does.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lateID int64
	if err := tx.QueryRow(ctx, `INSERT INTO events (tenant, proposal_id, type, actor, via, status, detail, at)
		VALUES ($1, 'prp_late', 'proposal.created', 'alice', 'api', 'pending', '', now()) RETURNING id`, tn).Scan(&lateID); err != nil {
		t.Fatal(err)
	}
	// Meanwhile events with higher ids commit, and are sealed.
	p := storetest.NewProposal(tn, "t1", "call_1")
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
		t.Fatal(err)
	}
	if err := storetest.SealAll(ctx, s, "sealer-1"); err != nil {
		t.Fatal(err)
	}
	chain, err := storetest.ReadChain(ctx, s, tn)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 1 || chain[0].ID <= lateID {
		t.Fatalf("chain before the late commit = %d events, want the one committed, whose id is above %d", len(chain), lateID)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := storetest.SealAll(ctx, s, "sealer-2"); err != nil {
		t.Fatal(err)
	}
	chain, err = storetest.ReadChain(ctx, s, tn)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 2 || chain[1].ID != lateID || chain[1].Seq != 2 || chain[1].PrevHash != chain[0].Hash {
		t.Fatalf("chain after the late commit = %+v, want event %d sealed second, linked to the first", chain, lateID)
	}
	if _, err := storetest.VerifyChain(ctx, s, tn); err != nil {
		t.Fatalf("verify: %v", err)
	}
}
