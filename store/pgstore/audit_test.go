package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

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
func rawConn(t testing.TB, dsn, schema string) *pgx.Conn {
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
		// The event itself is edited or deleted; the chain's own rows are
		// reordered, as one who knows its layout would.
		Edit: func(t *testing.T, tenant string, seq int64) {
			exec(t, `UPDATE events SET detail = 'rewritten' WHERE id = (SELECT event_id FROM audit_chain WHERE tenant = $1 AND seq = $2)`, tenant, seq)
		},
		Delete: func(t *testing.T, tenant string, seq int64) {
			exec(t, `DELETE FROM events WHERE id = (SELECT event_id FROM audit_chain WHERE tenant = $1 AND seq = $2)`, tenant, seq)
		},
		Swap: func(t *testing.T, tenant string, a, b int64) {
			// Through a free seq, for the chain's key is unique.
			exec(t, `UPDATE audit_chain SET seq = -1 WHERE tenant = $1 AND seq = $2`, tenant, a)
			exec(t, `UPDATE audit_chain SET seq = $2 WHERE tenant = $1 AND seq = $3`, tenant, a, b)
			exec(t, `UPDATE audit_chain SET seq = $2 WHERE tenant = $1 AND seq = -1`, tenant, b)
		},
	})
}

// sealOnce takes the sealing lease, seals one batch and gives the lease up.
func sealOnce(t *testing.T, s store.Store) *store.SealResult {
	t.Helper()
	ctx := t.Context()
	l, err := s.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: "sealer-once", LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.ReleaseSealLease(context.Background(), &store.ReleaseSealLeaseParams{Token: l.Token}) }()
	res, err := s.SealEvents(ctx, &store.SealEventsParams{Token: l.Token, LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// holdEventID opens a transaction that draws an event id and stays open, as
// a slow writer's does, and returns it with the id.
func holdEventID(t *testing.T, conn *pgx.Conn, tenant string) (pgx.Tx, int64) {
	t.Helper()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRow(t.Context(), `INSERT INTO events (tenant, proposal_id, type, actor, via, status, detail, at)
		VALUES ($1, 'prp_late', 'proposal.created', 'alice', 'api', 'pending', '', now()) RETURNING id`, tenant).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return tx, id
}

// TestAuditLateCommit: an event whose transaction commits after events with
// higher ids did holds the chain back until it commits; then the chain
// holds every event once, in id order.
func TestAuditLateCommit(t *testing.T) {
	t.Parallel()
	s, dsn := openTestStore(t, nil)
	ctx := t.Context()
	conn := rawConn(t, dsn, s.Schema())
	const tn = "acme"

	tx, lateID := holdEventID(t, conn, tn)
	// Meanwhile events with higher ids commit.
	p := storetest.NewProposal(tn, "t1", "call_1")
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
		t.Fatal(err)
	}
	// However often it seals, the sealer waits at the open writer's id.
	for range 3 {
		if res := sealOnce(t, s); res.Sealed != 0 || !res.Blocked {
			t.Fatalf("seal while an earlier id is uncommitted = %+v, want nothing sealed, blocked", res)
		}
	}
	if chain, err := storetest.ReadChain(ctx, s, tn); err != nil || len(chain) != 0 {
		t.Fatalf("chain before the late commit = %d events, %v; want none", len(chain), err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := storetest.SealAll(ctx, s, "sealer-2"); err != nil {
		t.Fatal(err)
	}
	chain, err := storetest.ReadChain(ctx, s, tn)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 2 || chain[0].ID != lateID || chain[1].ID <= lateID || chain[1].PrevHash != chain[0].Hash {
		t.Fatalf("chain after the late commit = %+v, want event %d first, then the later one, linked", chain, lateID)
	}
	if _, err := storetest.VerifyChain(ctx, s, tn); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// TestAuditRolledBackWriter: an id drawn by a transaction that rolls back
// never commits; the sealer passes it once the transactions as old have
// ended, and the chain goes on without a gap in its seqs.
func TestAuditRolledBackWriter(t *testing.T) {
	t.Parallel()
	s, dsn := openTestStore(t, nil)
	ctx := t.Context()
	conn := rawConn(t, dsn, s.Schema())
	const tn = "acme"

	tx, lostID := holdEventID(t, conn, tn)
	p := storetest.NewProposal(tn, "t1", "call_1")
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: p}); err != nil {
		t.Fatal(err)
	}
	if res := sealOnce(t, s); !res.Blocked {
		t.Fatalf("seal while an earlier id is uncommitted = %+v, want blocked", res)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := storetest.SealAll(ctx, s, "sealer-2"); err != nil {
		t.Fatal(err)
	}
	chain, err := storetest.ReadChain(ctx, s, tn)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 1 || chain[0].ID <= lostID || chain[0].Seq != 1 || chain[0].ProposalID != p.ID {
		t.Fatalf("chain after the rollback = %+v, want the proposal's event alone, at seq 1", chain)
	}
	// And the chain goes on past it.
	q := storetest.NewProposal(tn, "t1", "call_2")
	if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: q}); err != nil {
		t.Fatal(err)
	}
	if err := storetest.SealAll(ctx, s, "sealer-3"); err != nil {
		t.Fatal(err)
	}
	if head, err := storetest.VerifyChain(ctx, s, tn); err != nil || head.Seq != 2 {
		t.Fatalf("verify = %+v, %v; want a chain of 2", head, err)
	}
}

// TestAuditHoleThroughTheFirstWrite: an event inserted by a transaction
// that has written nothing before it still has its transaction id before
// its event id (next_event_id), so a hole it leaves is never taken as final
// while it runs, however long that is.
func TestAuditHoleThroughTheFirstWrite(t *testing.T) {
	t.Parallel()
	s, dsn := openTestStore(t, nil)
	ctx := t.Context()
	conn := rawConn(t, dsn, s.Schema())
	var before, after string
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := tx.QueryRow(ctx, `SELECT coalesce(pg_current_xact_id_if_assigned()::text, '')`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT next_event_id('events_id_seq'), coalesce(pg_current_xact_id_if_assigned()::text, '')`).Scan(new(int64), &after); err != nil {
		t.Fatal(err)
	}
	if before != "" || after == "" {
		t.Fatalf("transaction id before and after drawing an event id: %q, %q; want none, then one", before, after)
	}
	var def string
	if err := conn.QueryRow(ctx, `SELECT column_default FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'events' AND column_name = 'id'`, s.Schema()).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(def, "next_event_id(") {
		t.Fatalf("events.id defaults to %s, want next_event_id(…)", def)
	}
}

// TestAuditRewriting rewrites a sealed chain consistently with raw SQL (an
// event edited and every later link recomputed, or the chain cut short),
// with and without deleting the checkpoints that would show it: the
// chain's own check holds, the signed checkpoints' fails.
func TestAuditRewriting(t *testing.T) {
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
	storetest.AuditRewriting(t, s, storetest.AuditRewrite{
		Edit: func(t *testing.T, tenant string, seq int64, detail string) {
			exec(t, `UPDATE events SET detail = $3 WHERE id = (SELECT event_id FROM audit_chain WHERE tenant = $1 AND seq = $2)`, tenant, seq, detail)
		},
		Relink: func(t *testing.T, tenant string, seq int64, prevHash, hash string) {
			exec(t, `UPDATE audit_chain SET prev_hash = $3, hash = $4 WHERE tenant = $1 AND seq = $2`, tenant, seq, prevHash, hash)
		},
		Truncate: func(t *testing.T, tenant string, from int64) {
			exec(t, `DELETE FROM events WHERE id IN (SELECT event_id FROM audit_chain WHERE tenant = $1 AND seq >= $2)`, tenant, from)
			exec(t, `DELETE FROM audit_chain WHERE tenant = $1 AND seq >= $2`, tenant, from)
		},
		DeleteCheckpoints: func(t *testing.T, tenant string, from int64) {
			exec(t, `DELETE FROM audit_checkpoints WHERE tenant = $1 AND seq >= $2`, tenant, from)
		},
	})
}
