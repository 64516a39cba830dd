package server

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/cstype"
)

// TestWireShapes pins the JSON of every wire type, converted from store
// records that carry every field (the store's own ones too, which must not
// appear) and times on a non-UTC clock: the API's shapes are the server's,
// whatever the records' own encoding.
func TestWireShapes(t *testing.T) {
	zone := time.FixedZone("CET", 3600)
	at := time.Date(2026, 3, 1, 13, 4, 5, 0, zone) // 12:04:05Z
	later := at.Add(time.Hour)
	executed, errText := true, "boom"
	outcome := &cstype.Outcome{ProposalID: "prp_1", Status: cstype.StatusSucceeded, Executed: &executed,
		Receipt: "rf_1", Result: json.RawMessage(`{"ok":true}`), Error: &errText, Summary: "done",
		Note: "checked", ResolvedBy: "carol", Reconciles: 2, At: at}
	p := &cstype.Proposal{
		ID: "prp_1", Tenant: "acme", Requester: "alice", RequesterRoles: []string{"agent"},
		ThreadID: "t1", RunID: "r1", ToolCallID: "call_1", Action: "payments.refund", ActionVersion: "1",
		Input: json.RawMessage(`{"amount":40}`), RawInput: json.RawMessage(`{"amount": 40}`),
		InputDigest: "sha256:ab", Preview: "Refund 40", StateVersion: "v7",
		Confirmation: cstype.Confirmation{Title: "Refund 40", Verb: "Refund"}, ConfirmationID: "cnf_secret",
		Mode: cstype.ModeWait, Status: cstype.StatusSucceeded, Approvers: []string{"role:finance"}, Quorum: 1,
		ForbidSelfApproval: true, Channels: []string{"api"}, GrantTTL: time.Minute, ReplacementKey: "c_9",
		Decisions: []cstype.Decision{{Actor: "bob", Decision: cstype.VerdictApproved, Via: "api", At: at,
			Reason: "ok", Remember: cstype.ScopeThread}},
		ExpiresAt: later, OperationID: "op_1", Attempt: 3,
		Lease:      &cstype.Lease{Owner: "w1", Token: "lease_secret", Generation: 4, ExpiresAt: later},
		ConsumedBy: "call_1", NextAttemptAt: &later, Outcome: outcome, Version: 9, CreatedAt: at, UpdatedAt: later,
		RuleMatch: "payments.*", RuleWhen: "input.amount > 10 && thread_id != 'x'",
	}
	grant := &cstype.Grant{ID: "gr_1", Tenant: "acme", Requester: "alice", Scope: cstype.ScopeRun, ThreadID: "t1",
		RunID: "r1", Action: "payments.refund", ActionVersion: "1", InputDigest: "sha256:ab",
		OriginProposalID: "prp_1", GrantedBy: "bob", CreatedAt: at, ActivatedAt: &at, RevokedBy: ""}
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"proposal", wireProposal(p), `{"id":"prp_1","tenant":"acme","requester":"alice","thread_id":"t1","run_id":"r1",` +
			`"tool_call_id":"call_1","action":"payments.refund","action_version":"1","input":{"amount":40},` +
			`"input_digest":"sha256:ab","preview":"Refund 40","state_version":"v7",` +
			`"confirmation":{"title":"Refund 40","verb":"Refund"},"mode":"wait","status":"succeeded",` +
			`"approvers":["role:finance"],"quorum":1,"decisions":[{"actor":"bob","decision":"approved","via":"api",` +
			`"at":"2026-03-01T12:04:05Z","reason":"ok","remember":"thread"}],"expires_at":"2026-03-01T13:04:05Z",` +
			`"operation_id":"op_1","outcome":{"proposal_id":"prp_1","status":"succeeded","executed":true,` +
			`"receipt":"rf_1","result":{"ok":true},"error":"boom","summary":"done","note":"checked",` +
			`"resolved_by":"carol","reconcile_attempts":2,"at":"2026-03-01T12:04:05Z"},` +
			`"rule":{"match":"payments.*","when":"input.amount \u003e 10 \u0026\u0026 thread_id != 'x'"},` +
			`"created_at":"2026-03-01T12:04:05Z","updated_at":"2026-03-01T13:04:05Z"}`},
		{"bare proposal", wireProposal(&cstype.Proposal{ID: "prp_2", Confirmation: cstype.Confirmation{Title: "x"}, CreatedAt: at, UpdatedAt: at, ExpiresAt: at}),
			`{"id":"prp_2","tenant":"","requester":"","thread_id":"","run_id":"","tool_call_id":"","action":"",` +
				`"action_version":"","input":null,"input_digest":"","preview":"","state_version":"",` +
				`"confirmation":{"title":"x"},"mode":"","status":"","approvers":[],"quorum":0,"decisions":[],` +
				`"expires_at":"2026-03-01T12:04:05Z","operation_id":"","outcome":null,"rule":null,` +
				`"created_at":"2026-03-01T12:04:05Z","updated_at":"2026-03-01T12:04:05Z"}`},
		{"outcome with a broken result", wireOutcome(&cstype.Outcome{ProposalID: "prp_3", Status: cstype.StatusUnknown,
			Result: json.RawMessage(`{not json`), Summary: "?", At: at}),
			`{"proposal_id":"prp_3","status":"unknown","executed":null,"error":null,"summary":"?","at":"2026-03-01T12:04:05Z"}`},
		{"grant", wireGrant(grant), `{"id":"gr_1","tenant":"acme","requester":"alice","scope":"run","thread_id":"t1",` +
			`"run_id":"r1","action":"payments.refund","action_version":"1","input_digest":"sha256:ab",` +
			`"origin_proposal_id":"prp_1","granted_by":"bob","created_at":"2026-03-01T12:04:05Z",` +
			`"activated_at":"2026-03-01T12:04:05Z","expires_at":null,"revoked_at":null}`},
		{"thread", wireThread(&cstype.Thread{Tenant: "acme", ID: "t1", Owner: "alice", CreatedAt: at}),
			`{"id":"t1","owner":"alice","created_at":"2026-03-01T12:04:05Z"}`},
		{"messages", wireMessages([]*cstype.Message{
			{ID: "m1", Tenant: "acme", ThreadID: "t1", Role: "user", Text: "hi", CreatedAt: at},
			{ID: "m2", Tenant: "acme", ThreadID: "t1", Role: "outcome", Text: "done", ProposalID: "prp_1", Outcome: outcome, CreatedAt: at},
		}), `[{"id":"m1","role":"user","text":"hi","created_at":"2026-03-01T12:04:05Z"},` +
			`{"id":"m2","role":"outcome","text":"done","outcome":{"proposal_id":"prp_1","status":"succeeded",` +
			`"executed":true,"receipt":"rf_1","result":{"ok":true},"error":"boom","summary":"done","note":"checked",` +
			`"resolved_by":"carol","reconcile_attempts":2,"at":"2026-03-01T12:04:05Z"},"created_at":"2026-03-01T12:04:05Z"}]`},
		{"events", wireEvents([]*cstype.Event{
			{ID: 7, Tenant: "acme", ProposalID: "prp_1", Type: cstype.EventDecided, Actor: "bob", Via: "api",
				Status: cstype.StatusApproved, Detail: "ok", At: at},
			{ID: 8, Tenant: "acme", ProposalID: "prp_1", Type: cstype.EventClaimed, Status: cstype.StatusExecuting, At: at},
		}), `[{"id":7,"proposal_id":"prp_1","type":"proposal.decided","actor":"bob","via":"api","status":"approved",` +
			`"detail":"ok","at":"2026-03-01T12:04:05Z"},{"id":8,"proposal_id":"prp_1","type":"proposal.claimed",` +
			`"status":"executing","at":"2026-03-01T12:04:05Z"}]`},
	}
	for _, c := range cases {
		got, err := json.Marshal(c.v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		for _, secret := range []string{"cnf_secret", "lease_secret", "agent", "c_9"} {
			if bytes.Contains(got, []byte(secret)) {
				t.Errorf("%s carries the store's own %q", c.name, secret)
			}
		}
	}
}
