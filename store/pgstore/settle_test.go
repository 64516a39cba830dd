package pgstore

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// TestSettleChangesOnlySettledColumns pins what SettleMany's set-based
// UPDATE relies on: store.ApplySettle (with store.Finish) changes only the
// columns settleRowsSQL writes — status, lease, next attempt, outcome,
// version, updated_at — and its change carries no grant to store. If a rule
// starts changing another field, this fails, and settleRowsSQL must write it.
func TestSettleChangesOnlySettledColumns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	next := now.Add(time.Minute)
	errText := "boom"
	base := func() *store.Proposal {
		na := now.Add(-time.Minute)
		return &store.Proposal{
			ID: "prp_1", Tenant: "acme", Requester: "alice", RequesterRoles: []string{"r"}, ThreadID: "t1", RunID: "run",
			ToolCallID: "c1", Action: "a", ActionVersion: "1", Input: json.RawMessage(`{"x":1}`), RawInput: json.RawMessage(`{"x": 1}`),
			InputDigest: "d", Preview: "p", StateVersion: "sv", Confirmation: store.Confirmation{Title: "T", Verb: "V"},
			ConfirmationID: "cnf", Mode: store.ModeIndependent, Status: store.StatusExecuting, Approvers: []string{"requester"},
			Quorum: 1, ForbidSelfApproval: true, Channels: []string{"web"}, RememberScopes: []store.Scope{store.ScopeRun},
			GrantAnyInput: true, GrantTTL: time.Hour, ReplacementKey: "k",
			Decisions: []store.Decision{{Actor: "bob", Decision: store.VerdictApproved, Via: "web", At: now.Add(-time.Hour)}},
			ExpiresAt: now.Add(time.Hour), OperationID: "op", Attempt: 2,
			Lease:      &store.Lease{Owner: "w", Token: "tok", Generation: 7, ExpiresAt: now.Add(time.Minute)},
			ConsumedBy: "c1", NextAttemptAt: &na,
			Outcome: &store.Outcome{ProposalID: "prp_1", Status: store.StatusReconciling, Reconciles: 1, At: now.Add(-time.Minute)},
			Version: 7, CreatedAt: now.Add(-2 * time.Hour), UpdatedAt: now.Add(-time.Minute),
		}
	}
	fence := store.Fence{Token: "tok", Generation: 7}
	for _, from := range []store.Status{store.StatusExecuting, store.StatusReconciling} {
		for _, sp := range []store.SettleParams{
			{Status: store.StatusSucceeded, Executed: new(true), Receipt: "r", Result: json.RawMessage(`{"ok":true}`)},
			{Status: store.StatusFailed, Executed: new(false), Error: &errText},
			{Status: store.StatusUnknown, Error: &errText, Presentation: "shown"},
			{Status: store.StatusReconciling, Error: &errText},
			{Status: store.StatusReconciling, Error: &errText, ReleaseLease: true, NextAttemptAt: &next, Reconciles: 3},
		} {
			sp.Tenant, sp.ID, sp.Fence = "acme", "prp_1", fence
			p := base()
			p.Status = from
			w := p.Clone()
			c, err := store.ApplySettle(w, &sp, now)
			if err != nil {
				t.Fatalf("from %s, settle to %s: %v", from, sp.Status, err)
			}
			store.Finish(w, now)
			if c.Grant != nil {
				t.Errorf("from %s, settle to %s: the change stores a grant", from, sp.Status)
			}
			// Blank the columns settleRowsSQL writes; nothing else may differ.
			for _, x := range []*store.Proposal{p, w} {
				x.Status, x.Lease, x.NextAttemptAt, x.Outcome, x.Version, x.UpdatedAt = "", nil, nil, nil, 0, time.Time{}
			}
			if !reflect.DeepEqual(p, w) {
				t.Errorf("from %s, settle to %s: ApplySettle changed a column SettleMany does not write:\n got %+v\nwant %+v", from, sp.Status, w, p)
			}
		}
	}
}

// TestSettleQueriesQualified is TestQueriesQualified for SettleMany's
// statements.
func TestSettleQueriesQualified(t *testing.T) {
	t.Parallel()
	q := newQueries(`"s"`)
	for name, sql := range map[string]string{
		"settleRows": q.settleRows, "insertEvents": q.insertEvents, "admitMessages": q.admitMessages,
		"activateGrantsMany": q.activateGrantsMany,
	} {
		if strings.Contains(sql, schemaToken) {
			t.Errorf("%s: unreplaced token in %s", name, sql)
		}
		for _, table := range []string{"proposals", "events", "messages", "threads", "grants"} {
			for _, kw := range []string{"FROM ", "INTO ", "UPDATE ", "JOIN "} {
				if strings.Contains(sql, kw+table) {
					t.Errorf("%s: unqualified %s%s", name, kw, table)
				}
			}
		}
	}
}
