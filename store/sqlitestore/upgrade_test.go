package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
)

// atSchema opens a new database migrated up to version, no further, and
// runs seed in a write transaction there, as rows of that schema.
func atSchema(t *testing.T, version int, seed func(ctx context.Context, tx *wtx) error) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "upgrade.db"), &Options{SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
			return err
		}
		for _, m := range ms[:version] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			if m.after != nil {
				if err := m.after(ctx, tx); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, ?, ?)`, m.version, m.name, time.Now().UnixNano()); err != nil {
				return err
			}
		}
		return seed(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRuleFingerprintUpgrade: a database made before the rule fingerprint
// (schema 4) keeps its proposals and grants through migration 0005. Their
// fingerprint is empty, so an old grant still approves a call that carries
// none, and no call made under a fingerprinted rule.
func TestRuleFingerprintUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().UTC()
	s := atSchema(t, 4, func(ctx context.Context, tx *wtx) error {
		// Rows as schema 4 holds them, written column by column.
		if _, err := tx.ExecContext(ctx, `INSERT INTO grants (id, tenant, requester, scope, thread_id, run_id, action, action_version,
				input_digest, origin_proposal_id, granted_by, created_at, activated_at, expires_at, revoked_at, revoked_by)
			VALUES ('grt_old', 'acme', 'alice', 'thread', 't1', '', 'payments.refund', '1', 'sha256:x', 'prp_old', 'bob', ?, ?, NULL, NULL, '')`,
			now.UnixNano(), now.UnixNano()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO proposals (id, tenant, requester, thread_id, run_id, tool_call_id, action, action_version,
				input_digest, preview, state_version, confirmation, confirmation_id, mode, status, quorum, forbid_self_approval,
				grant_any_input, grant_ttl, replacement_key, expires_at, operation_id, attempt, consumed_by, version, created_at, updated_at)
			VALUES ('prp_old', 'acme', 'alice', 't1', '', 'call_old', 'payments.refund', '1', 'sha256:x', 'p', '', '{"title":"t"}', '',
				'wait', 'succeeded', 1, 0, 0, 0, '', ?, 'op_old', 1, 'call_old', 5, ?, ?)`,
			now.Add(time.Hour).UnixNano(), now.UnixNano(), now.UnixNano())
		return err
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: "prp_old"})
	if err != nil || p.RuleFingerprint != "" || p.Status != store.StatusSucceeded {
		t.Fatalf("the old proposal after the upgrade = %+v, %v", p, err)
	}
	q := &store.FindGrantParams{Tenant: "acme", Requester: "alice", ThreadID: "t1", Action: "payments.refund", ActionVersion: "1", InputDigest: "sha256:x"}
	if g, err := s.FindGrant(ctx, q); err != nil || g.ID != "grt_old" || g.RuleFingerprint != "" {
		t.Errorf("FindGrant without a fingerprint = %+v, %v; want the old grant", g, err)
	}
	q.RuleFingerprint = "rule_a"
	if g, err := s.FindGrant(ctx, q); err == nil {
		t.Errorf("FindGrant under a fingerprinted rule found the old grant %s", g.ID)
	}
}

// TestAuditChainUpgrade: a database whose events carried their chain in
// their own rows (schema 11) keeps its chain through migration 0012, and
// the sealer goes on from its head: the events sealed before are the same
// links, and the chain verifies whole.
func TestAuditChainUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var sealed []*store.AuditEvent
	s := atSchema(t, 11, func(ctx context.Context, tx *wtx) error {
		// Five events of two tenants; the first three sealed as schema 11
		// sealed them, in their rows.
		var evs []*store.Event
		for i, tenant := range []string{"acme", "other", "acme", "acme", "other"} {
			e := &store.Event{ID: int64(i + 1), Tenant: tenant, ProposalID: fmt.Sprint("prp_", i), Type: store.EventCreated,
				Actor: "alice", Via: "api", Status: store.StatusPending, Detail: "proposed", At: at.Add(time.Duration(i) * time.Second)}
			if _, err := tx.ExecContext(ctx, `INSERT INTO events (id, tenant, proposal_id, type, actor, via, status, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				e.ID, e.Tenant, e.ProposalID, string(e.Type), e.Actor, e.Via, string(e.Status), e.Detail, e.At.UnixNano()); err != nil {
				return err
			}
			evs = append(evs, e)
		}
		sealed = store.ChainEvents(map[string]store.ChainHead{}, evs[:3])
		for _, ae := range sealed {
			if _, err := tx.ExecContext(ctx, `UPDATE events SET seq = ?, prev_hash = ?, hash = ? WHERE id = ?`, ae.Seq, ae.PrevHash, ae.Hash, ae.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	chain := func(tenant string) []*store.AuditEvent {
		t.Helper()
		evs, err := s.ListAudit(ctx, &store.ListAuditParams{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	if got := chain("acme"); len(got) != 2 || got[0].Hash != sealed[0].Hash || got[1].Hash != sealed[2].Hash || got[1].PrevHash != sealed[0].Hash {
		t.Fatalf("acme's chain after the upgrade = %+v, want the two links sealed before", got)
	}
	l, err := s.AcquireSealLease(ctx, &store.AcquireSealLeaseParams{Owner: "t", LeaseDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.SealEvents(ctx, &store.SealEventsParams{Token: l.Token, LeaseDuration: time.Minute})
	if err != nil || res.Sealed != 2 {
		t.Fatalf("SealEvents after the upgrade = %+v, %v; want the 2 unsealed events", res, err)
	}
	for tenant, want := range map[string]int{"acme": 3, "other": 2} {
		var v auditchain.Verifier
		evs := chain(tenant)
		for _, ae := range evs {
			if err := v.Event(ae.Chained()); err != nil {
				t.Fatalf("%s's chain: %v", tenant, err)
			}
		}
		if h, err := v.Finish(); err != nil || h.Seq != int64(want) {
			t.Errorf("%s's chain ends at %+v, %v; want seq %d", tenant, h, err, want)
		}
	}
	p, err := s.ListProposalAudit(ctx, &store.ListProposalAuditParams{Tenant: "acme", ProposalID: "prp_3"})
	if err != nil || len(p) != 1 || p[0].Seq != 3 || p[0].PrevHash != sealed[2].Hash {
		t.Errorf("prp_3's trail = %+v, %v; want seq 3 after the last link sealed before", p, err)
	}
}
