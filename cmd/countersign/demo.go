package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/countersign/countersign"
)

// The demo runs when serve has no configuration file: a few actions backed by
// an in-memory demo backend, and development API keys, so that the printed
// curl commands work as they are.

// demoKey is a development API key of the demo.
type demoKey struct {
	Key    string
	Tenant string
	Actor  string
	Roles  []string
	Kind   string // human or agent
	Why    string
}

var demoKeys = []demoKey{
	{Key: "ck_agent_alice", Tenant: "acme", Actor: "alice", Kind: "agent", Why: "alice's agent: calls actions, never decides"},
	{Key: "ck_dev_alice", Tenant: "acme", Actor: "alice", Roles: []string{"agent"}, Kind: "human", Why: "alice herself: chats with her agent"},
	{Key: "ck_dev_bob", Tenant: "acme", Actor: "bob", Roles: []string{"finance", "operator"}, Kind: "human", Why: "an approver and operator"},
	{Key: "ck_dev_carol", Tenant: "acme", Actor: "carol", Roles: []string{"finance"}, Kind: "human", Why: "a second approver"},
	{Key: "ck_dev_eve", Tenant: "globex", Actor: "eve", Roles: []string{"finance"}, Kind: "human", Why: "another tenant"},
}

// demoBackend is the system of record the demo actions change.
type demoBackend struct {
	mu      sync.Mutex
	refunds map[string]float64 // operation id → amount
	emails  map[string]string  // operation id → recipient
}

func newDemoBackend() *demoBackend {
	return &demoBackend{refunds: map[string]float64{}, emails: map[string]string{}}
}

// RefundInput is the demo refund's input (its schema is refundSchema).
type RefundInput struct {
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

// EmailInput is the demo email's input.
type EmailInput struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body,omitempty"`
}

// LookupInput is the demo lookup's input.
type LookupInput struct {
	Customer string `json:"customer"`
}

// refundSchema is the demo refund's input schema: a refund of nothing or of
// a negative amount is not a refund, so the call is refused as invalid input
// before anyone is asked.
const refundSchema = `{"type":"object","required":["amount","customer"],"additionalProperties":false,
	"properties":{"amount":{"type":"number","exclusiveMinimum":0,"description":"amount in EUR"},
	"customer":{"type":"string","description":"customer id"}}}`

// refundTitle is the refund's confirmation title (and so its preview), the
// amount with thousands separators: an approver reads 5,000,000, not 5000000.
func refundTitle(in RefundInput) string {
	return fmt.Sprintf("Refund %s EUR to %s", groupThousands(in.Amount), in.Customer)
}

// groupThousands prints v in full, its integer digits grouped by three with
// commas: 5000000 → 5,000,000, 1234.5 → 1,234.5.
func groupThousands(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	var b strings.Builder
	b.WriteString(sign)
	for i, d := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	return b.String()
}

// refundReceipt is the receipt of the refund run under an operation id:
// derived from it, so that it is unique across restarts (a counter would
// start again at rf_1) and the same when reconciling finds it applied.
func refundReceipt(operationID string) string {
	return "rf_" + strings.TrimPrefix(operationID, "op_")
}

