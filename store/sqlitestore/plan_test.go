package sqlitestore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/cursor"
	"github.com/countersign/countersign/store"
)

// TestQueryPlans pins the index each hot query uses, so that an edit of the
// schema or of a query that falls back to a table scan or a sort fails here.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	list := func(params store.ListProposalsParams, after bool) (string, []any) {
		params.Tenant = "t"
		var pos *cursor.Position
		if after {
			pos = &cursor.Position{CreatedAt: time.Unix(1, 0), ID: "x"}
		}
		q, args, err := listQuery(&params, pos, 10)
		if err != nil {
			t.Fatal(err)
		}
		return q, args
	}
	type query struct {
		sql  string
		args []any
	}
	q := func(sql string, args ...any) query { return query{sql, args} }
	lq := func(params store.ListProposalsParams, after bool) query {
		sql, args := list(params, after)
		return query{sql, args}
	}
	visible := &store.Visibility{Actor: "a", Principals: []string{"role:x"}}
	tests := []struct {
		name  string
		query query
		want  string
	}{
		{"claim", q(claimSQL, 1, 1, 10), "USING INDEX proposals_claim"},
		{"claim events", q(claimEventsSQL, "proposal.claimed", "w", 1, `["a","b"]`), "SEARCH p USING INDEX sqlite_autoindex_proposals_1 (id=?)"},
		{"expiry", q(expireDueSQL, 1, 10), "USING INDEX proposals_expiry"},
		{"escalation", q(escalateDueSQL, 1, 10), "USING INDEX proposals_escalation"},
		{"reminder", q(remindDueSQL, 1, 10), "USING INDEX proposals_reminder"},
		{"replacement", q(replacementSQL, "t", "th", "r", "a", "k"), "USING INDEX proposals_replacement"},
		{"confirmation", q(byConfirmationSQL, "t", "c"), "USING INDEX proposals_confirmation"},
		// A call's lookup: the thread by its key, the tool call's proposal
		// by the tool call's unique index, its id alone.
		{"call lookup", q(lookupSQL, "t", "th", "c", "t", "th"), "SEARCH t USING PRIMARY KEY (tenant=? AND id=?) LEFT-JOIN; " +
			"SCALAR SUBQUERY 1; SEARCH proposals USING INDEX proposals_tool_call (tenant=? AND thread_id=? AND tool_call_id=?)"},
		// With the grant query: the grant's seq through the match index, the
		// newest first by its key (no sort), then its row by that key.
		{"call lookup with grant", q(lookupGrantSQL, "t", "th", "c", "t", "th", "t", "r", "a", "1", "th", "f", "d", "run", 1),
			"SEARCH t USING PRIMARY KEY (tenant=? AND id=?) LEFT-JOIN; SEARCH g USING INTEGER PRIMARY KEY (rowid=?) LEFT-JOIN; " +
				"SCALAR SUBQUERY 3; SEARCH grants USING INDEX grants_match (tenant=? AND requester=? AND action=? AND action_version=? AND thread_id=?); " +
				"SCALAR SUBQUERY 1; SEARCH proposals USING INDEX proposals_tool_call (tenant=? AND thread_id=? AND tool_call_id=?)"},
		// The sealer and the chain's readers.
		{"chain head", q(chainHeadSQL, "t"), "SEARCH audit_blocks USING INDEX sqlite_autoindex_audit_blocks_1 (tenant=?)"},
		{"unsealed", q(unsealedSQL, 1, 10), "SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"},
		// The checkpointer's walk probes the tenants' index once a tenant,
		// and each tenant's last block and checkpoint by their keys; only
		// the page (at most its limit of tenants) is sorted.
		{"chain heads", q(chainHeadsSQL, "", 10), "SEARCH audit_blocks USING COVERING INDEX audit_blocks_tenant (tenant>?); RECURSIVE STEP; SCAN t; " +
			"CORRELATED SCALAR SUBQUERY 3; SEARCH b USING COVERING INDEX audit_blocks_tenant (tenant>?); SCAN t; " +
			"SEARCH h USING INDEX sqlite_autoindex_audit_blocks_1 (tenant=? AND last_seq=?); CORRELATED SCALAR SUBQUERY 5; " +
			"SEARCH x USING COVERING INDEX sqlite_autoindex_audit_blocks_1 (tenant=?); SEARCH k USING PRIMARY KEY (tenant=? AND seq=?) LEFT-JOIN; " +
			"CORRELATED SCALAR SUBQUERY 6; SEARCH y USING PRIMARY KEY (tenant=?); USE TEMP B-TREE FOR ORDER BY"},
		{"list checkpoints", q(listCheckpointsSQL, "t", 1, 10), "SEARCH audit_checkpoints USING PRIMARY KEY (tenant=? AND seq>?)"},
		// A page of the chain walks the tenant's blocks in order; only each
		// block's events are sorted, by their place in it (at most a seal's
		// batch), and the page stops at its limit.
		{"list audit", q(listAuditSQL, "t", 1, 10), "SEARCH b USING INDEX sqlite_autoindex_audit_blocks_1 (tenant=? AND last_seq>?); SCAN j VIRTUAL TABLE INDEX 1:; SEARCH e USING INTEGER PRIMARY KEY (rowid=?); USE TEMP B-TREE FOR LAST TERM OF ORDER BY"},
		{"list a proposal's audit", q(listProposalAuditSQL, "t", "p", 1, 10), "SEARCH e USING INDEX events_proposal (tenant=? AND proposal_id=? AND id>?); SEARCH b USING INTEGER PRIMARY KEY (rowid=?) LEFT-JOIN; CORRELATED SCALAR SUBQUERY 1; SEARCH x USING COVERING INDEX audit_blocks_tenant (tenant=? AND rowid>?)"},
		// One probe at the end of the tenant's events.
		{"last event id", q(lastEventIDSQL, "t"), "USING COVERING INDEX events_tenant (tenant=?)"},
		{"list", lq(store.ListProposalsParams{}, false), "USING INDEX proposals_list"},
		{"list after", lq(store.ListProposalsParams{}, true), "USING INDEX proposals_list (tenant=? AND (created_at,id)<(?,?))"},
		{"list thread after", lq(store.ListProposalsParams{ThreadID: "th"}, true), "USING INDEX proposals_thread_list (tenant=? AND thread_id=? AND (created_at,id)<(?,?))"},
		{"list filtered", lq(store.ListProposalsParams{
			Statuses: []store.Status{store.StatusPending}, Action: "x", Visible: visible,
		}, true), "USING INDEX proposals_pending (tenant=? AND (created_at,id)<(?,?))"},
		// The inbox (an approver's pending proposals) and an agent's thread
		// view, as the engine's List asks for them.
		{"inbox", lq(store.ListProposalsParams{Statuses: []store.Status{store.StatusPending}, Visible: visible}, false),
			"USING INDEX proposals_pending (tenant=?)"},
		{"inbox after", lq(store.ListProposalsParams{Statuses: []store.Status{store.StatusPending}, Visible: visible}, true),
			"USING INDEX proposals_pending (tenant=? AND (created_at,id)<(?,?))"},
		{"thread view", lq(store.ListProposalsParams{ThreadID: "th", Visible: visible}, false),
			"USING INDEX proposals_thread_list (tenant=? AND thread_id=?)"},
		// Other statuses than pending, or several, walk the list in order.
		{"list two statuses", lq(store.ListProposalsParams{
			Statuses: []store.Status{store.StatusPending, store.StatusApproved}, Visible: visible,
		}, true), "USING INDEX proposals_list (tenant=? AND (created_at,id)<(?,?))"},
	}
	for _, tt := range tests {
		rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+tt.query.sql, tt.query.args...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		_ = rows.Close()
		got := strings.Join(plan, "; ")
		// No sort but one the wanted plan names.
		if !strings.Contains(got, tt.want) || strings.Count(got, "TEMP B-TREE") > strings.Count(tt.want, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want %q and no other sort", tt.name, got, tt.want)
		}
	}
}
