package sqlitestore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/auditchain"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
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

// TestAuditBlocksUpgrade: a chain stored a row an event (schema 12) moves
// into blocks of at most 1,000 events through migration 0013, link for
// link; a link deleted by hand before the upgrade is still a gap that
// verification names after it; and the sealer goes on from each head.
func TestAuditBlocksUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	// acme's 2,343 events, other's and gapped's 41 each, interleaved; all
	// but the last 45 ids sealed as schema 12 sealed them.
	var evs []*store.Event
	for i := range 2425 {
		tenant := "acme"
		switch {
		case i%60 == 1:
			tenant = "other"
		case i%60 == 2:
			tenant = "gapped"
		}
		evs = append(evs, &store.Event{ID: int64(i + 1), Tenant: tenant, ProposalID: fmt.Sprint("prp_", i), Type: store.EventCreated,
			Actor: "alice", Via: "api", Status: store.StatusPending, Detail: fmt.Sprint("proposed ", i), At: at.Add(time.Duration(i) * time.Millisecond)})
	}
	const sealedBefore = 2380
	var before []*store.AuditEvent
	s := atSchema(t, 12, func(ctx context.Context, tx *wtx) error {
		for _, e := range evs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO events (id, tenant, proposal_id, type, actor, via, status, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				e.ID, e.Tenant, e.ProposalID, string(e.Type), e.Actor, e.Via, string(e.Status), e.Detail, e.At.UnixNano()); err != nil {
				return err
			}
		}
		before = store.ChainEvents(map[string]store.ChainHead{}, evs[:sealedBefore])
		for _, ae := range before {
			prev, _ := hex.DecodeString(ae.PrevHash)
			hash, _ := hex.DecodeString(ae.Hash)
			if _, err := tx.ExecContext(ctx, `INSERT INTO audit_chain (event_id, tenant, seq, prev_hash, hash) VALUES (?, ?, ?, ?, ?)`,
				ae.ID, ae.Tenant, ae.Seq, prev, hash); err != nil {
				return err
			}
		}
		// gapped's link at seq 20 is deleted by hand.
		if _, err := tx.ExecContext(ctx, `DELETE FROM audit_chain WHERE tenant = 'gapped' AND seq = 20`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE audit_sealed SET through = ? WHERE name = 'audit'`, sealedBefore)
		return err
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var blocks, longest int
	if err := s.rq.QueryRowContext(ctx, `SELECT count(*), max(last_seq - first_seq + 1) FROM audit_blocks WHERE tenant = 'acme'`).Scan(&blocks, &longest); err != nil {
		t.Fatal(err)
	}
	if blocks != 3 || longest != 1000 {
		t.Errorf("acme's chain moved into %d blocks, the longest of %d events; want 3, of at most 1000", blocks, longest)
	}
	// Every link is the one sealed before.
	for _, tenant := range []string{"acme", "other"} {
		got, err := storetest.ReadChain(ctx, s, tenant)
		if err != nil {
			t.Fatal(err)
		}
		var want []*store.AuditEvent
		for _, ae := range before {
			if ae.Tenant == tenant {
				want = append(want, ae)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s's chain after the upgrade has %d links, want %d", tenant, len(got), len(want))
		}
		for i := range want {
			if g, w := got[i], want[i]; g.ID != w.ID || g.Seq != w.Seq || g.PrevHash != w.PrevHash || g.Hash != w.Hash || g.Detail != w.Detail {
				t.Fatalf("%s's link %d after the upgrade = %+v, want %+v", tenant, i, g, w)
			}
		}
	}
	if err := storetest.SealAll(ctx, s, "upgraded"); err != nil {
		t.Fatal(err)
	}
	count := map[string]int64{}
	for _, e := range evs {
		count[e.Tenant]++
	}
	for _, tenant := range []string{"acme", "other"} {
		want := count[tenant]
		if h, err := storetest.VerifyChain(ctx, s, tenant); err != nil || h.Seq != want {
			t.Errorf("%s's chain after sealing on = %+v, %v; want it whole to seq %d", tenant, h, err, want)
		}
	}
	var be *auditchain.BreakError
	if _, err := storetest.VerifyChain(ctx, s, "gapped"); !errors.As(err, &be) || be.Seq != 20 || !strings.Contains(be.Reason, "missing") {
		t.Errorf("gapped's chain = %v, want broken at seq 20, missing", err)
	}
	// An event's link, from its block: acme's first, the first of its
	// second block (whose prev_hash is the block's), one in the middle of
	// a block, and one sealed after the upgrade.
	atSeq := func(seq int64) *store.Event {
		for _, ae := range before {
			if ae.Tenant == "acme" && ae.Seq == seq {
				return &ae.Event
			}
		}
		t.Fatalf("acme has no seq %d", seq)
		return nil
	}
	for _, e := range []*store.Event{atSeq(1), atSeq(1001), atSeq(1500), evs[2400]} {
		p, err := s.ListProposalAudit(ctx, &store.ListProposalAuditParams{Tenant: e.Tenant, ProposalID: e.ProposalID})
		if err != nil || len(p) != 1 || p[0].Seq == 0 || p[0].Hash == "" {
			t.Errorf("event %d's trail = %+v, %v; want its link", e.ID, p, err)
			continue
		}
		chain, err := storetest.ReadChain(ctx, s, e.Tenant)
		if err != nil {
			t.Fatal(err)
		}
		if l := chain[p[0].Seq-1]; l.ID != e.ID || l.Hash != p[0].Hash || l.PrevHash != p[0].PrevHash {
			t.Errorf("event %d's trail shows link %+v, the chain has %+v there", e.ID, p[0], l)
		}
	}
}

// TestMessageKeysUpgrade: messages written while their ids were unique in
// the whole database (schema 14) keep every field, their order and
// AUTOINCREMENT's high-water mark through migration 0016, which rebuilds
// the table. Afterwards an id is its thread's: another tenant's thread of
// the same name takes an id acme's holds, acme's thread refuses it, and the
// old outcome message holds its proposal's settlement key.
func TestMessageKeysUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	s := atSchema(t, 15, func(ctx context.Context, tx *wtx) error {
		for _, stmt := range []string{
			`INSERT INTO threads (tenant, id, owner, run_id, created_at) VALUES ('acme', 't1', 'alice', '', ?1)`,
			`INSERT INTO threads (tenant, id, owner, run_id, created_at) VALUES ('globex', 't1', 'eve', '', ?1)`,
			// Rows as schema 15 holds them, written column by column, seq
			// with gaps.
			`INSERT INTO messages (seq, id, tenant, thread_id, role, text, proposal_id, outcome, created_at, sender, run_id, tool_calls, tool_call_id, result, decision)
				VALUES (3, 'm1', 'acme', 't1', 'user', 'hello', '', NULL, ?1, 'alice', '', NULL, '', NULL, 0)`,
			`INSERT INTO messages (seq, id, tenant, thread_id, role, text, proposal_id, outcome, created_at, sender, run_id, tool_calls, tool_call_id, result, decision)
				VALUES (5, 'msg_prp_fmt:succeeded', 'acme', 't1', 'assistant', 'Done.', 'prp_fmt', '` + storedOutcomeJSON + `', ?1, '', '', NULL, '', NULL, 0)`,
			`INSERT INTO messages (seq, id, tenant, thread_id, role, text, proposal_id, outcome, created_at, sender, run_id, tool_calls, tool_call_id, result, decision)
				VALUES (6, 'm_asst', 'acme', 't1', 'assistant', 'Let me look.', '', NULL, ?1, '', 'run_1',
					'[{"id":"call_1","action":"get_weather","input":{"city":"Lisbon"},"client":true}]', '', NULL, 0)`,
			`INSERT INTO messages (seq, id, tenant, thread_id, role, text, proposal_id, outcome, created_at, sender, run_id, tool_calls, tool_call_id, result, decision)
				VALUES (7, 'm_tool', 'acme', 't1', 'tool', 'sunny', '', NULL, ?1, 'alice', '', NULL, 'call_1', CAST('"sunny"' AS BLOB), 0)`,
			`INSERT INTO messages (seq, id, tenant, thread_id, role, text, proposal_id, outcome, created_at, sender, run_id, tool_calls, tool_call_id, result, decision)
				VALUES (9, 'm2', 'globex', 't1', 'user', 'yes', '', NULL, ?1, 'eve', '', NULL, '', NULL, 1)`,
			// A message deleted since: the high-water mark stays at 20.
			`INSERT INTO messages (seq, id, tenant, thread_id, role, text, proposal_id, created_at) VALUES (20, 'm_gone', 'acme', 't1', 'user', 'x', '', ?1)`,
			`DELETE FROM messages WHERE id = 'm_gone'`,
		} {
			if _, err := tx.ExecContext(ctx, stmt, at); err != nil {
				return fmt.Errorf("%s: %w", stmt, err)
			}
		}
		return nil
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	list := func(tenant string) []*store.Message {
		t.Helper()
		msgs, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: tenant, ThreadID: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	acme := list("acme")
	if len(acme) != 4 || acme[0].ID != "m1" || acme[1].ID != "msg_prp_fmt:succeeded" || acme[2].ID != "m_asst" || acme[3].ID != "m_tool" {
		t.Fatalf("acme's messages after the upgrade = %+v, want m1, the outcome, m_asst, m_tool", acme)
	}
	switch m := acme; {
	case m[0].Text != "hello" || m[0].Sender != "alice" || m[0].Role != store.RoleUser || !m[0].CreatedAt.Equal(time.Unix(0, at)):
		t.Errorf("m1 after the upgrade = %+v", m[0])
	case m[1].Outcome == nil || m[1].Outcome.Status != store.StatusSucceeded || m[1].ProposalID != "prp_fmt" || m[1].Text != "Done.":
		t.Errorf("the outcome message after the upgrade = %+v", m[1])
	case len(m[2].ToolCalls) != 1 || !m[2].ToolCalls[0].Client || m[2].RunID != "run_1":
		t.Errorf("m_asst after the upgrade = %+v", m[2])
	case m[3].ToolCallID != "call_1" || string(m[3].Result) != `"sunny"`:
		t.Errorf("m_tool after the upgrade = %+v", m[3])
	}
	if g := list("globex"); len(g) != 1 || g[0].ID != "m2" || !g[0].Decision || g[0].Sender != "eve" {
		t.Fatalf("globex's messages after the upgrade = %+v", g)
	}
	// An id is the thread's now.
	post := func(tenant, owner string) error {
		_, err := s.PostMessage(ctx, &store.PostMessageParams{Owner: owner,
			Message: &store.Message{ID: "m1", Tenant: tenant, ThreadID: "t1", Role: store.RoleUser, Text: "again", Sender: owner}})
		return err
	}
	if err := post("globex", "eve"); err != nil {
		t.Fatalf("globex's t1 taking m1 after the upgrade: %v", err)
	}
	if err := post("acme", "alice"); !errors.Is(err, store.ErrMessageIDTaken) {
		t.Fatalf("acme's t1 taking m1 again after the upgrade: %v, want ErrMessageIDTaken", err)
	}
	var seq int64
	if err := s.rq.QueryRowContext(ctx, `SELECT seq FROM messages WHERE tenant = 'globex' AND id = 'm1'`).Scan(&seq); err != nil || seq <= 20 {
		t.Errorf("a new message's seq after the upgrade = %d, %v; want above the old high-water mark 20", seq, err)
	}
	// The old outcome holds its settlement's key.
	var status string
	if err := s.rq.QueryRowContext(ctx, `SELECT outcome_status FROM messages WHERE id = 'msg_prp_fmt:succeeded'`).Scan(&status); err != nil || status != "succeeded" {
		t.Errorf("the old outcome's outcome_status = %q, %v; want succeeded", status, err)
	}
	err := s.write(ctx, func(tx *wtx, _ time.Time) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO messages (id, tenant, thread_id, role, text, proposal_id, created_at, outcome_status)
			VALUES ('msg_again', 'acme', 't1', 'assistant', 'again', 'prp_fmt', 0, 'succeeded')`)
		return err
	})
	if _, dup := uniqueViolation(err); !dup {
		t.Errorf("a second outcome message of prp_fmt's success: %v, want a unique violation", err)
	}
}

