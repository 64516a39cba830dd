package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/internal/cursor"
	"github.com/countersign/countersign/store"
)

// TestQueryPlans pins the index each hot query can use, so that an edit of
// the schema or of a query that loses its index (a partial index whose
// predicate the query no longer implies, an order the index no longer
// gives) fails here. The tables hold a few thousand rows shaped like a
// live store's (mostly settled, a few claimable, due or pending), analysed,
// so that the planner chooses as it would in production.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := smallStore(t)

	now := time.Now()
	// 20000 proposals in 2 tenants and 2000 threads: 1 in 100 approved
	// independent, 1 in 100 executing, 1 in 50 pending, the rest settled.
	insertProposals(t, s, 20000, 2000, now)
	// 20000 events: 1 in 100 of tenant t1, the rest of a busier t0, so
	// that walking all events from the newest would read many of another
	// tenant's first.
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.events (tenant, proposal_id, type, actor, via, status, detail, at)
		SELECT CASE WHEN i % 100 = 0 THEN 't1' ELSE 't0' END, 'prp_' || i, 'proposal.created', 'r', '', 'pending', '', $1::timestamptz
		FROM generate_series(1, 20000) AS i`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE `+s.q.schema+`.proposals, `+s.q.schema+`.events`); err != nil {
		t.Fatal(err)
	}
	list := func(params store.ListProposalsParams, after bool) (string, []any) {
		params.Tenant = "t1"
		var pos *cursor.Position
		if after {
			pos = &cursor.Position{CreatedAt: now, ID: "x"}
		}
		return s.listQuery(&params, pos, 10)
	}
	visible := &store.Visibility{Actor: "a", Principals: []string{"role:x"}}
	tests := []struct {
		name   string
		sql    string
		args   []any
		want   string
		sorted bool // the plan may sort
	}{
		{"claim", s.q.claimBatch, []any{now, "w", int64(1), 10}, "claim_queue_pkey", false},
		{"expiry", s.q.expireDue, []any{now, 10}, "open_proposals_expiry", false},
		{"escalation", s.q.escalateDue, []any{now.Add(time.Minute), 10}, "open_proposals_escalation", false},
		{"reminder", s.q.remindDue, []any{now.Add(time.Minute), 10}, "open_proposals_reminder", false},
		{"replacement", s.q.supersede, []any{"t0", "th4", "r4", "a4", "k4", "prp_new", `{}`, now, "t", "s", "d", "x"}, "open_proposals_replacement", true},
		{"confirmation", s.q.getByConfirmation, []any{"t1", "cnf_1"}, "proposals_confirmation", false},
		// One probe at the end of the tenant's events.
		{"last event id", s.q.lastEventID, []any{"t1"}, "events_tenant", false},
		// The unique index, or the thread's listing index: both find the
		// thread's few rows.
		{"tool call", s.q.getByToolCall, []any{"t1", "th1", "call_1"}, "proposals_tool_call|proposals_thread_list", false},
	}
	for _, l := range []struct {
		name   string
		params store.ListProposalsParams
		after  bool
		want   string
	}{
		{"list", store.ListProposalsParams{}, false, "proposals_list"},
		{"list after", store.ListProposalsParams{}, true, "proposals_list"},
		{"list thread after", store.ListProposalsParams{ThreadID: "th1"}, true, "proposals_thread_list"},
		// A status filter may instead use a partial index on its status and
		// sort the few rows it finds: the planner's choice, by the counts.
		{"list filtered", store.ListProposalsParams{Action: "a1", Visible: visible}, true, "proposals_list"},
		// The inbox (an approver's pending proposals) and an agent's thread
		// view, as the engine's List asks for them: the inbox reads only
		// pending rows, in order.
		{"inbox", store.ListProposalsParams{Statuses: []store.Status{store.StatusPending}, Visible: visible}, false, "open_proposals_pending"},
		{"inbox after", store.ListProposalsParams{Statuses: []store.Status{store.StatusPending}, Visible: visible}, true, "open_proposals_pending"},
		{"thread view", store.ListProposalsParams{ThreadID: "th1", Visible: visible}, false, "proposals_thread_list"},
		{"thread's pending", store.ListProposalsParams{ThreadID: "th1", Statuses: []store.Status{store.StatusPending}}, true, "proposals_thread_list"},
	} {
		sql, args := list(l.params, l.after)
		tests = append(tests, struct {
			name   string
			sql    string
			args   []any
			want   string
			sorted bool
		}{l.name, sql, args, l.want, false})
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The plans checked are the generic plans the store's connections
		// run (DefaultPlanCacheMode).
		var mode string
		if err := tx.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil || mode != DefaultPlanCacheMode {
			t.Fatalf("plan_cache_mode = %q, %v; want %s", mode, err, DefaultPlanCacheMode)
		}
		// EXPLAIN does not run the statement: nothing is claimed.
		for _, tt := range tests {
			got, err := genericPlan(ctx, tx, tt.sql, tt.args...)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			uses := false
			for _, index := range strings.Split(tt.want, "|") {
				uses = uses || strings.Contains(got, "Index Scan using "+index+" ") ||
					strings.Contains(got, "Index Scan Backward using "+index+" ") || strings.Contains(got, "Bitmap Index Scan on "+index) ||
					strings.Contains(got, "Index Only Scan Backward using "+index+" ") || strings.Contains(got, "Index Only Scan using "+index+" ")
			}
			if !uses {
				t.Errorf("%s: plan does not use %s:\n%s", tt.name, tt.want, got)
			}
			// The claim sorts the rows it claimed (at most the limit), never
			// the table.
			if !tt.sorted && (strings.Contains(got, "Sort Key: proposals.") || strings.Contains(got, "Sort Key: p.") ||
				strings.Contains(got, "Sort Key: o.") || strings.Contains(got, "Sort Key: open_proposals.")) {
				t.Errorf("%s: plan sorts:\n%s", tt.name, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestClaimPlanUnderBacklog: when most of the table is claimable (a
// backlog after an outage, a drain), the planner's generic plan expects a
// tenth of the claimable rows from the claim's LIMIT $4, and joined the
// rows it picked to proposals by hashing the whole table: every claim read
// every row, dead versions included (a tenth of the server's CPU in B1,
// docs/profiles/scale.md, change 10). The claim reaches the rows it picked
// through the primary key, whatever the estimate.
func TestClaimPlanUnderBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := smallStore(t)
	now := time.Now()
	insertProposals(t, s, 20000, 200, now)
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.q.schema+`.proposals SET status = 'approved', mode = 'independent'`); err != nil {
		t.Fatal(err)
	}
	requeue(t, s)
	// And 20000 webhook notifications due to one target (a receiver that
	// was down).
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.q.schema+`.notifications (id, tenant, target, event_id,
			event_type, proposal_id, at, status, attempts, next_attempt_at, last_error, updated_at)
		SELECT 'ntf_' || i, 't0', 'hook', i, 'proposal.created', 'prp_' || i, $1, 'pending', 1, $1, '', $1
		FROM generate_series(1, 20000) AS i`, now); err != nil {
		t.Fatal(err)
	}
	// 20000 runs to resume (a worker's backlog), expired sessions and
	// spent MCP nonces.
	for _, sql := range []string{
		`INSERT INTO _S_.threads (tenant, id, owner, created_at) VALUES ('t0', 'th_runs', 'r', $1)`,
		`INSERT INTO _S_.runs (id, tenant, thread_id, agent, roles, status, proposal_ids, awaiting, steps, error,
			version, started_at, updated_at)
		SELECT 'run_' || i, 't0', 'th_runs', 'a', '{}', 'running', '{}', '', 0, '', 1, $1::timestamptz, $1::timestamptz - i * interval '1 ms'
		FROM generate_series(1, 20000) AS i`,
		`INSERT INTO _S_.sessions (id, tenant, actor, credential_sha256, revocable, csrf, created_at, expires_at)
		SELECT 'ses_' || i, 't0', 'a', 'h', true, 'c', $1::timestamptz, $1::timestamptz - i * interval '1 ms' FROM generate_series(1, 20000) AS i`,
		`INSERT INTO _S_.mcp_nonces (tenant, nonce, until_at)
		SELECT 't0', 'n' || i, $1::timestamptz - i * interval '1 ms' FROM generate_series(1, 20000) AS i`,
		`ANALYZE _S_.proposals, _S_.notifications, _S_.runs, _S_.sessions, _S_.mcp_nonces`,
	} {
		var args []any
		if strings.Contains(sql, "$1") {
			args = []any{now}
		}
		if _, err := s.pool.Exec(ctx, qualify(s.q.schema, sql), args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, c := range []struct {
			name, sql, index, table string
			args                    []any
		}{
			{"claim", s.q.claimBatch, "claim_queue_pkey", "proposals|claim_queue", []any{now, "w", int64(1), 200}},
			{"notification claim", qualify(s.q.schema, claimNotificationsSQL), "notifications_due", "notifications",
				[]any{now, "w", int64(1), 200, []string{"hook"}}},
			{"run claim", s.sql(strings.NewReplacer("RCOLS", prefixedRun("r"), "PICK", claimReady).Replace(claimRunsSQL)),
				"runs_ready|runs_open", "runs", []any{now, "w", int64(1), 200}},
			{"session sweep", qualify(s.q.schema, deleteExpiredSessionsSQL), "sessions_expiry", "sessions", []any{now, 200}},
			{"nonce sweep", qualify(s.q.schema, forgetMCPNoncesSQL), "mcp_nonces_until", "mcp_nonces", []any{now, 200}},
		} {
			got, err := genericPlan(ctx, tx, c.sql, c.args...)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			uses := false
			for _, index := range strings.Split(c.index, "|") {
				uses = uses || strings.Contains(got, "Index Scan using "+index+" ")
			}
			if !uses {
				t.Errorf("%s under a backlog: the pick does not use %s:\n%s", c.name, c.index, got)
			}
			for _, table := range strings.Split(c.table, "|") {
				if strings.Contains(got, "Seq Scan on "+table) {
					t.Errorf("%s under a backlog: reads the whole table %s:\n%s", c.name, table, got)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// insertProposals inserts n proposals shaped like a live store's, in 2
// tenants and the given number of threads, created a second apart before
// now: 1 in 100 approved independent, 1 in 100 executing, 1 in 50
// pending, the rest settled.
func insertProposals(t *testing.T, s *Store, n, threads int, now time.Time) {
	t.Helper()
	insertProposalRows(t, s, n, threads, now)
	requeue(t, s)
}

// insertProposalRows inserts insertProposals' rows into proposals alone, as
// a schema before migration 0022 holds them.
func insertProposalRows(t *testing.T, s *Store, n, threads int, now time.Time) {
	t.Helper()
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO `+s.q.schema+`.proposals (`+proposalColumns+`)
		SELECT 'prp_' || i, 't' || (i % 2), 'r' || (i % 7), NULL, 'th' || (i % $3::int), 'run', 'call_' || i,
			'a' || (i % 20), '1', NULL, NULL, 'd', '', '', '{}', 'cnf_' || i,
			CASE WHEN i % 3 = 0 THEN 'independent' ELSE 'wait' END,
			CASE WHEN i % 100 = 0 THEN 'approved' WHEN i % 100 = 1 THEN 'executing' WHEN i % 50 = 2 THEN 'pending' ELSE 'succeeded' END,
			NULL, 1, false, NULL, NULL, false, 0, CASE WHEN i % 4 = 0 THEN 'k' || (i % 9) ELSE '' END, NULL,
			$1::timestamptz + (i % 600) * interval '1 second', 'op_' || i, 0, NULL, NULL, NULL, NULL, '', NULL, NULL, 1,
			$1::timestamptz - i * interval '1 second', $1::timestamptz - i * interval '1 second', '',
			CASE WHEN i % 50 = 2 THEN $1::timestamptz + (i % 600) * interval '1 second' END, NULL,
			CASE WHEN i % 50 = 2 THEN $1::timestamptz + (i % 300) * interval '1 second' END, 0, '', '', 'human', NULL, '', ''
		FROM generate_series(1, $2::int) AS i`, now, n, threads); err != nil {
		t.Fatal(err)
	}
}

// requeue sets the side tables (sidetables_test.go) to the proposals a
// test wrote directly, as the store's own writes would have.
func requeue(t *testing.T, s *Store) {
	t.Helper()
	var sqls []string
	for _, st := range sideTables {
		sqls = append(sqls, `DELETE FROM _S_.`+st.Table, `INSERT INTO _S_.`+st.Table+` (`+st.Columns+`) `+st.Want, `ANALYZE _S_.`+st.Table)
	}
	for _, sql := range sqls {
		if _, err := s.pool.Exec(t.Context(), qualify(s.q.schema, sql)); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// genericPlan is the plan a store's connection runs sql with (its generic
// plan, DefaultPlanCacheMode): prepared under a name, then EXPLAIN
// EXECUTE. EXPLAIN of the statement itself would plan it for the values
// given, a custom plan the store never runs.
func genericPlan(ctx context.Context, tx pgx.Tx, sql string, args ...any) (string, error) {
	if _, err := tx.Exec(ctx, "PREPARE plan_probe AS "+sql); err != nil {
		return "", err
	}
	defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE plan_probe") }()
	params := make([]string, len(args))
	for i := range args {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	// The simple protocol puts the values in the text: a server does not
	// take parameters in a utility statement.
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE plan_probe("+strings.Join(params, ", ")+")",
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		return "", err
	}
	return explained(rows)
}

// explained reads an EXPLAIN's rows into its plan, a line each, trimmed.
func explained(rows pgx.Rows) (string, error) {
	lines, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var line string
		err := r.Scan(&line)
		return strings.TrimSpace(line), err
	})
	return strings.Join(lines, "\n"), err
}
