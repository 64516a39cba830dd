package storetest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/internal/canonjson"
	"github.com/countersign/countersign/store"
)

// idPrefix keeps ids unique across test processes that share a database.
var (
	idPrefix = func() string {
		var b [4]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
		return hex.EncodeToString(b[:])
	}()
	idSeq atomic.Int64
)

// uniqueID returns a process-wide unique id with the given prefix.
func uniqueID(prefix string) string {
	return fmt.Sprintf("%s_%s_%06d", prefix, idPrefix, idSeq.Add(1))
}

// NewProposal returns a valid proposal for CreateProposalParams, with unique
// id, confirmation id and operation id. The requester is "alice", the action
// "payments.refund" version "1", the mode wait, the approver the requester
// with a quorum of one, and the deadline ten minutes from the real clock; a
// test that runs on a fake clock sets ExpiresAt from it. Each option edits
// the proposal in turn.
func NewProposal(tenant, thread, toolCall string, opts ...func(*store.Proposal)) *store.Proposal {
	id := uniqueID("prp")
	input := json.RawMessage(`{"amount":40,"customer":"c_9"}`)
	p := &store.Proposal{
		ID:             id,
		Tenant:         tenant,
		Requester:      "alice",
		RequesterRoles: []string{"agent"},
		ThreadID:       thread,
		RunID:          "run_1",
		ToolCallID:     toolCall,
		Action:         "payments.refund",
		ActionVersion:  "1",
		Input:          input,
		// The same value as the caller might send it: another key order and spacing.
		RawInput:       json.RawMessage(`{"customer": "c_9", "amount": 40}`),
		InputDigest:    digest(input),
		Preview:        "Refund 40 EUR to c_9",
		StateVersion:   "state_1",
		Confirmation:   store.Confirmation{Title: "Refund 40 EUR to c_9", Verb: "Refund"},
		ConfirmationID: "cnf_" + id,
		Mode:           store.ModeWait,
		Approvers:      []string{"requester"},
		Quorum:         1,
		Channels:       []string{"api", "web", "cli"},
		RememberScopes: []store.Scope{store.ScopeRun, store.ScopeThread},
		ExpiresAt:      time.Now().UTC().Truncate(time.Microsecond).Add(10 * time.Minute),
		OperationID:    "op_" + id,
	}
	for _, opt := range opts {
		opt(p)
	}
	return p
}

// digest returns the input digest of a JSON value, as the engine computes it.
// It panics on invalid JSON, which in a test is a bug in the test.
func digest(input json.RawMessage) string {
	d, err := canonjson.Digest(input)
	if err != nil {
		panic(fmt.Sprintf("storetest: digest of %s: %v", input, err))
	}
	return d
}
