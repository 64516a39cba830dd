package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// TestRuleFingerprintUpgrade: a database made before the rule fingerprint
// (schema 4) keeps its proposals and grants through migration 0005. Their
// fingerprint is empty, so an old grant still approves a call that carries
// none, and no call made under a fingerprinted rule.
func TestRuleFingerprintUpgrade(t *testing.T) {
	t.Parallel()
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
	now := time.Now().UTC()
	err = s.write(ctx, func(tx *wtx, _ time.Time) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`); err != nil {
			return err
		}
		for _, m := range ms[:4] {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			if m.after != nil {
				if err := m.after(ctx, tx); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, ?, ?)`, m.version, m.name, now.UnixNano()); err != nil {
				return err
			}
		}
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
	if err != nil {
		t.Fatal(err)
	}
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
