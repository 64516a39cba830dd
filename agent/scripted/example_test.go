package scripted_test

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
)

// The demo agent's script: a refund request becomes a payments.refund call,
// its result is answered with its summary, and anything else gets a fixed
// reply.
func Example() {
	model, err := scripted.New(scripted.Config{
		Rules: []scripted.Rule{
			{
				Match: `(?i)refund (?P<amount>\d+) .*to (?P<customer>\w+)`,
				Say:   "I'll ask for that refund.",
				Call:  &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`},
			},
			{Match: `.*`, Say: "I can refund payments."},
		},
	})
	if err != nil {
		panic(err)
	}
	req := &agent.Request{
		Messages: []agent.Message{{Role: agent.RoleUser, Text: "Refund 40 EUR to c_9, please"}},
		Tools:    []agent.Tool{{Name: "payments.refund"}},
	}
	reply, err := model.Generate(context.Background(), req)
	if err != nil {
		panic(err)
	}
	call := reply.ToolCalls[0]
	fmt.Println(reply.Text)
	fmt.Println(call.Action, string(call.Input))
	fmt.Println(len(call.ID), call.ID[:5]) // "call_" and 96 random bits in hex

	req.Messages = append(req.Messages,
		agent.Message{Role: agent.RoleAssistant, Text: reply.Text, ToolCalls: reply.ToolCalls},
		agent.Message{Role: agent.RoleTool, ToolCallID: call.ID, Result: []byte(`{"refund_id":"re_1"}`), Summary: "Refunded 40 EUR to c_9."},
	)
	reply, err = model.Generate(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Println(reply.Text)
	// Output:
	// I'll ask for that refund.
	// payments.refund {"amount":40,"customer":"c_9"}
	// 29 call_
	// Refunded 40 EUR to c_9.
}
