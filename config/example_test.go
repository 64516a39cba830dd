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
	// countersign.yaml:8: unknown key "approvals" in policy.rules[0] (want match, effect, approvers, quorum, forbid_self_approval, ttl, mode, channels, remember)
}
