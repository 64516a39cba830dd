package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/config"
	"github.com/countersign/countersign/cstype"
	"github.com/countersign/countersign/internal/testlog"
	"github.com/countersign/countersign/store"
)

// conditionRules is a policy whose rules decide by the refund's amount, the
// caller's roles and the thread. The exact rules are tried first, in file
// order, then the globs, in file order.
func conditionRules() []countersign.Rule {
	finance := []string{"role:finance"}
	return []countersign.Rule{
		{Match: "payments.*", When: "thread_id.startsWith('sandbox-')", Effect: countersign.EffectAllow},
		{Match: "payments.refund", When: "input.amount > 10000", Effect: countersign.EffectDeny},
		{Match: "payments.refund", When: "input.amount > 1000", Effect: countersign.EffectAsk, Approvers: finance, Quorum: 2,
			Mode: countersign.ModeIndependent},
		{Match: "payments.*", When: "'vip' in actor.roles", Effect: countersign.EffectAsk, Mode: countersign.ModeIndependent},
		{Match: "payments.*", Effect: countersign.EffectAsk, Approvers: finance, Mode: countersign.ModeIndependent},
	}
}

// conditionCase is one call and the rule that must apply to it.
type conditionCase struct {
	name   string
	amount string
	roles  []string
	thread string
	// want: the effect, and for a rule that applies, its match, when and
	// quorum.
	status      countersign.ResultStatus // "" for denied
	match, when string
	quorum      int
}

var conditionCases = []conditionCase{
	{"over the deny threshold", "10000.5", nil, "t1", "", "", "", 0},
	{"at the deny threshold", "10000", nil, "t1", countersign.ResultPending, "payments.refund", "input.amount > 1000", 2},
	{"just over 1000", "1000.01", nil, "t1", countersign.ResultPending, "payments.refund", "input.amount > 1000", 2},
	{"an integer over 1000", "1001", nil, "t1", countersign.ResultPending, "payments.refund", "input.amount > 1000", 2},
	{"at 1000", "1000", nil, "t1", countersign.ResultPending, "payments.*", "", 1},
	{"small", "40", nil, "t1", countersign.ResultPending, "payments.*", "", 1},
	{"small, vip", "40", []string{"agent", "vip"}, "t1", countersign.ResultPending, "payments.*", "'vip' in actor.roles", 1},
	{"large, vip: the exact rule first", "5000", []string{"vip"}, "t1", countersign.ResultPending, "payments.refund", "input.amount > 1000", 2},
	{"small, sandbox thread", "40", nil, "sandbox-7", countersign.ResultSucceeded, "payments.*", "thread_id.startsWith('sandbox-')", 0},
	{"small, vip, sandbox: file order among globs", "40", []string{"vip"}, "sandbox-8", countersign.ResultSucceeded, "payments.*", "thread_id.startsWith('sandbox-')", 0},
	{"large, sandbox: the exact rule first", "5000", nil, "sandbox-9", countersign.ResultPending, "payments.refund", "input.amount > 1000", 2},
	{"sandbox is a prefix", "40", nil, "my-sandbox-1", countersign.ResultPending, "payments.*", "", 1},
}

// checkConditionCase makes c's call on e and checks the rule that applied.
func checkConditionCase(t *testing.T, e *countersign.Engine, i int, c conditionCase) {
	t.Helper()
	id := countersign.Identity{Tenant: "acme", Actor: "alice", Roles: c.roles}
	res, err := e.Call(context.Background(), &countersign.Call{Identity: id, ThreadID: fmt.Sprintf("%s-%d", c.thread, i), ToolCallID: "call_1",
		Action: "payments.refund", Input: json.RawMessage(`{"amount":` + c.amount + `,"customer":"c_9"}`)})
	if c.status == "" {
		if d, ok := errors.AsType[*countersign.DeniedError](err); !ok || d.Code != countersign.DeniedByPolicy {
			t.Errorf("%s: %+v, %v; want denied by the policy", c.name, res, err)
		}
		return
	}
	if err != nil || res.Status != c.status || res.Proposal == nil {
		t.Errorf("%s: %+v, %v; want %s with a record", c.name, res, err, c.status)
		return // not Fatal: TestConditionsConcurrent calls this from goroutines
	}
	p := res.Proposal
	if p.RuleMatch != c.match || p.RuleWhen != c.when {
		t.Errorf("%s: rule %q when %q applied, want %q when %q", c.name, p.RuleMatch, p.RuleWhen, c.match, c.when)
	}
	if c.quorum > 0 && p.Quorum != c.quorum {
		t.Errorf("%s: quorum %d, want %d", c.name, p.Quorum, c.quorum)
	}
}

