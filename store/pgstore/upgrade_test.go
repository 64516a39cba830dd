package pgstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/pgtest"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/storetest"
)

// storeAtVersion opens a store on a fresh schema migrated to version
// (the first version migrations only), with a pool of conns connections
// and the clock now (nil: the wall clock), closed when t ends.
func storeAtVersion(t *testing.T, version int, conns string, now func() time.Time) *Store {
	t.Helper()
	ctx := context.Background()
	dsn, schema := pgtest.NewSchema(t)
	s, err := Open(ctx, pgtest.WithParam(dsn, "pool_max_conns", conns), &Options{Schema: schema, Now: now, SkipMigrations: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms[:version] {
		if err := s.migrateOne(ctx, m, len(ms)); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
	return s
}

// TestRuleFingerprintUpgrade: a schema made before the rule fingerprint
// (version 3) keeps its proposals and grants through migration 0004. Their
// fingerprint is empty, so an old grant still approves a call that carries
// none, and no call made under a fingerprinted rule.
func TestRuleFingerprintUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storeAtVersion(t, 3, "2", nil)
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

// TestConformanceAfterUpgrade runs the store suite on schemas made by the
// previous schema version, holding data written as that version holds it,
// then upgraded by Migrate: every store of the suite is such a schema. The
// old rows are another tenant's settled proposal, with its thread, message,
// event and grant; each is read back after the upgrade.
func TestConformanceAfterUpgrade(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	previous := ms[:len(ms)-1]
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		ctx := context.Background()
		s := storeAtVersion(t, len(previous), "4", now)
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		S := s.q.schema
		for _, stmt := range []string{
			`INSERT INTO ` + S + `.threads (tenant, id, owner, created_at) VALUES ('legacy', 't_old', 'alice', $1)`,
			`INSERT INTO ` + S + `.proposals (id, tenant, requester, thread_id, run_id, tool_call_id,
				action, action_version, input, raw_input, input_digest, preview, state_version, confirmation, confirmation_id,
				mode, status, approvers, quorum, forbid_self_approval, grant_any_input, grant_ttl, replacement_key, decisions,
				expires_at, operation_id, attempt, consumed_by, outcome, version, created_at, updated_at)
			VALUES ('prp_legacy', 'legacy', 'alice', 't_old', '', 'call_old', 'payments.refund', '1', '{"amount":1}', '{"amount":1}',
				'sha256:x', 'p', '', '{"title":"t"}', '', 'independent', 'succeeded', '{role:finance}', 1, false, false, 0, '',
				'[{"actor":"bob","decision":"approved","via":"web","at":"2026-01-02T03:04:05Z"}]', $1, 'op_old', 1, 'call_old',
				'{"proposal_id":"prp_legacy","status":"succeeded","executed":true,"error":null,"summary":"done","at":"2026-01-02T03:04:05Z"}',
				4, $1, $1)`,
			`INSERT INTO ` + S + `.messages (id, tenant, thread_id, role, text, proposal_id, created_at)
			VALUES ('msg_legacy', 'legacy', 't_old', 'assistant', 'done', 'prp_legacy', $1)`,
			`INSERT INTO ` + S + `.events (tenant, proposal_id, type, actor, via, status, detail, at)
			VALUES ('legacy', 'prp_legacy', 'proposal.settled', 'w', '', 'succeeded', 'succeeded', $1)`,
			`INSERT INTO ` + S + `.grants (id, tenant, requester, scope, thread_id, run_id, action, action_version, input_digest,
				origin_proposal_id, granted_by, created_at, activated_at, revoked_by)
			VALUES ('grt_legacy', 'legacy', 'alice', 'thread', 't_old', '', 'payments.refund', '1', 'sha256:x', 'prp_legacy', 'bob', $1, $1, '')`,
		} {
			if _, err := s.pool.Exec(ctx, stmt, at); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "legacy", ID: "prp_legacy"})
		if err != nil || p.Status != store.StatusSucceeded || p.Outcome == nil || len(p.Decisions) != 1 {
			t.Fatalf("the old proposal after the upgrade = %+v, %v", p, err)
		}
		msgs, err := s.ListMessages(ctx, &store.ListMessagesParams{Tenant: "legacy", ThreadID: "t_old"})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("the old thread's messages after the upgrade = %v, %v", msgs, err)
		}
		evs, err := s.ListEvents(ctx, &store.ListEventsParams{Tenant: "legacy", ProposalID: "prp_legacy", Limit: 10})
		if err != nil || len(evs) != 1 {
			t.Fatalf("the old events after the upgrade = %v, %v", evs, err)
		}
		gs, err := s.ListGrants(ctx, &store.ListGrantsParams{Tenant: "legacy"})
		if err != nil || len(gs) != 1 {
			t.Fatalf("the old grants after the upgrade = %v, %v", gs, err)
		}
		// Events written before the chain existed are sealed like new ones.
		if err := storetest.SealAll(ctx, s, "sealer-upgrade"); err != nil {
			t.Fatal(err)
		}
		if head, err := storetest.VerifyChain(ctx, s, "legacy"); err != nil || head.Seq != 1 {
			t.Fatalf("the old events' chain after the upgrade: head %+v, %v; want seq 1", head, err)
		}
		// New events draw ids above the old ones (migration 0009 moved the
		// ids to a sequence of its own) and go on with the chain.
		if _, err := s.CreateProposal(ctx, &store.CreateProposalParams{Proposal: storetest.NewProposal("legacy", "t_old", "call_after_upgrade")}); err != nil {
			t.Fatal(err)
		}
		if err := storetest.SealAll(ctx, s, "sealer-upgrade"); err != nil {
			t.Fatal(err)
		}
		if head, err := storetest.VerifyChain(ctx, s, "legacy"); err != nil || head.Seq != 2 {
			t.Fatalf("the chain after a new event: head %+v, %v; want seq 2", head, err)
		}
		return s
	}, storetest.WithRuleQuery(QueryRule))
}

