package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// blockRule is a policy whose every field sits on a line of its own, so
// that a problem's line names the field: line 2 is default_ttl, line 4
// match, and so on down to remind_every on line 16.
const blockRule = `policy:
  default_ttl: 5m
  rules:
    - match: payments.refund
      when: "input.amount > 10"
      effect: ask
      approvers: ["role:finance", "actor:carol"]
      quorum: 2
      forbid_self_approval: true
      ttl: 4m
      mode: wait
      channels: [api, web]
      remember: [run]
      escalate_after: 1m
      escalate_to: ["role:manager"]
      remind_every: 1m
`

// TestPolicyProblemsAtTheirLines: the engine's check of the policy
// (countersign.Policy.Validate, which names Go fields) is reported at the
// line of the file's field, under its path, once.
func TestPolicyProblemsAtTheirLines(t *testing.T) {
	t.Parallel()
	if _, err := Parse("p.yaml", []byte(blockRule)); err != nil {
		t.Fatalf("the base policy: %v", err)
	}
	for _, tt := range []struct {
		name   string
		edits  []string // old, new, …: replacements in blockRule
		line   int
		reason string
	}{
		{"match", []string{"match: payments.refund", "match: \"pay ments\""}, 4, `policy.rules[0].match: "pay ments": want an action name or a glob`},
		{"when", []string{`when: "input.amount > 10"`, `when: "input.amount >"`}, 5, `policy.rules[0].when: "input.amount >": column 15: Syntax error`},
		{"effect", []string{"effect: ask", "effect: maybe"}, 6, `policy.rules[0].effect: "maybe": want allow, ask or deny`},
		{"approver", []string{`approvers: ["role:finance", "actor:carol"]`, `approvers: ["role:finance", "carol"]`}, 7, `policy.rules[0].approvers[1]: "carol": want requester, role:NAME or actor:ID`},
		{"approver twice", []string{`approvers: ["role:finance", "actor:carol"]`, `approvers: ["actor:carol", "actor:carol"]`}, 7, `policy.rules[0].approvers[1]: "actor:carol" is listed twice`},
		// The people who may approve: those the approvers and escalate_to
		// name, without the requester when self-approval is forbidden.
		{"quorum unreachable", []string{`approvers: ["role:finance", "actor:carol"]`, `approvers: ["actor:carol", "requester"]`,
			"quorum: 2", "quorum: 3", `escalate_to: ["role:manager"]`, `escalate_to: ["actor:dave"]`}, 8,
			"policy.rules[0].quorum: 3 can never be met by the 2 people the approvers name"},
		{"no one may approve", []string{`approvers: ["role:finance", "actor:carol"]`, `approvers: [requester]`,
			"      escalate_after: 1m\n      escalate_to: [\"role:manager\"]\n", ""}, 4,
			"policy.rules[0]: no one may approve: the only approver is the requester, and self-approval is forbidden"},
		{"mode", []string{"mode: wait", "mode: later"}, 11, `policy.rules[0].mode: "later": want wait, two_phase or independent`},
		{"channel", []string{"channels: [api, web]", "channels: [api, fax]"}, 12, `policy.rules[0].channels[1]: "fax": want one of`},
		{"remember", []string{"remember: [run]", "remember: [run, run]"}, 13, `policy.rules[0].remember[1]: "run" is listed twice`},
		{"escalate_after past ttl", []string{"escalate_after: 1m", "escalate_after: 4m"}, 14,
			"policy.rules[0].escalate_after: 4m0s is not before the proposal expires (ttl 4m0s): it would never escalate"},
		{"escalate_to", []string{`escalate_to: ["role:manager"]`, `escalate_to: [manager]`}, 15, `policy.rules[0].escalate_to[0]: "manager": want requester`},
		{"remind_every past ttl", []string{"remind_every: 1m", "remind_every: 4m"}, 16,
			"policy.rules[0].remind_every: 4m0s is not before the proposal expires (ttl 4m0s): no reminder would be sent"},
		// The rule's ttl is the policy's default_ttl when it has none.
		{"remind_every past default_ttl", []string{"      ttl: 4m\n", "", "remind_every: 1m", "remind_every: 5m"}, 15,
			"policy.rules[0].remind_every: 5m0s is not before the proposal expires (ttl 5m0s): no reminder would be sent"},
		{"repeated match", []string{"      remind_every: 1m\n", "      remind_every: 1m\n    - {match: a}\n    - {match: a, effect: deny}\n"}, 18,
			`policy.rules[2].match: "a" repeats policy.rules[1] (line 17), which has no when and so always applies first: this rule never applies`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			yaml := blockRule
			for i := 0; i < len(tt.edits); i += 2 {
				if !strings.Contains(yaml, tt.edits[i]) {
					t.Fatalf("%q is not in the base policy", tt.edits[i])
				}
				yaml = strings.Replace(yaml, tt.edits[i], tt.edits[i+1], 1)
			}
			_, err := Parse("p.yaml", []byte(yaml))
			errs := Errors(err)
			if len(errs) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(errs), err)
			}
			if e := errs[0]; e.File != "p.yaml" || e.Line != tt.line || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("got %q (line %d)\nwant line %d and a reason holding %q", e.Error(), e.Line, tt.line, tt.reason)
			}
		})
	}
}

