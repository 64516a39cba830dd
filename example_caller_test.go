package countersign_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/store/memstore"
)

// An action its caller executes: the call's answer is the claim of a lease,
// under which the caller runs the change (with the operation id as its
// idempotency key) and settles it. A repeat of the call replays the outcome.
func Example_callerExecuted() {
	ctx := context.Background()
	send, err := countersign.NewRawAction(countersign.RawActionSpec{Name: "mail.send", CallerExecuted: true})
	if err != nil {
		panic(err)
	}
	e, err := countersign.New(countersign.Options{
		Store: memstore.New(nil), Actions: []*countersign.Action{send},
		Policy: &countersign.Policy{Rules: []countersign.Rule{{Match: "mail.*", Effect: countersign.EffectAllow}}},
	})
	if err != nil {
		panic(err)
	}
	alice := countersign.Identity{Tenant: "acme", Actor: "alice"}
	call := &countersign.Call{Identity: alice, ThreadID: "t1", ToolCallID: "call_1", Action: "mail.send", Input: json.RawMessage(`{"to":"bob"}`)}

	res, err := e.Call(ctx, call)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, "attempt", res.Proposal.Attempt, "input", string(res.Input))
	repeat, _ := e.Call(ctx, call)
	fmt.Println("repeat:", repeat.Status)

	// ... send the mail, keyed by res.OperationID, then:
	s, err := e.Settle(ctx, &countersign.Settlement{
		Identity: alice, ProposalID: res.ProposalID, LeaseToken: res.Lease.Token,
		Status: cstype.StatusSucceeded, Receipt: "msg_1",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Status, s.Proposal.Status)
	again, _ := e.Call(ctx, call)
	fmt.Println("again:", again.Status, again.Receipt)
	// Output:
	// execute attempt 1 input {"to":"bob"}
	// repeat: executing
	// applied succeeded
	// again: succeeded msg_1
}
