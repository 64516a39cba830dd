package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
)

// TestRuleFingerprintUpgrade: a schema made before the rule fingerprint
// (version 3) keeps its proposals and grants through migration 0004. Their
// fingerprint is empty, so an old grant still approves a call that carries
// none, and no call made under a fingerprinted rule.
func TestRuleFingerprintUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(t)
	s, err := Open(ctx, pgtest.WithParam(dsn, "pool_max_conns", "2"), &Options{Schema: schema, SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:3] {
		if err := s.migrateOne(ctx, m, len(ms)); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
	now := time.Now().UTC()
	// Rows as schema 3 holds them, written column by column.
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.grants (id, tenant, requester, scope, thread_id, run_id, action,
			action_version, input_digest, origin_proposal_id, granted_by, created_at, activated_at, expires_at, revoked_at, revoked_by)
		VALUES ('grt_old', 'acme', 'alice', 'thread', 't1', '', 'payments.refund', '1', 'sha256:x', 'prp_old', 'bob', $1, $1, NULL, NULL, '')`,
		now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.proposals (id, tenant, requester, thread_id, run_id, tool_call_id,
			action, action_version, input_digest, preview, state_version, confirmation, confirmation_id, mode, status, quorum,
			forbid_self_approval, grant_any_input, grant_ttl, replacement_key, expires_at, operation_id, attempt, consumed_by,
			version, created_at, updated_at)
		VALUES ('prp_old', 'acme', 'alice', 't1', '', 'call_old', 'payments.refund', '1', 'sha256:x', 'p', '', '{"title":"t"}', '',
			'wait', 'succeeded', 1, false, false, 0, '', $1, 'op_old', 1, 'call_old', 5, $2, $2)`,
		now.Add(time.Hour), now); err != nil {
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