// TestPolicyRefusedAsTheEngineRefusesIt: a policy the file cannot load is
// one countersign.New refuses, and the other way round; in particular the
// quorum its named approvers can never meet, which the engine accepted
// while the file was refused, and the quorum that escalation makes
// reachable, which the file refused while the engine would take it.
func TestPolicyRefusedAsTheEngineRefusesIt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		yaml string
		rule Rule // the same rule, built in code
		ok   bool
	}{
		{"unreachable quorum", `{match: payments.refund, approvers: ["actor:alice", "actor:bob"], quorum: 3}`,
			Rule{Match: "payments.refund", Approvers: []string{"actor:alice", "actor:bob"}, Quorum: 3}, false},
		{"no one may approve", `{match: payments.refund, forbid_self_approval: true}`,
			Rule{Match: "payments.refund", Approvers: []string{"requester"}, Quorum: 1, ForbidSelfApproval: true}, false},
		{"reachable once escalated", `{match: payments.refund, approvers: ["actor:alice"], quorum: 2, escalate_after: 5m, escalate_to: ["role:finance"]}`,
			Rule{Match: "payments.refund", Approvers: []string{"actor:alice"}, Quorum: 2, EscalateAfter: 5 * time.Minute, EscalateTo: []string{"role:finance"}}, true},
		{"reachable by escalated people", `{match: payments.refund, approvers: ["actor:alice"], quorum: 2, escalate_after: 5m, escalate_to: ["actor:bob"]}`,
			Rule{Match: "payments.refund", Approvers: []string{"actor:alice"}, Quorum: 2, EscalateAfter: 5 * time.Minute, EscalateTo: []string{"actor:bob"}}, true},
		{"met by a role", `{match: payments.refund, approvers: ["role:finance"], quorum: 5, forbid_self_approval: true}`,
			Rule{Match: "payments.refund", Approvers: []string{"role:finance"}, Quorum: 5, ForbidSelfApproval: true}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.rule.Effect, tt.rule.Mode = DefaultEffect, DefaultMode
			c, err := Parse("p.yaml", []byte("policy:\n  rules:\n    - "+tt.yaml+"\n"))
			if (err == nil) != tt.ok {
				t.Fatalf("Parse: %v, want ok %v", err, tt.ok)
			}
			if c != nil && !reflect.DeepEqual(c.PolicySpec.Rules, []Rule{tt.rule}) {
				t.Fatalf("the file's rule %+v is not the one built in code %+v", c.PolicySpec.Rules, tt.rule)
			}
			c = Default()
			c.PolicySpec.Rules = []Rule{tt.rule}
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate in code: %v, want ok %v", err, tt.ok)
			}
			verr := c.Policy().Validate()
			var pe *countersign.InvalidPolicyError
			if (verr == nil) != tt.ok || (verr != nil && !errors.As(verr, &pe)) {
				t.Fatalf("the engine's check: %v, want ok %v", verr, tt.ok)
			}
		})
	}
}

// TestRuleKeys: every field of a file's Rule is named as countersign.Rule's
// and has a key in ruleKeys, one Parse reads, so that each of the engine's
// problems is placed at its line.
func TestRuleKeys(t *testing.T) {
	t.Parallel()
	// An unknown key is refused, naming the keys a rule takes.
	_, err := Parse("k.yaml", []byte("policy:\n  rules:\n    - {match: a, nope: 1}\n"))
	_, list, ok := strings.Cut(fmt.Sprint(err), "(want ")
	if !ok || len(Errors(err)) != 1 {
		t.Fatalf("an unknown key: %v", err)
	}
	keys := strings.Split(strings.TrimSuffix(list, ")"), ", ")
	engine := reflect.TypeFor[countersign.Rule]()
	for f := range reflect.TypeFor[Rule]().Fields() {
		if _, ok := engine.FieldByName(f.Name); !ok {
			t.Errorf("Rule.%s is no field of countersign.Rule", f.Name)
		}
		if key, ok := ruleKeys[f.Name]; !ok || !slices.Contains(keys, key) {
			t.Errorf("Rule.%s: key %q (in ruleKeys: %v) is not one of a rule's keys %v", f.Name, key, ok, keys)
		}
	}
	if len(ruleKeys) != len(keys)+1 { // and DefaultTTL
		t.Errorf("ruleKeys %v, a rule's keys %v", ruleKeys, keys)
	}
}

// TestPolicyBuiltInCode: a policy built in code is checked as a file's is,
// its problems placed by path, with no line.
func TestPolicyBuiltInCode(t *testing.T) {
	t.Parallel()
	c := Default()
	c.PolicySpec.DefaultTTL = 0
	c.PolicySpec.Rules = []Rule{{Match: "a", Effect: countersign.EffectAsk, Quorum: 1, Mode: countersign.ModeWait, TTL: -time.Second}}
	errs := Errors(c.Validate())
	if len(errs) != 2 || errs[0].Error() != "policy.default_ttl: 0s: must be positive" || errs[1].Error() != "policy.rules[0].ttl: -1s: must not be negative" {
		t.Errorf("a policy built in code: %q", errs)
	}
}
