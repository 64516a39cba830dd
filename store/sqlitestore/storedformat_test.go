package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// The JSON columns as the store has always written them. Databases in the
// field hold these bytes: the records' Go types carry no JSON encoding, so
// the stored form is this package's alone and must not drift.
const (
	storedConfirmationJSON = `{"title":"Refund 40 EUR to c_9","verb":"Refund"}`
	storedDecisionsJSON    = `[{"actor":"bob","decision":"approved","via":"api","at":1764590400000000123,"reason":"ok","remember":"thread"},` +
		`{"actor":"carol","decision":"approved","via":"web","at":1764590401000000000}]`
	storedOutcomeJSON = `{"proposal_id":"prp_fmt","status":"succeeded","executed":true,"receipt":"rcpt_1","result":"{\"id\": 7}",` +
		`"error":null,"summary":"Done.","note":"checked","resolved_by":"op","reconcile_attempts":2,"at":1764590402000000456}`
)

// storedFormatProposal is the proposal the constants above encode.
func storedFormatProposal() *store.Proposal {
	at := func(sec, nsec int64) time.Time { return time.Unix(sec, nsec).UTC() }
	return &store.Proposal{
		ID: "prp_fmt", Tenant: "acme", Requester: "alice", ThreadID: "t1", RunID: "run_1", ToolCallID: "call_fmt",
		Action: "payments.refund", ActionVersion: "1", Input: json.RawMessage(`{"amount":40}`), RawInput: json.RawMessage(`{"amount": 40}`),
		InputDigest: "sha256:x", Preview: "Refund 40 EUR to c_9",
		Confirmation: store.Confirmation{Title: "Refund 40 EUR to c_9", Verb: "Refund"},
		Mode:         store.ModeWait, Status: store.StatusSucceeded, Approvers: []string{"role:finance"}, Quorum: 2,
		Decisions: []store.Decision{
			{Actor: "bob", Decision: store.VerdictApproved, Via: "api", At: at(1764590400, 123), Reason: "ok", Remember: store.ScopeThread},
			{Actor: "carol", Decision: store.VerdictApproved, Via: "web", At: at(1764590401, 0)},
		},
		ExpiresAt: at(1764594000, 0), OperationID: "op_fmt", Attempt: 1, ConsumedBy: "call_fmt",
		Outcome: &store.Outcome{
			ProposalID: "prp_fmt", Status: store.StatusSucceeded, Executed: ptr(true), Receipt: "rcpt_1",
			Result: json.RawMessage(`{"id": 7}`), Summary: "Done.", Note: "checked", ResolvedBy: "op", Reconciles: 2,
			At: at(1764590402, 456),
		},
		Version: 4, CreatedAt: at(1764590300, 0), UpdatedAt: at(1764590402, 456),
	}
}

func ptr[T any](v T) *T { return &v }

// TestStoredFormat pins the JSON columns both ways: a record encodes to the
// bytes the store has always written, and a row written in that format
// decodes to the record.
func TestStoredFormat(t *testing.T) {
	t.Parallel()
	want := storedFormatProposal()
	conf, err := encodeConfirmation(want.Confirmation)
	if err != nil || string(conf) != storedConfirmationJSON {
		t.Errorf("confirmation encodes as %s, %v; want %s", conf, err, storedConfirmationJSON)
	}
	if got, err := encodeDecisions(want.Decisions); err != nil || got != storedDecisionsJSON {
		t.Errorf("decisions encode as %v, %v; want %s", got, err, storedDecisionsJSON)
	}
	if got, err := encodeOutcome(want.Outcome); err != nil || got != storedOutcomeJSON {
		t.Errorf("outcome encodes as %v, %v; want %s", got, err, storedOutcomeJSON)
	}

	// A row whose JSON columns hold exactly those bytes, written as an
	// existing database holds it, reads back as the record.
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "format.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	vals, err := proposalValues(want)
	if err != nil {
		t.Fatal(err)
	}
	for i, col := range []string{"confirmation", "decisions", "outcome"} {
		idx := columnIndex(t, col)
		vals[idx] = []string{storedConfirmationJSON, storedDecisionsJSON, storedOutcomeJSON}[i]
	}
	if err := s.write(ctx, func(tx *wtx, _ time.Time) error {
		_, err := tx.ExecContext(ctx, insertProposalSQL, vals...)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	got, err := getProposal(ctx, &s.rq, "acme", "prp_fmt")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v\nwant    %+v", got, want)
	}
	o, err := decodeOutcome(sql.NullString{String: storedOutcomeJSON, Valid: true})
	if err != nil || !reflect.DeepEqual(o, want.Outcome) {
		t.Errorf("a message's outcome decodes as %+v, %v; want %+v", o, err, want.Outcome)
	}
}

// columnIndex returns the position of col in proposalColumns.
func columnIndex(t *testing.T, col string) int {
	t.Helper()
	for i, c := range strings.Split(proposalColumns, ",") {
		if strings.TrimSpace(c) == col {
			return i
		}
	}
	t.Fatalf("no column %s", col)
	return -1
}
