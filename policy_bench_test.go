package countersign

import (
	"fmt"
	"testing"
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
	if err := p.validate(); err != nil {
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
