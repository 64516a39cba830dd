package countersign_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store/memstore"
)

// RefundInput is the typed input of the refund action used by the examples.
type RefundInput struct {
	Amount   float64 `json:"amount"`
	Customer string  `json:"customer"`
}

// newRefund builds a refund action that counts its executions.
func newRefund(executions *int) *countersign.Action {
	a, err := countersign.NewAction(countersign.ActionSpec[RefundInput]{
		Name:         "payments.refund",
		Confirmation: countersign.Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"},
		Execute: func(ctx context.Context, req *countersign.ExecuteRequest, in RefundInput) (*countersign.Receipt, error) {
			*executions++
			return &countersign.Receipt{ID: "rf_" + in.Customer}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	return a
}

var (
	alice = countersign.Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	bob   = countersign.Identity{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}}
)

func newEngine(mode countersign.Mode, executions *int) *countersign.Engine {
	e, err := countersign.New(countersign.Options{
		Store:   memstore.New(nil),
		Actions: []*countersign.Action{newRefund(executions)},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{
			Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Mode: mode,
		}}},
	})
	if err != nil {
		panic(err)
	}
	return e
}

// In wait mode the call blocks until a human decides, then executes in the
// caller's process and returns the result.
func Example_waitMode() {
	var executions int
	e := newEngine(countersign.ModeWait, &executions)
	ctx := context.Background()

	done := make(chan *countersign.Result)
	go func() {
		res, err := e.Call(ctx, &countersign.Call{
			Identity: alice, ThreadID: "t1", ToolCallID: "call_1",
			Action: "payments.refund", Input: []byte(`{"amount": 40, "customer": "c_9"}`),
		})
		if err != nil {
			panic(err)
		}
		done <- res
	}()

	// The approver finds the pending proposal and approves it.
	var id string
	for id == "" {
		page, _ := e.List(ctx, bob, countersignListPending())
		if len(page.Proposals) > 0 {
			id = page.Proposals[0].ID
			fmt.Println("pending:", page.Proposals[0].Preview)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
	d, err := e.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: id, Verdict: countersign.Approve, Reason: "ok"})
	if err != nil {
		panic(err)
	}
	fmt.Println("decision:", d.Status)

	res := <-done
	fmt.Println("result:", res.Status, res.Receipt, "executions:", executions)
	// Output:
	// pending: Refund 40 EUR to c_9
	// decision: applied
	// result: succeeded rf_c_9 executions: 1
}

// In two_phase mode the first call answers CONFIRMATION_REQUIRED; after the
// approval, the agent repeats the call with the confirmation id as evidence.
func Example_twoPhaseMode() {
	var executions int
	e := newEngine(countersign.ModeTwoPhase, &executions)
	ctx := context.Background()
	call := &countersign.Call{
		Identity: alice, ThreadID: "t1", ToolCallID: "call_1",
		Action: "payments.refund", Input: []byte(`{"amount": 40, "customer": "c_9"}`),
	}
	first, err := e.Call(ctx, call)
	if err != nil {
		panic(err)
	}
	fmt.Println("first:", first.Status, first.Summary)

	if _, err := e.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: first.ProposalID, Verdict: countersign.Approve}); err != nil {
		panic(err)
	}

	retry := *call
	retry.ToolCallID = "call_2"
	retry.Evidence = first.ConfirmationID
	second, err := e.Call(ctx, &retry)
	if err != nil {
		panic(err)
	}
	fmt.Println("retry:", second.Status, second.Receipt)

	// The evidence is single-use.
	again := retry
	again.ToolCallID = "call_3"
	_, err = e.Call(ctx, &again)
	var ev *countersign.EvidenceError
	fmt.Println("spent again:", errors.As(err, &ev) && ev.Reason == countersign.EvidenceConsumed, "executions:", executions)
	// Output:
	// first: confirmation_required Refund 40 EUR to c_9
	// retry: succeeded rf_c_9
	// spent again: true executions: 1
}

// In independent mode the call returns a receipt at once and the turn ends;
// a worker executes after approval, and the outcome is admitted to the thread.
func Example_independentMode() {
	var executions int
	e := newEngine(countersign.ModeIndependent, &executions)
	ctx, stop := context.WithCancel(context.Background())
	w, err := e.NewWorker(countersign.WorkerOptions{PollInterval: 10 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	stopped := make(chan error)
	go func() { stopped <- w.Run(ctx) }()

	res, err := e.Call(ctx, &countersign.Call{
		Identity: alice, ThreadID: "t1", ToolCallID: "call_1",
		Action: "payments.refund", Input: []byte(`{"amount": 40, "customer": "c_9"}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("receipt:", res.Status, "executed:", *res.Executed)

	d, err := e.Decide(ctx, &countersign.Decision{Identity: bob, ProposalID: res.ProposalID, Verdict: countersign.Approve})
	if err != nil {
		panic(err)
	}
	fmt.Println("decision:", d.Status)

	p, err := e.Wait(ctx, alice, res.ProposalID)
	if err != nil {
		panic(err)
	}
	fmt.Println("outcome:", p.Status, p.Outcome.Receipt, "executions:", executions)
	v, err := e.Thread(ctx, alice, "t1") // alice's agent's thread, read as its owner
	if err != nil {
		panic(err)
	}
	fmt.Println("thread:", v.Messages[0].Text)

	stop()
	<-stopped
	// Output:
	// receipt: pending executed: false
	// decision: applied
	// outcome: succeeded rf_c_9 executions: 1
	// thread: Action "payments.refund" completed. Receipt: rf_c_9.
}

func countersignListPending() countersign.ListParams {
	return countersign.ListParams{Statuses: []cstype.Status{cstype.StatusPending}}
}

// A rule's When asks two finance approvers only for large refunds; the
// proposal records which rule applied.
func ExampleRule_when() {
	var executions int
	e, err := countersign.New(countersign.Options{
		Store:   memstore.New(nil),
		Actions: []*countersign.Action{newRefund(&executions)},
		Policy: &countersign.Policy{Rules: []countersign.Rule{
			{Match: "payments.refund", When: "input.amount > 1000", Effect: countersign.EffectAsk,
				Approvers: []string{"role:finance"}, Quorum: 2, Mode: countersign.ModeIndependent},
			{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: []string{"role:finance"}, Mode: countersign.ModeIndependent},
		}},
	})
	if err != nil {
		panic(err)
	}
	for i, input := range []string{`{"amount":1500,"customer":"c_1"}`, `{"amount":40,"customer":"c_2"}`} {
		res, err := e.Call(context.Background(), &countersign.Call{Identity: alice, ThreadID: "t1",
			ToolCallID: fmt.Sprint("call_", i), Action: "payments.refund", Input: []byte(input)})
		if err != nil {
			panic(err)
		}
		p := res.Proposal
		fmt.Printf("%s: quorum %d, rule %s when %q\n", p.Preview, p.Quorum, p.RuleMatch, p.RuleWhen)
	}
	// Output:
	// Refund 1500 EUR to c_1: quorum 2, rule payments.refund when "input.amount > 1000"
	// Refund 40 EUR to c_2: quorum 1, rule payments.* when ""
}