// TestConditions checks which rule applies over thresholds, roles and
// thread ids: the most specific match first, equals in file order, the
// first whose when holds.
func TestConditions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: conditionRules()})
	for i, c := range conditionCases {
		checkConditionCase(t, h.engine, i, c)
	}
}

// TestConditionsAlike checks that the same rules decide alike whether they
// come from a configuration file, from Go with When expressions, or from Go
// with Condition funcs.
func TestConditionsAlike(t *testing.T) {
	t.Parallel()
	const file = `
policy:
  rules:
    - {match: "payments.*", when: "thread_id.startsWith('sandbox-')", effect: allow}
    - {match: payments.refund, when: "input.amount > 10000", effect: deny}
    - {match: payments.refund, when: "input.amount > 1000", approvers: ["role:finance"], quorum: 2, mode: independent}
    - {match: "payments.*", when: "'vip' in actor.roles", approvers: [requester], mode: independent}
    - {match: "payments.*", approvers: ["role:finance"], mode: independent}
`
	c, err := config.Parse("policy.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	funcs := conditionRules()
	amount := func(in *countersign.ConditionInput) float64 {
		var v struct{ Amount float64 }
		if err := json.Unmarshal(in.Input, &v); err != nil {
			t.Error(err)
		}
		return v.Amount
	}
	holds := map[string]func(in *countersign.ConditionInput) bool{
		"thread_id.startsWith('sandbox-')": func(in *countersign.ConditionInput) bool { return strings.HasPrefix(in.ThreadID, "sandbox-") },
		"input.amount > 10000":             func(in *countersign.ConditionInput) bool { return amount(in) > 10000 },
		"input.amount > 1000":              func(in *countersign.ConditionInput) bool { return amount(in) > 1000 },
		"'vip' in actor.roles": func(in *countersign.ConditionInput) bool {
			return strings.Contains(","+strings.Join(in.Identity.Roles, ",")+",", ",vip,")
		},
	}
	for i := range funcs {
		if w := funcs[i].When; w != "" {
			f := holds[w]
			funcs[i].When, funcs[i].Condition = "", &countersign.Condition{Name: w,
				Holds: func(_ context.Context, in *countersign.ConditionInput) (bool, error) { return f(in), nil }}
		}
	}
	for name, rules := range map[string][]countersign.Rule{"file": c.Policy().Rules, "Go funcs": funcs} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{rules: rules})
			for i, c := range conditionCases {
				checkConditionCase(t, h.engine, i, c)
			}
		})
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testlog.Buffer

