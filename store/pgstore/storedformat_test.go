package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// The JSON columns as the store has always written them. Databases in the
// field hold these values: the records' Go types carry no JSON encoding, so
// the stored form is this package's alone and must not drift.
const (
	storedConfirmationJSON = `{"title":"Refund 40 EUR to c_9","verb":"Refund"}`
	storedDecisionsJSON    = `[{"actor":"bob","decision":"approved","via":"api","at":"2025-12-01T12:00:00.000123Z","reason":"ok","remember":"thread"},` +
		`{"actor":"carol","decision":"approved","via":"web","at":"2025-12-01T12:00:01Z"}]`
	storedOutcomeJSON = `{"proposal_id":"prp_fmt","status":"succeeded","executed":true,"receipt":"rcpt_1","result":"{\"id\": 7}",` +
		`"error":null,"summary":"Done.","note":"checked","resolved_by":"op","reconcile_attempts":2,"at":"2025-12-01T12:00:02.000456Z"}`
)

// storedFormatProposal is the proposal the constants above encode.
func storedFormatProposal() *store.Proposal {
	at := func(sec, usec int64) time.Time { return time.Unix(1764590400+sec, usec*1000).UTC() }
	yes := true
	return &store.Proposal{
		ID: "prp_fmt", Tenant: "acme", Requester: "alice", ThreadID: "t1", RunID: "run_1", ToolCallID: "call_fmt",
		Action: "payments.refund", ActionVersion: "1", Input: json.RawMessage(`{"amount":40}`), RawInput: json.RawMessage(`{"amount": 40}`),
		InputDigest: "sha256:x", Preview: "Refund 40 EUR to c_9",
		Confirmation: store.Confirmation{Title: "Refund 40 EUR to c_9", Verb: "Refund"},
		Mode:         store.ModeWait, Status: store.StatusSucceeded, Approvers: []string{"role:finance"}, Quorum: 2,
		Decisions: []store.Decision{
			{Actor: "bob", Decision: store.VerdictApproved, Via: "api", At: at(0, 123), Reason: "ok", Remember: store.ScopeThread},
			{Actor: "carol", Decision: store.VerdictApproved, Via: "web", At: at(1, 0)},
		},
		ExpiresAt: at(3600, 0), OperationID: "op_fmt", Attempt: 1, ConsumedBy: "call_fmt",
		Outcome: &store.Outcome{
			ProposalID: "prp_fmt", Status: store.StatusSucceeded, Executed: &yes, Receipt: "rcpt_1",
			Result: json.RawMessage(`{"id": 7}`), Summary: "Done.", Note: "checked", ResolvedBy: "op", Reconciles: 2,
			At: at(2, 456),
		},
		Version: 4, CreatedAt: at(-100, 0), UpdatedAt: at(2, 456),
	}
}

// TestStoredFormat pins the JSON columns both ways: a record encodes to the
// JSON the store has always written, and a row written in that format
// decodes to the record.
func TestStoredFormat(t *testing.T) {
	t.Parallel()
	want := storedFormatProposal()
	for _, c := range []struct {
		name   string
		encode func() ([]byte, error)
		want   string
	}{
		{"confirmation", func() ([]byte, error) { return encodeConfirmation(want.Confirmation) }, storedConfirmationJSON},
		{"decisions", func() ([]byte, error) { return encodeDecisions(want.Decisions) }, storedDecisionsJSON},
		{"outcome", func() ([]byte, error) { return encodeOutcome(want.Outcome) }, storedOutcomeJSON},
	} {
		if got, err := c.encode(); err != nil || string(got) != c.want {
			t.Errorf("%s encodes as %s, %v; want %s", c.name, got, err, c.want)
		}
	}

	// A row whose JSON columns hold exactly those values, written as an
	// existing database holds them, reads back as the record.
	ctx := context.Background()
	s := smallStore(t)
	vals, err := proposalValues(want)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range columnList() {
		switch c {
		case "confirmation":
			vals[i] = []byte(storedConfirmationJSON)
		case "decisions":
			vals[i] = []byte(storedDecisionsJSON)
		case "outcome":
			vals[i] = []byte(storedOutcomeJSON)
		}
	}
	ph := make([]string, len(vals))
	for i := range ph {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	insert := `INSERT INTO ` + s.q.schema + `.proposals (` + proposalColumns + `) VALUES (` + strings.Join(ph, ", ") + `)`
	if _, err := s.pool.Exec(ctx, insert, vals...); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetProposal(ctx, &store.GetProposalParams{Tenant: "acme", ID: "prp_fmt"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v\nwant    %+v", got, want)
	}
}
