package countersign

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/countersign/countersign/store/memstore"
)

// benchPolicy returns a policy of 50 rules, as a large deployment might
// write it: 30 exact action names and 20 globs of varied length, so that
// match has to scan every rule and rank the globs that fit.
func benchPolicy() *Policy {
	p := &Policy{}
	for i := range 30 {
		p.Rules = append(p.Rules, Rule{Match: fmt.Sprintf("svc%d.action%d", i%10, i), Effect: EffectAsk})
	}
	for i := range 10 {
		p.Rules = append(p.Rules, Rule{Match: fmt.Sprintf("svc%d.*", i), Effect: EffectAsk})
		p.Rules = append(p.Rules, Rule{Match: fmt.Sprintf("svc%d.*.refund*", i), Effect: EffectDeny})
	}
	return p
}

// BenchmarkPolicyMatch measures finding the rule that governs an action,
// which every call does once.
func BenchmarkPolicyMatch(b *testing.B) {
	p := benchPolicy()
	if len(p.Rules) != 50 {
		b.Fatalf("policy has %d rules, want 50", len(p.Rules))
	}
	if err := p.Validate(); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name, action string
		want         string // the rule's Match, or "" for none
	}{
		{"exact", "svc3.action13", "svc3.action13"},
		{"glob", "svc4.payments.refund_full", "svc4.*.refund*"},
		{"none", "other.payments.refund", ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			got := ""
			if r := p.match(bc.action); r != nil {
				got = r.Match
			}
			if got != bc.want {
				b.Fatalf("match(%q) = %q, want %q", bc.action, got, bc.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				p.match(bc.action)
			}
		})
	}
}

// conditionsPolicy returns a policy of 100 rules with conditions, over ten
// services: each has six rules for its refund action (five under a
// condition, over the input, the actor, the thread and the action), a
// conditional and a plain glob, and two exact rules for other actions.
func conditionsPolicy() *Policy {
	p := &Policy{}
	for i := range 10 {
		svc := fmt.Sprintf("svc%d", i)
		p.Rules = append(p.Rules,
			Rule{Match: svc + ".refund", When: "input.amount > 10000", Effect: EffectDeny},
			Rule{Match: svc + ".refund", When: "input.amount > 1000 && !('finance' in actor.roles)", Effect: EffectAsk,
				Approvers: []string{"role:finance"}, Quorum: 2},
			Rule{Match: svc + ".refund", When: "thread_id.startsWith('sandbox-')", Effect: EffectAllow},
			Rule{Match: svc + ".refund", When: "'vip' in actor.roles && input.amount < 100", Effect: EffectAllow},
			Rule{Match: svc + ".refund", When: "input.customer == 'c_blocked'", Effect: EffectDeny},
			Rule{Match: svc + ".refund", Effect: EffectAsk, Approvers: []string{"role:finance"}},
			Rule{Match: svc + ".*", When: "action.kind == 'read' && tenant == 'acme'", Effect: EffectAllow},
			Rule{Match: svc + ".*", Effect: EffectAsk},
			Rule{Match: svc + ".export", When: "actor.id != 'root'", Effect: EffectDeny},
			Rule{Match: svc + ".lookup", Effect: EffectAllow},
		)
	}
	return p
}

// BenchmarkPolicyConditions measures the policy's step of a call under
// 100 rules with conditions: finding the rule that applies to one call of
// svc3.refund (decoding its input, evaluating conditions in order) and
// resolving its terms. "first" stops at the second rule tried; "last"
// evaluates the five conditions of the action's exact rules, all false,
// and applies the plain rule after them.
func BenchmarkPolicyConditions(b *testing.B) {
	p := conditionsPolicy()
	if len(p.Rules) != 100 {
		b.Fatalf("policy has %d rules, want 100", len(p.Rules))
	}
	refund, err := NewRawAction(RawActionSpec{Name: "svc3.refund", Kind: KindWrite,
		InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["amount","customer"],
			"properties":{"amount":{"type":"number"},"customer":{"type":"string"},"note":{"type":"string"}}}`),
		Hooks: Hooks{Execute: func(context.Context, *ExecuteRequest) (*Receipt, error) { return &Receipt{}, nil }}})
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Store: memstore.New(nil), Policy: p, Actions: []*Action{refund}})
	if err != nil {
		b.Fatal(err)
	}
	alice := Identity{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}}
	for _, bc := range []struct {
		name, input string
		want        string // the When of the rule that applies
	}{
		{"first", `{"amount":1500,"customer":"c_9","note":"order 7731"}`, "input.amount > 1000 && !('finance' in actor.roles)"},
		{"last", `{"amount":500,"customer":"c_9","note":"order 7731"}`, ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &Call{Identity: alice, ThreadID: "t-1", ToolCallID: "call_1", Action: "svc3.refund", Input: json.RawMessage(bc.input)}
			r := &callRun{}
			if err := e.resolve(c, r); err != nil {
				b.Fatal(err)
			}
			r.input, r.digest, r.inputErr = r.a.prepareInput(c.Input)
			if err := e.applyPolicy(context.Background(), c, r); err != nil {
				b.Fatal(err)
			}
			if r.m.rule.Match != "svc3.refund" || r.m.rule.When != bc.want {
				b.Fatalf("rule %q when %q applies, want svc3.refund when %q", r.m.rule.Match, r.m.rule.When, bc.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := e.applyPolicy(context.Background(), c, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