// TestConditionsFailClosed checks that a condition that errors, is not a
// boolean, or costs over the budget denies the call with POLICY_ERROR,
// stores nothing, runs nothing, and logs the rule; and that the expression
// over budget is stopped quickly.
func TestConditionsFailClosed(t *testing.T) {
	t.Parallel()
	if countersign.DeniedByPolicyError != "POLICY_ERROR" {
		t.Fatalf("DeniedByPolicyError = %q, want the API's POLICY_ERROR", countersign.DeniedByPolicyError)
	}
	spec := func(b *backend) countersign.RawActionSpec {
		s := refundSpec(b)
		s.InputSchema = json.RawMessage(`{"type":"object","required":["amount","customer"],"additionalProperties":false,
			"properties":{"amount":{"type":"number"},"customer":{"type":"string"},"note":{"type":"string"},
			"meta":{"type":"object"},"tags":{"type":"array","items":{"type":"string"}}}}`)
		return s
	}
	cases := []struct {
		name, when, input, reason string
	}{
		{"a missing field", "input.note == 'urgent'", `{"amount":1,"customer":"c"}`, "no such key: note"},
		{"a division by zero", "int(input.amount) % 0 == 1", `{"amount":1,"customer":"c"}`, "modulus by zero"},
		{"not a boolean", "input.meta.flag", `{"amount":1,"customer":"c","meta":{"flag":"yes"}}`, "not a boolean"},
		{"over the cost budget", "input.tags.all(a, input.tags.all(b, input.tags.all(c, a + b + c != '')))",
			`{"amount":1,"customer":"c","tags":[` + strings.Repeat(`"x",`, 59) + `"x"]}`, "cost limit exceeded"},
		{"a Go condition's error", "", `{"amount":1,"customer":"c"}`, "ledger unreachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs syncBuffer
			rule := countersign.Rule{Match: "payments.refund", When: c.when, Effect: countersign.EffectAllow}
			if c.when == "" {
				rule.Condition = &countersign.Condition{Name: "ledger says ok", Holds: func(context.Context, *countersign.ConditionInput) (bool, error) {
					return false, errors.New("ledger unreachable")
				}}
			}
			h := newHarness(t, harnessOpts{
				rules:      []countersign.Rule{{Match: "payments.*", Effect: countersign.EffectAllow}, rule},
				actions:    func(b *backend) []*countersign.Action { return []*countersign.Action{mustAction(t, spec(b))} },
				engineOpts: func(o *countersign.Options) { o.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) },
			})
			start := time.Now()
			res, err := h.engine.Call(context.Background(), refundCall("call_1", "", c.input))
			if elapsed := time.Since(start); elapsed > time.Second {
				t.Errorf("the call took %v", elapsed)
			}
			d, ok := errors.AsType[*countersign.DeniedError](err)
			if !ok || d.Code != countersign.DeniedByPolicyError || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("call = %+v, %v; want denied with POLICY_ERROR, reason holding %q", res, err, c.reason)
			}
			if !errors.Is(err, countersign.ErrDenied) {
				t.Errorf("%v is not ErrDenied", err)
			}
			if _, err := h.store.GetProposalByToolCall(context.Background(), &store.GetProposalByToolCallParams{Tenant: "acme", ThreadID: "t1", ToolCallID: "call_1"}); !errors.Is(err, cstype.ErrNotFound) {
				t.Errorf("the denied call left a record: %v", err)
			}
			if n := h.backend.total(); n != 0 {
				t.Errorf("the denied call executed %d times", n)
			}
			log := logs.String()
			when := rule.When
			if rule.Condition != nil {
				when = rule.Condition.Name
			}
			for _, want := range []string{`"msg":"policy condition failed: call denied"`, `"rule":1`, `"match":"payments.refund"`,
				`"action":"payments.refund"`, `"actor":"alice"`} {
				if !strings.Contains(log, want) {
					t.Errorf("the log lacks %s:\n%s", want, log)
				}
			}
			if b, _ := json.Marshal(when); !strings.Contains(log, `"when":`+string(b)) {
				t.Errorf("the log lacks the rule's when %s:\n%s", b, log)
			}
		})
	}
}

// TestConditionsCompiledOnce checks where a bad condition fails: its
// syntax, variables and result type when the policy is validated (New),
// the fields of input when an action it matches is registered.
func TestConditionsCompiledOnce(t *testing.T) {
	t.Parallel()
	b := newBackend()
	for _, c := range []struct {
		rule countersign.Rule
		want string
	}{
		{countersign.Rule{Match: "payments.*", When: "input.amount >", Effect: countersign.EffectAsk}, `rule 1 ("payments.*"): field When: "input.amount >": column 15: Syntax error`},
		{countersign.Rule{Match: "payments.*", When: "user.id == 'x'", Effect: countersign.EffectAsk}, "undeclared reference to 'user'"},
		{countersign.Rule{Match: "payments.*", When: "input.amount + 1.0", Effect: countersign.EffectAsk}, "not a boolean"},
		{countersign.Rule{Match: "payments.*", When: "true", Condition: &countersign.Condition{Name: "x", Holds: func(context.Context, *countersign.ConditionInput) (bool, error) { return true, nil }},
			Effect: countersign.EffectAsk}, "field Condition: is set, and so is When: set at most one"},
		{countersign.Rule{Match: "payments.*", Condition: &countersign.Condition{Name: "x"}, Effect: countersign.EffectAsk}, "Name and Holds are required"},
	} {
		_, err := countersign.New(countersign.Options{Store: openMemory(t, time.Now), Policy: &countersign.Policy{Rules: []countersign.Rule{
			{Match: "other", Effect: countersign.EffectAllow}, c.rule}}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New with when %q: %v, want an error holding %q", c.rule.When, err, c.want)
		}
	}
	// Against the action's schema: a field it cannot have, a type error.
	for when, want := range map[string]string{
		"input.amout > 1000":    "undefined field 'amout'",
		"input.customer > 1000": "found no matching overload for '_>_' applied to '(string, int)'",
	} {
		e, err := countersign.New(countersign.Options{Store: openMemory(t, time.Now), Policy: &countersign.Policy{Rules: []countersign.Rule{
			{Match: "payments.*", When: when, Effect: countersign.EffectAsk}}}})
		if err != nil {
			t.Fatalf("New with when %q: %v (the fields of input are checked at Register)", when, err)
		}
		err = e.Register(mustAction(t, refundSpec(b)))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "for action payments.refund") {
			t.Errorf("Register under when %q: %v, want an error holding %q", when, err, want)
		}
		if _, ok := e.Action("payments.refund"); ok {
			t.Errorf("when %q: the action was registered despite its rule's error", when)
		}
	}
}

