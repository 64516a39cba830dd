package main

import (
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
)

// demoAgentName is the demo's default agent: a scripted model, so that a
// newcomer can chat with it without an API key.
const demoAgentName = "demo"

// demoAgent asks for refunds: "refund 40 EUR to c_9" becomes a
// payments.refund call, anything else a short help.
func demoAgent() (*agent.Agent, error) {
	model, err := scripted.New(scripted.Config{Rules: []scripted.Rule{
		{Match: `(?i)refund (?P<amount>\d+(?:\.\d+)?) .*to (?P<customer>\w+)`, Say: "I'll ask for that refund.",
			Call: &scripted.Call{Action: "payments.refund", Input: `{"amount": {amount}, "customer": "{customer}"}`}},
		{Match: `.*`, Say: `I can refund payments: say "refund 40 EUR to c_9".`},
	}})
	if err != nil {
		return nil, err
	}
	return &agent.Agent{Name: demoAgentName, Instructions: "You refund payments of ACME's customers.", Model: model,
		Actions: []string{"payments.*", "crm.*"}}, nil
}