func (b *demoBackend) actions() ([]*countersign.Action, error) {
	decode := func(raw json.RawMessage) (RefundInput, error) {
		var in RefundInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return in, fmt.Errorf("decode refund input: %w", err)
		}
		return in, nil
	}
	refund, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: "payments.refund", Description: "Refund a payment",
		InputSchema:    json.RawMessage(refundSchema),
		Confirmation:   countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
		ReplacementKey: "{customer}",
		Hooks: countersign.Hooks{
			Preflight: func(ctx context.Context, req *countersign.PreflightRequest) (*countersign.Preflight, error) {
				in, err := decode(req.Input)
				if err != nil {
					return nil, err
				}
				return &countersign.Preflight{Verdict: countersign.PreflightReady,
					Confirmation: &countersign.Confirmation{Title: refundTitle(in), Verb: "Refund"}}, nil
			},
			Execute: func(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				in, err := decode(req.Input)
				if err != nil {
					return nil, countersign.NotApplied(err)
				}
				if in.Amount <= 0 {
					return nil, countersign.NotApplied(fmt.Errorf("amount must be positive"))
				}
				b.mu.Lock()
				defer b.mu.Unlock()
				b.refunds[req.OperationID] = in.Amount // the operation id makes it idempotent
				return &countersign.Receipt{ID: refundReceipt(req.OperationID), Result: json.RawMessage(fmt.Sprintf(`{"refunded":%v}`, in.Amount))}, nil
			},
			Reconcile: func(ctx context.Context, req *countersign.ReconcileRequest) (*countersign.Reconciliation, error) {
				b.mu.Lock()
				defer b.mu.Unlock()
				if _, ok := b.refunds[req.OperationID]; ok {
					return &countersign.Reconciliation{Status: countersign.ReconcileApplied, Receipt: refundReceipt(req.OperationID)}, nil
				}
				return &countersign.Reconciliation{Status: countersign.ReconcileNotApplied}, nil
			},
		},
	})
	if err != nil {
		return nil, err
	}
	email, err := countersign.NewAction(countersign.ActionSpec[EmailInput]{
		Name: "email.send", Description: "Send an email",
		Confirmation: countersign.Confirmation{Title: "Email {to}: {subject}", Verb: "Send"},
		Idempotent:   true,
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest, in EmailInput) (*countersign.Receipt, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.emails[req.OperationID] = in.To
			return &countersign.Receipt{ID: "msg_" + req.OperationID}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	lookup, err := countersign.NewAction(countersign.ActionSpec[LookupInput]{
		Name: "crm.lookup", Description: "Look a customer up", Kind: countersign.KindRead,
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest, in LookupInput) (*countersign.Receipt, error) {
			return &countersign.Receipt{ID: in.Customer, Result: json.RawMessage(fmt.Sprintf(`{"customer":%q,"tier":"gold"}`, in.Customer))}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	return []*countersign.Action{refund, email, lookup}, nil
}

// demoPolicy asks finance for refunds (independent: the worker executes),
// two finance approvers for refunds over 1,000 EUR, the requester for
// emails, and allows lookups.
func demoPolicy() *countersign.Policy {
	return &countersign.Policy{Rules: []countersign.Rule{
		// An exact name is tried before the glob below: refunds over 1,000
		// EUR need two finance approvers; the others fall through to it.
		{Match: "payments.refund", When: "input.amount > 1000", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			Quorum: 2, ForbidSelfApproval: true, Mode: countersign.ModeIndependent},
		{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"},
			ForbidSelfApproval: true, Mode: countersign.ModeIndependent, Remember: []countersign.Scope{countersign.ScopeThread}},
		{Match: "email.*", Effect: countersign.EffectAsk, Approvers: []string{"requester", "role:finance"}},
	}}
}

// printDemo tells the operator how to try the demo, with commands that work
// as printed.
func printDemo(w io.Writer, base string) {
	fmt.Fprintf(w, "\nNo --config given: running the demo (actions payments.refund, email.send, crm.lookup; the scripted agent %q).\n", demoAgentName)
	fmt.Fprintf(w, "Development API keys (never use these in production):\n")
	for _, k := range demoKeys {
		fmt.Fprintf(w, "  %-15s %-5s tenant %-7s actor %-6s roles %-16s %s\n", k.Key, k.Kind, k.Tenant, k.Actor, strings.Join(k.Roles, ","), k.Why)
	}
	fmt.Fprintf(w, `
Try it (bash):
  export COUNTERSIGN_URL=%[1]s
  # alice's agent asks for a refund; the demo policy asks finance, and the worker executes
  CALL=$(curl -s -X POST "$COUNTERSIGN_URL/v1/calls" -H 'Authorization: Bearer ck_agent_alice' -H 'Content-Type: application/json' \
    -d '{"thread_id":"t1","tool_call_id":"call_'$RANDOM$RANDOM'","action":"payments.refund","input":{"amount":40,"customer":"c_9"}}'); echo "$CALL"
  # bob (finance) approves the proposal the call's answer names
  ID=$(echo "$CALL" | grep -o '"proposal_id":"prp_[^"]*"' | cut -d'"' -f4)
  curl -s -X POST "$COUNTERSIGN_URL/v1/proposals/$ID/approve" -H 'Authorization: Bearer ck_dev_bob' -H 'Content-Type: application/json' -d '{"reason":"looks right"}'
  # the worker executes it within moments; then the proposal holds the outcome
  sleep 1
  curl -s "$COUNTERSIGN_URL/v1/proposals/$ID" -H 'Authorization: Bearer ck_agent_alice'
  # or from the command line
  countersign proposals list --server "$COUNTERSIGN_URL" --token ck_dev_bob
  # chat with the demo agent (scripted: no API key); bob answers "yes" in the thread
  curl -s -X POST "$COUNTERSIGN_URL/v1/threads/chat1/messages" -H 'Authorization: Bearer ck_dev_alice' -H 'Content-Type: application/json' -d '{"text":"refund 40 EUR to c_9"}'
  curl -s -X POST "$COUNTERSIGN_URL/v1/threads/chat1/messages" -H 'Authorization: Bearer ck_dev_bob' -H 'Content-Type: application/json' -d '{"text":"yes"}'

`, base)
}
