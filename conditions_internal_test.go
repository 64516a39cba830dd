package countersign

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// propCondition is a when expression and the same test in Go, the
// reference the property checks the engine against.
type propCondition struct {
	when  string
	holds func(c *propCall) bool
}

type propCall struct {
	action, tenant, thread string
	roles                  []string
	amount                 float64
}

var propConditions = []propCondition{
	{"", nil},
	{"input.amount > 1000", func(c *propCall) bool { return c.amount > 1000 }},
	{"input.amount <= 50.5", func(c *propCall) bool { return c.amount <= 50.5 }},
	{"'vip' in actor.roles", func(c *propCall) bool { return slices.Contains(c.roles, "vip") }},
	{"'finance' in actor.roles && input.amount < 5000", func(c *propCall) bool { return slices.Contains(c.roles, "finance") && c.amount < 5000 }},
	{"thread_id.startsWith('sandbox-')", func(c *propCall) bool { return strings.HasPrefix(c.thread, "sandbox-") }},
	{"tenant == 'acme' || actor.id == 'root'", func(c *propCall) bool { return c.tenant == "acme" }},
	{"action.name.endsWith('_full')", func(c *propCall) bool { return strings.HasSuffix(c.action, "_full") }},
}

var (
	propPatterns = []string{"payments.refund", "payments.refund_full", "payments.*", "*", "payments.refund*", "*.refund",
		"payments.*.refund", "p*s.re*", "crm.lookup", "*_full"}
	propActions = []string{"payments.refund", "payments.refund_full", "payments.eu.refund", "crm.lookup"}
)

// referenceRule is docs/api.md's order, written out without the engine's code:
// among the rules whose match fits (a glob as a regular expression), exact
// names first, then globs by the length of their literal text, longest
// first, equals in file order; the first whose when holds or is absent.
// -1: none applies.
func referenceRule(rules []Rule, conds []int, c *propCall) int {
	type ranked struct{ exact, literal, index int }
	var fit []ranked
	for i, r := range rules {
		parts := strings.Split(r.Match, "*")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		if !regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`).MatchString(c.action) {
			continue
		}
		exact := 1
		if !strings.Contains(r.Match, "*") {
			exact = 0
		}
		fit = append(fit, ranked{exact, -len(strings.ReplaceAll(r.Match, "*", "")), i})
	}
	slices.SortFunc(fit, func(a, b ranked) int {
		if a.exact != b.exact {
			return a.exact - b.exact
		}
		if a.literal != b.literal {
			return a.literal - b.literal
		}
		return a.index - b.index
	})
	for _, f := range fit {
		if pc := propConditions[conds[f.index]]; pc.holds == nil || pc.holds(c) {
			return f.index
		}
	}
	return -1
}

// TestPropertyExactlyOneRuleApplies checks, for random policies and
// calls, that exactly one rule applies (or none, and the defaults decide)
// and that it is the one docs/api.md's order names.
func TestPropertyExactlyOneRuleApplies(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","required":["amount"],"additionalProperties":false,"properties":{"amount":{"type":"number"}}}`)
	actions := map[string]*Action{}
	for _, name := range propActions {
		a, err := NewRawAction(RawActionSpec{Name: name, InputSchema: schema,
			Hooks: Hooks{Execute: func(context.Context, *ExecuteRequest) (*Receipt, error) { return &Receipt{}, nil }}})
		if err != nil {
			t.Fatal(err)
		}
		actions[name] = a
	}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 12).Draw(rt, "rules")
		p := &Policy{}
		var conds []int
		unconditional := map[string]bool{}
		for i := range n {
			cond := rapid.IntRange(0, len(propConditions)-1).Draw(rt, fmt.Sprintf("when%d", i))
			match := rapid.SampledFrom(propPatterns).Draw(rt, fmt.Sprintf("match%d", i))
			if unconditional[match] {
				// A rule after one of the same match without a condition
				// could never apply, and Validate refuses it.
				continue
			}
			unconditional[match] = cond == 0
			conds = append(conds, cond)
			p.Rules = append(p.Rules, Rule{Match: match, When: propConditions[cond].when, Effect: EffectAsk})
		}
		if err := p.Validate(); err != nil {
			rt.Fatal(err)
		}
		c := &propCall{
			action: rapid.SampledFrom(propActions).Draw(rt, "action"),
			tenant: rapid.SampledFrom([]string{"acme", "globex"}).Draw(rt, "tenant"),
			thread: rapid.SampledFrom([]string{"t1", "sandbox-1", "eu-sandbox-2", "sandbox-"}).Draw(rt, "thread"),
			roles:  rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"vip", "finance", "agent"}), 0, 3, rapid.ID[string]).Draw(rt, "roles"),
			amount: rapid.SampledFrom([]float64{0.25, 50, 50.5, 50.75, 999, 1000, 1000.5, 1001, 4999.99, 5000, 20000}).Draw(rt, "amount"),
		}
		a := actions[c.action]
		ar, err := p.compileFor(a)
		if err != nil {
			rt.Fatal(err)
		}
		input, _ := json.Marshal(map[string]float64{"amount": c.amount})
		got, err := ar.choose(context.Background(), &ConditionInput{
			Identity: Identity{Tenant: c.tenant, Actor: "alice", Roles: c.roles}, ThreadID: c.thread, Action: a, Input: input})
		if err != nil {
			rt.Fatalf("choose: %v", err)
		}
		gotIndex := -1
		if got != nil {
			gotIndex = got.index
			if got.rule != &p.Rules[got.index] {
				rt.Fatalf("the chosen rule %d is not the policy's rule %d", got.index, got.index)
			}
		}
		if want := referenceRule(p.Rules, conds, c); gotIndex != want {
			rt.Fatalf("call %+v: rule %d applies, docs/api.md's order names %d (rules %+v)", c, gotIndex, want, p.Rules)
		}
	})
}

// TestFingerprintCoversWhen checks that a rule's when is a term of its
// fingerprint, and that a rule without one keeps the fingerprint rules had
// before they could have conditions, so that upgrading retires no grant.
func TestFingerprintCoversWhen(t *testing.T) {
	t.Parallel()
	base := Rule{Match: "payments.*", Effect: EffectAsk, Approvers: []string{"role:finance"}, Quorum: 1, Mode: ModeWait,
		Remember: []Scope{ScopeThread}}
	// The encoding of the terms before conditions, written out.
	before := `{"approvers":["role:finance"],"quorum":1,"forbid_self_approval":false,"channels":null,"remember":["thread"],"grant_any_input":false,"mode":"wait"}`
	sum := sha256.Sum256([]byte(before))
	if got, want := base.fingerprint(), "rule:v1:"+hex.EncodeToString(sum[:16]); got != want {
		t.Errorf("fingerprint of a rule without when = %s, want %s (its fingerprint before conditions)", got, want)
	}
	large, small := base, base
	large.When, small.When = "input.amount > 1000", "input.amount <= 1000"
	named := base
	named.Condition = &Condition{Name: "input.amount > 1000", Holds: func(context.Context, *ConditionInput) (bool, error) { return true, nil }}
	fps := map[string]string{"none": base.fingerprint(), "large": large.fingerprint(), "small": small.fingerprint()}
	for a, fa := range fps {
		for b, fb := range fps {
			if a != b && fa == fb {
				t.Errorf("rules with when %s and %s share the fingerprint %s", a, b, fa)
			}
		}
	}
	// A Go condition is a term by its name, as the proposal records it.
	if named.fingerprint() != large.fingerprint() {
		t.Error("a Go condition named as an expression should fingerprint as that expression")
	}
}
