package config_test

import (
	"fmt"

	"github.com/countersign/countersign/config"
)

func ExampleParse() {
	c, err := config.Parse("countersign.yaml", []byte(`
listen: 127.0.0.1:9000
policy:
  rules:
    - {match: "payments.*", approvers: ["role:finance"], mode: independent}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := c.Policy().Rules[0]
	fmt.Println(c.Listen, c.Store, r.Match, r.Effect, r.Mode, c.Worker.Lease)
	// Output: 127.0.0.1:9000 sqlite:countersign.db payments.* ask independent 30s
}

func ExampleParse_errors() {
	_, err := config.Parse("countersign.yaml", []byte(`
listen: 127.0.0.1:9000
worker: {poll_interval: 20s}
policy:
  rules:
    - match: "payments.*"
      effect: maybe
      approvals: ["role:finance"]
`))
	fmt.Println(err)
	// Output:
	// countersign.yaml:3: worker.poll_interval: 20s must be less than a third of worker.lease (30s)
	// countersign.yaml:7: policy.rules[0].effect: "maybe": want allow, ask or deny
	// countersign.yaml:8: unknown key "approvals" in policy.rules[0] (want match, when, effect, approvers, quorum, forbid_self_approval, ttl, mode, channels, notify, step_up, remember, escalate_after, escalate_to, remind_every)
}

func ExampleParse_agents() {
	c, err := config.Parse("countersign.yaml", []byte(`
default_agent: support
agents:
  - name: support
    instructions: "You help customers of ACME. Use the tools."
    model:
      provider: openai
      name: gpt-4.1-mini
      api_key_env: OPENAI_API_KEY
    actions: ["payments.*"]
  - name: demo
    model:
      provider: scripted
      rules:
        - match: '.*'
          say: "I can refund payments."
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// The file names the key's variable; the composition root
	// (cmd/countersign) reads it and builds the models.
	for _, a := range c.Agents {
		fmt.Println(a.Name, a.Model.Provider, a.Model.APIKeyEnv, a.Actions, a.MaxSteps)
	}
	fmt.Println("default:", c.DefaultAgentName())
	// Output:
	// support openai OPENAI_API_KEY [payments.*] 8
	// demo scripted  [] 8
	// default: support
}

func ExampleParse_agentErrors() {
	_, err := config.Parse("countersign.yaml", []byte(`
text_decisions:
  language: pt-BR
  vocabulary: {approve: [sim, "não"]}
default_agent: suport
agents:
  - name: support
    model: {provider: openai, name: gpt-4.1-mini, api_key_env: "sk-proj-…"}
  - name: demo
    model:
      provider: scripted
      rules:
        - match: 'refund (?P<amount>\d+)'
          call: {action: payments.refund, input: '{"amount": {amont}}'}
`))
	fmt.Println(err)
	// Output:
	// countersign.yaml:4: text_decisions.vocabulary.approve[1]: "não" rejects in the pt-BR preset; no configuration gives it another meaning
	// countersign.yaml:5: default_agent: "suport" names no agent (want one of demo, support)
	// countersign.yaml:8: agents[0].model.api_key_env: looks like an API key, not the name of an environment variable: put the key in the environment and name the variable here (and revoke the key if this file was shared)
	// countersign.yaml:14: agents[1].model.rules[0].call.input: {amont} names no group of match
}