// TestMessageKeysUpgrade: messages written while their ids were unique in
// the whole schema (version 12) keep every field and their order through
// migration 0013. Afterwards an id is its thread's: another tenant's thread
// of the same name takes an id acme's holds, acme's thread refuses it, and
// the old outcome message holds its proposal's settlement key.
func TestMessageKeysUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storeAtVersion(t, 12, "2", nil)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	S := s.q.schema
	for _, stmt := range []string{
		`INSERT INTO ` + S + `.threads (tenant, id, owner, created_at) VALUES ('acme', 't1', 'alice', $1), ('globex', 't1', 'eve', $1)`,
		// Rows as version 12 holds them, written column by column.
		`INSERT INTO ` + S + `.messages (id, tenant, thread_id, role, text, proposal_id, outcome, created_at, sender, run_id, tool_calls, tool_call_id, result, decision) VALUES
			('m1', 'acme', 't1', 'user', 'hello', '', NULL, $1, 'alice', '', NULL, '', NULL, false),
			('msg_prp_old:succeeded', 'acme', 't1', 'assistant', 'Done.', 'prp_old',
				'{"proposal_id":"prp_old","status":"succeeded","executed":true,"error":null,"summary":"Done.","at":"2026-12-01T12:00:00Z"}', $1, '', '', NULL, '', NULL, false),
			('m_asst', 'acme', 't1', 'assistant', 'Let me look.', '', NULL, $1, '', 'run_1',
				'[{"id":"call_1","action":"get_weather","input":{"city":"Lisbon"},"client":true}]', '', NULL, false),
			('m_tool', 'acme', 't1', 'tool', 'sunny', '', NULL, $1, 'alice', '', NULL, 'call_1', '"sunny"'::bytea, false),
			('m2', 'globex', 't1', 'user', 'yes', '', NULL, $1, 'eve', '', NULL, '', NULL, true)`,
	} {
		if _, err := s.pool.Exec(ctx, stmt, at); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
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
	if len(acme) != 4 || acme[0].ID != "m1" || acme[1].ID != "msg_prp_old:succeeded" || acme[2].ID != "m_asst" || acme[3].ID != "m_tool" {
		t.Fatalf("acme's messages after the upgrade = %+v, want m1, the outcome, m_asst, m_tool", acme)
	}
	switch m := acme; {
	case m[0].Text != "hello" || m[0].Sender != "alice" || m[0].Role != store.RoleUser || !m[0].CreatedAt.Equal(at):
		t.Errorf("m1 after the upgrade = %+v", m[0])
	case m[1].Outcome == nil || m[1].Outcome.Status != store.StatusSucceeded || m[1].ProposalID != "prp_old" || m[1].Text != "Done.":
		t.Errorf("the outcome message after the upgrade = %+v", m[1])
	case len(m[2].ToolCalls) != 1 || !m[2].ToolCalls[0].Client || m[2].RunID != "run_1":
		t.Errorf("m_asst after the upgrade = %+v", m[2])
	case m[3].ToolCallID != "call_1" || string(m[3].Result) != `"sunny"`:
		t.Errorf("m_tool after the upgrade = %+v", m[3])
	}
	if g := list("globex"); len(g) != 1 || g[0].ID != "m2" || !g[0].Decision || g[0].Sender != "eve" {
		t.Fatalf("globex's messages after the upgrade = %+v", g)
	}
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
	if g := list("globex"); len(g) != 2 || g[1].ID != "m1" {
		t.Errorf("globex's messages after a new post = %+v, want m2 then m1", g)
	}
	var status string
	if err := s.pool.QueryRow(ctx, `SELECT outcome_status FROM `+S+`.messages WHERE id = 'msg_prp_old:succeeded'`).Scan(&status); err != nil || status != "succeeded" {
		t.Errorf("the old outcome's outcome_status = %q, %v; want succeeded", status, err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO `+S+`.messages (id, tenant, thread_id, role, text, proposal_id, created_at, outcome_status)
		VALUES ('msg_again', 'acme', 't1', 'assistant', 'again', 'prp_old', $1, 'succeeded')`, at)
	if _, dup := uniqueViolation(err); !dup {
		t.Errorf("a second outcome message of prp_old's success: %v, want a unique violation", err)
	}
}

// TestEventActorKindUpgrade: a chain sealed before events recorded
// actor_kind (version 13) verifies after migration 0014 exactly as it was
// sealed, link for link, and new events go on with it carrying their
// kinds.
func TestEventActorKindUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storeAtVersion(t, 13, "4", nil)
	// The rows as version 13 wrote them (ids drawn by the table), sealed
	// as it sealed them.
	at := time.Date(2026, 12, 3, 9, 0, 0, 123456000, time.UTC)
	S := s.q.schema
	var evs []*store.Event
	for i, tenant := range []string{"acme", "acme", "other", "acme"} {
		e := &store.Event{Tenant: tenant, ProposalID: fmt.Sprint("prp_old", i), Type: store.EventCreated,
			Actor: "alice", Status: store.StatusPending, At: at.Add(time.Duration(i) * time.Second)}
		if err := s.pool.QueryRow(ctx, `INSERT INTO `+S+`.events (tenant, proposal_id, type, actor, via, status, detail, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
			e.Tenant, e.ProposalID, string(e.Type), e.Actor, e.Via, string(e.Status), e.Detail, e.At).Scan(&e.ID); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	before, err := storetest.ChainBeforeKinds(evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, ae := range before {
		if _, err := s.pool.Exec(ctx, `INSERT INTO `+S+`.audit_chain (tenant, seq, event_id, prev_hash, hash) VALUES ($1, $2, $3, $4, $5)`,
			ae.Tenant, ae.Seq, ae.ID, ae.PrevHash, ae.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE `+S+`.audit_sealed SET through = $1 WHERE name = $2`, evs[len(evs)-1].ID, sealLeaseName); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.RequireUpgradedChain(t, ctx, s, "acme", "t1", before)
	if h, err := storetest.VerifyChain(ctx, s, "other"); err != nil || h.Seq != 1 {
		t.Errorf("other's chain after the upgrade: head %+v, %v; want seq 1", h, err)
	}
}

// TestClaimQueueUpgrade: migration 0022 queues the proposals a worker may
// claim that a schema before it holds, each as it stands, and nothing else;
// a worker then claims the claimable ones, and the inbox still lists the
// pending ones.
func TestClaimQueueUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storeAtVersion(t, 21, "2", nil)
	now := time.Now().UTC()
	insertProposalRows(t, s, 600, 6, now)
	count := func(where string) int { return countProposals(t, s, where) }
	claimable := count(`(status = 'approved' AND mode = 'independent') OR (status = 'executing' AND lease_token IS NULL)`)
	pending := count(`status = 'pending'`)
	if claimable == 0 || pending == 0 {
		t.Fatalf("the rows hold %d claimable and %d pending proposals; the test needs some of each", claimable, pending)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkSideTable(t, s, "claim_queue")
	got, err := s.ClaimBatch(ctx, &store.ClaimBatchParams{Owner: "w", LeaseDuration: time.Minute, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != claimable {
		t.Errorf("claimed %d proposals after the upgrade, want %d", len(got), claimable)
	}
	list, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t0", Statuses: []store.Status{store.StatusPending}})
	if err != nil {
		t.Fatal(err)
	}
	if want := count(`status = 'pending' AND tenant = 't0'`); len(list.Proposals) != want {
		t.Errorf("the inbox lists %d pending proposals of t0 after the upgrade, want %d", len(list.Proposals), want)
	}
}

// TestOpenProposalsUpgrade migrates a store of version 22 whose proposals
// are pending, approved (waiting and independent), executing and settled:
// migration 0023 must give the open proposals exactly the rows of those
// that may expire, and the sweeps and the inbox must find them there.
func TestOpenProposalsUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().UTC()
	s := storeAtVersion(t, 22, "2", func() time.Time { return now.Add(time.Hour) })
	insertProposalRows(t, s, 600, 6, now)
	count := func(where string) int { return countProposals(t, s, where) }
	pending, waiting := count(`status = 'pending'`), count(`status = 'approved' AND mode = 'wait'`)
	if pending == 0 || waiting == 0 || count(`status = 'approved' AND mode = 'independent'`) == 0 {
		t.Fatal("the rows need pending, waiting and independent approved proposals")
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// The rows were written into proposals alone, at a version that had
	// the claim queue already: only the open proposals are the
	// migration's.
	checkSideTable(t, s, "open_proposals")
	var open int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.q.schema+`.open_proposals`).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != pending+waiting {
		t.Errorf("%d open proposals after the upgrade, want %d pending and %d waiting", open, pending, waiting)
	}
	list, err := s.ListProposals(ctx, &store.ListProposalsParams{Tenant: "t0", Statuses: []store.Status{store.StatusPending}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if want := count(`status = 'pending' AND tenant = 't0'`); len(list.Proposals) != want {
		t.Errorf("the inbox lists %d pending proposals of t0 after the upgrade, want %d", len(list.Proposals), want)
	}
	// Every row expires within 600 seconds of now (insertProposalRows);
	// the store's clock reads an hour later.
	expired, err := s.ExpireDue(ctx, &store.ExpireDueParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != pending+waiting {
		t.Errorf("expired %d proposals after the upgrade, want %d", len(expired), pending+waiting)
	}
}

// countProposals counts s's proposals that where holds.
func countProposals(t *testing.T, s *Store, where string) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+s.q.schema+`.proposals WHERE `+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkSideTable fails t unless the side table named table (sidetables_test.go)
// holds exactly the rows s's proposals call for.
func checkSideTable(t *testing.T, s *Store, table string) {
	t.Helper()
	for _, st := range sideTables {
		if st.Table != table {
			continue
		}
		wrong, err := sideTableDiff(t.Context(), s.pool, s.q.schema, st)
		if err != nil {
			t.Fatal(err)
		}
		if len(wrong) > 0 {
			t.Fatalf("%s after the upgrade: %v", st.Name, wrong)
		}
		return
	}
	t.Fatalf("no side table %s", table)
}