// TestEventActorKindUpgrade: a chain sealed before events recorded
// actor_kind (schema 16) verifies after migration 0017 exactly as it was
// sealed, link for link, and new events go on with it carrying their
// kinds.
func TestEventActorKindUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Date(2026, 12, 3, 9, 0, 0, 123456000, time.UTC)
	var evs []*store.Event
	for i, tenant := range []string{"acme", "acme", "other", "acme"} {
		evs = append(evs, &store.Event{ID: int64(i + 1), Tenant: tenant, ProposalID: fmt.Sprint("prp_old", i), Type: store.EventCreated,
			Actor: "alice", Status: store.StatusPending, At: at.Add(time.Duration(i) * time.Second)})
	}
	before, err := storetest.ChainBeforeKinds(evs)
	if err != nil {
		t.Fatal(err)
	}
	s := atSchema(t, 16, func(ctx context.Context, tx *wtx) error {
		// The rows as schema 16 wrote them, sealed as it sealed them.
		for _, e := range evs {
			if _, err := tx.ExecContext(ctx, `INSERT INTO events (id, tenant, proposal_id, type, actor, via, status, detail, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				e.ID, e.Tenant, e.ProposalID, string(e.Type), e.Actor, e.Via, string(e.Status), e.Detail, e.At.UnixNano()); err != nil {
				return err
			}
		}
		blocks, err := newSealBlocks(before)
		if err != nil {
			return err
		}
		for _, b := range blocks {
			if _, err := tx.ExecContext(ctx, sealBlockSQL, b.lastID, b.tenant, b.firstSeq, b.lastSeq, string(b.ids), b.prev, b.hashes); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE audit_sealed SET through = ? WHERE name = ?`, len(evs), sealLeaseName)
		return err
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.RequireUpgradedChain(t, ctx, s, "acme", "t1", before)
	if h, err := storetest.VerifyChain(ctx, s, "other"); err != nil || h.Seq != 1 {
		t.Errorf("other's chain after the upgrade: head %+v, %v; want seq 1", h, err)
	}
}