// TestConditionalDenyStillOffered checks that an action denied only under
// a condition is still offered to a model, and one denied by a rule that
// is tried before any condition is not.
func TestConditionalDenyStillOffered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: []countersign.Rule{
		{Match: "payments.refund", When: "input.amount > 1000", Effect: countersign.EffectDeny},
		{Match: "payments.*", Effect: countersign.EffectAsk},
		{Match: "files.delete", Effect: countersign.EffectDeny},
		{Match: "files.*", When: "tenant == 'acme'", Effect: countersign.EffectAllow},
	}})
	if !h.engine.Offered("payments.refund") {
		t.Error("payments.refund is denied only over 1000: it must be offered")
	}
	if h.engine.Offered("files.delete") {
		t.Error("files.delete is denied before any condition is tried: it must not be offered")
	}
	if !h.engine.Offered("files.read") {
		t.Error("files.read: offered (asked or allowed), not denied")
	}
}

// TestGrantRemembersTheCondition checks that a grant made under a rule with
// a when approves only calls under that rule: a rule of the same terms but
// another condition does not share its grants.
func TestGrantRemembersTheCondition(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, open storeOpener) {
		terms := func(r countersign.Rule) countersign.Rule {
			r.Effect, r.Approvers, r.GrantAnyInput = countersign.EffectAsk, []string{"role:finance"}, true
			r.Remember = []countersign.Scope{countersign.ScopeThread}
			return r
		}
		h := newHarness(t, harnessOpts{open: open, rules: []countersign.Rule{
			terms(countersign.Rule{Match: "payments.refund", When: "input.amount > 1000"}),
			terms(countersign.Rule{Match: "payments.refund"}),
		}})
		ctx := context.Background()
		first := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":5000,"customer":"c_1"}`))
		if _, err := h.engine.Decide(ctx, &countersign.Decision{Identity: tBob, ProposalID: first.ProposalID,
			Verdict: countersign.Approve, Remember: countersign.ScopeThread}); err != nil {
			t.Fatal(err)
		}
		if r := h.call(refundCall("call_1", countersign.ModeWait, `{"amount":5000,"customer":"c_1"}`)); r.Status != countersign.ResultSucceeded {
			t.Fatalf("the remembered call's execution = %+v", r)
		}
		// Another large refund: the same rule, so the grant approves it.
		if r := h.call(refundCall("call_2", "", `{"amount":7000,"customer":"c_2"}`)); r.GrantID == "" || r.Status != countersign.ResultSucceeded {
			t.Errorf("a large refund under the grant's rule = %+v; want approved by the grant", r)
		}
		// A small refund: the other rule, whose terms are the same but whose
		// condition is not.
		if r := h.call(refundCall("call_3", "", `{"amount":70,"customer":"c_3"}`)); r.GrantID != "" || r.Status != countersign.ResultPending {
			t.Errorf("a small refund under the other rule = %+v; want pending, no grant", r)
		}
	})
}

// TestConditionsConcurrent makes calls under conditions from many
// goroutines at once: the compiled programs are shared, each call's
// variables are its own (go test -race).
func TestConditionsConcurrent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{rules: conditionRules()})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				c := conditionCases[(g+i)%len(conditionCases)]
				c.thread = fmt.Sprintf("%s-g%d", c.thread, g)
				checkConditionCase(t, h.engine, i, c)
			}
		})
	}
	wg.Wait()
}
