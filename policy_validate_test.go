package countersign_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// problem is what a test expects of one *InvalidPolicyError.
type problem struct {
	rule    int
	field   string
	item    int
	earlier int
	msg     string // the whole Error(), or its start when it ends in …
}

// TestPolicyValidate covers every check of Policy.Validate: each problem
// names its rule, field and list item, so that package config can place
// it on the line of a file, and every problem is reported.
func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	const ask, allow, deny = countersign.EffectAsk, countersign.EffectAllow, countersign.EffectDeny
	holds := func(context.Context, *countersign.ConditionInput) (bool, error) { return true, nil }
	rule := func(r countersign.Rule) *countersign.Policy { return &countersign.Policy{Rules: []countersign.Rule{r}} }
	one := func(field string, item int, msg string) []problem { return []problem{{0, field, item, -1, msg}} }
	for _, tt := range []struct {
		name   string
		policy *countersign.Policy
		want   []problem
	}{
		{"nil", nil, nil},
		{"empty", &countersign.Policy{}, nil},
		{"every field", &countersign.Policy{DefaultTTL: time.Hour, Rules: []countersign.Rule{
			{Match: "payments.*", When: "input.amount > 1000", Effect: ask, Approvers: []string{"role:finance", "actor:carol", "requester"},
				Quorum: 2, ForbidSelfApproval: true, TTL: 5 * time.Minute, Mode: countersign.ModeTwoPhase, Channels: []string{"web", "cli"},
				Remember: []countersign.Scope{countersign.ScopeThread, countersign.ScopeRun}, GrantTTL: time.Hour,
				EscalateAfter: time.Minute, EscalateTo: []string{"role:manager"}, RemindEvery: 2 * time.Minute},
			{Match: "payments.*", Condition: &countersign.Condition{Name: "big", Holds: holds}, Effect: deny},
			{Match: "payments.*", Effect: ask},
			{Match: "fs__read_*", Effect: allow},
			{Match: "crm:v2/lookup-1", Effect: allow},
		}}, nil},
		{"default ttl", &countersign.Policy{DefaultTTL: -time.Second}, []problem{{-1, "DefaultTTL", -1, -1, "policy: field DefaultTTL: -1s: must not be negative"}}},
		{"match empty", rule(countersign.Rule{Effect: ask}),
			one("Match", -1, `policy: rule 0 (""): field Match: is required: an action name or a glob such as payments.*`)},
		{"match chars", rule(countersign.Rule{Match: "pay ments", Effect: ask}),
			one("Match", -1, `policy: rule 0 ("pay ments"): field Match: "pay ments": want an action name or a glob of [A-Za-z0-9_.:/-] and *`)},
		{"match too long", rule(countersign.Rule{Match: strings.Repeat("a", 129), Effect: ask}),
			one("Match", -1, `policy: rule 0 ("`+strings.Repeat("a", 129)+`"): field Match: "`+strings.Repeat("a", 129)+`": want an action name or a glob of [A-Za-z0-9_.:/-] and *`)},
		{"match repeated", &countersign.Policy{Rules: []countersign.Rule{
			{Match: "a", Effect: ask}, {Match: "b", Effect: ask}, {Match: "a", Effect: deny},
		}}, []problem{{2, "Match", -1, 0, `policy: rule 2 ("a"): field Match: "a" repeats rule 0, which has no condition and so always applies first: this rule never applies`}}},
		{"match repeated after conditions", &countersign.Policy{Rules: []countersign.Rule{
			{Match: "a", When: "tenant == 'x'", Effect: ask},
			{Match: "a", Condition: &countersign.Condition{Name: "c", Holds: holds}, Effect: ask},
			{Match: "a", Effect: ask},
			{Match: "a", When: "true", Effect: ask},
		}}, []problem{{3, "Match", -1, 2, `policy: rule 3 ("a"): field Match: "a" repeats rule 2, which has no condition and so always applies first: this rule never applies`}}},
		{"when syntax", rule(countersign.Rule{Match: "a", When: "input.amount >", Effect: ask}),
			one("When", -1, `policy: rule 0 ("a"): field When: "input.amount >": column 15: Syntax error: mismatched input '<EOF>' expecting…`)},
		{"when and condition", rule(countersign.Rule{Match: "a", When: "true", Condition: &countersign.Condition{Name: "c", Holds: holds}, Effect: ask}),
			one("Condition", -1, `policy: rule 0 ("a"): field Condition: is set, and so is When: set at most one`)},
		{"condition without holds", rule(countersign.Rule{Match: "a", Condition: &countersign.Condition{Name: "c"}, Effect: ask}),
			one("Condition", -1, `policy: rule 0 ("a"): field Condition: Name and Holds are required`)},
		{"effect", rule(countersign.Rule{Match: "a", Effect: "maybe"}),
			one("Effect", -1, `policy: rule 0 ("a"): field Effect: "maybe": want allow, ask or deny`)},
		{"effect empty", rule(countersign.Rule{Match: "a"}),
			one("Effect", -1, `policy: rule 0 ("a"): field Effect: "": want allow, ask or deny`)},
		{"approver form", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"requester", "finance"}}),
			one("Approvers", 1, `policy: rule 0 ("a"): field Approvers[1]: "finance": want requester, role:NAME or actor:ID`)},
		{"approver name with a space", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"role:fin ance"}}),
			one("Approvers", 0, `policy: rule 0 ("a"): field Approvers[0]: "role:fin ance": want requester, role:NAME or actor:ID`)},
		{"approver empty name", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"actor:"}}),
			one("Approvers", 0, `policy: rule 0 ("a"): field Approvers[0]: "actor:": want requester, role:NAME or actor:ID`)},
		{"approver twice", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"role:x", "role:x"}}),
			one("Approvers", 1, `policy: rule 0 ("a"): field Approvers[1]: "role:x" is listed twice`)},
		{"quorum negative", rule(countersign.Rule{Match: "a", Effect: ask, Quorum: -1}),
			one("Quorum", -1, `policy: rule 0 ("a"): field Quorum: -1: must not be negative (0 means 1)`)},
		// The people the approvers name are a fixed set without a role.
		{"quorum unreachable", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"actor:bob", "requester"}, Quorum: 3}),
			one("Quorum", -1, `policy: rule 0 ("a"): field Quorum: 3 can never be met by the 2 people the approvers name`)},
		{"quorum unreachable without self", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"actor:bob", "requester"}, Quorum: 2, ForbidSelfApproval: true}),
			one("Quorum", -1, `policy: rule 0 ("a"): field Quorum: 2 can never be met by the 1 people the approvers name`)},
		{"quorum unreachable by default approvers", rule(countersign.Rule{Match: "a", Effect: ask, Quorum: 2}),
			one("Quorum", -1, `policy: rule 0 ("a"): field Quorum: 2 can never be met by the 1 people the approvers name`)},
		{"quorum unreachable with escalation", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"actor:a"}, Quorum: 3,
			EscalateAfter: time.Minute, EscalateTo: []string{"actor:b"}}),
			one("Quorum", -1, `policy: rule 0 ("a"): field Quorum: 3 can never be met by the 2 people the approvers name`)},
		{"nobody approves", rule(countersign.Rule{Match: "a", Effect: ask, ForbidSelfApproval: true}),
			one("", -1, `policy: rule 0 ("a"): no one may approve: the only approver is the requester, and self-approval is forbidden`)},
		{"nobody approves, requester named", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"requester"}, ForbidSelfApproval: true}),
			one("", -1, `policy: rule 0 ("a"): no one may approve: the only approver is the requester, and self-approval is forbidden`)},
		// A role is any number of people; escalation adds approvers; an
		// allow or deny rule asks no one.
		{"quorum with a role", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"role:finance"}, Quorum: 5, ForbidSelfApproval: true}), nil},
		{"quorum met once escalated", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"actor:a"}, Quorum: 2,
			EscalateAfter: time.Minute, EscalateTo: []string{"role:manager"}}), nil},
		{"self-approval forbidden, escalated", rule(countersign.Rule{Match: "a", Effect: ask, ForbidSelfApproval: true,
			EscalateAfter: time.Minute, EscalateTo: []string{"actor:boss"}}), nil},
		{"quorum of people", rule(countersign.Rule{Match: "a", Effect: ask, Approvers: []string{"actor:a", "actor:b", "requester"}, Quorum: 3}), nil},
		{"quorum on allow", rule(countersign.Rule{Match: "a", Effect: allow, Quorum: 3}), nil},
		{"ttl", rule(countersign.Rule{Match: "a", Effect: ask, TTL: -time.Minute}),
			one("TTL", -1, `policy: rule 0 ("a"): field TTL: -1m0s: must not be negative`)},
		{"grant ttl", rule(countersign.Rule{Match: "a", Effect: ask, GrantTTL: -time.Minute}),
			one("GrantTTL", -1, `policy: rule 0 ("a"): field GrantTTL: -1m0s: must not be negative`)},
		{"escalate_after negative", rule(countersign.Rule{Match: "a", Effect: ask, EscalateAfter: -time.Minute}),
			one("EscalateAfter", -1, `policy: rule 0 ("a"): field EscalateAfter: -1m0s: must not be negative`)},
		{"escalate_after alone", rule(countersign.Rule{Match: "a", Effect: ask, EscalateAfter: time.Minute}),
			one("EscalateTo", -1, `policy: rule 0 ("a"): field EscalateTo: is required: whom to add as approvers once the escalation is due`)},
		{"escalate_to alone", rule(countersign.Rule{Match: "a", Effect: ask, EscalateTo: []string{"role:m"}}),
			one("EscalateAfter", -1, `policy: rule 0 ("a"): field EscalateAfter: is required: when to add the escalation's approvers`)},
		{"escalate_after past the rule's ttl", rule(countersign.Rule{Match: "a", Effect: ask, TTL: 10 * time.Minute, EscalateAfter: 10 * time.Minute, EscalateTo: []string{"role:m"}}),
			one("EscalateAfter", -1, `policy: rule 0 ("a"): field EscalateAfter: 10m0s is not before the proposal expires (ttl 10m0s): it would never escalate`)},
		{"escalate_after past the policy's ttl", &countersign.Policy{DefaultTTL: time.Minute, Rules: []countersign.Rule{
			{Match: "a", Effect: ask, EscalateAfter: 2 * time.Minute, EscalateTo: []string{"role:m"}}}},
			one("EscalateAfter", -1, `policy: rule 0 ("a"): field EscalateAfter: 2m0s is not before the proposal expires (ttl 1m0s): it would never escalate`)},
		{"escalate_to form", rule(countersign.Rule{Match: "a", Effect: ask, EscalateAfter: time.Minute, EscalateTo: []string{"manager"}}),
			one("EscalateTo", 0, `policy: rule 0 ("a"): field EscalateTo[0]: "manager": want requester, role:NAME or actor:ID`)},
		{"escalate_to twice", rule(countersign.Rule{Match: "a", Effect: ask, EscalateAfter: time.Minute, EscalateTo: []string{"role:m", "role:m"}}),
			one("EscalateTo", 1, `policy: rule 0 ("a"): field EscalateTo[1]: "role:m" is listed twice`)},
		{"remind_every past the default ttl", rule(countersign.Rule{Match: "a", Effect: ask, RemindEvery: time.Hour}),
			one("RemindEvery", -1, `policy: rule 0 ("a"): field RemindEvery: 1h0m0s is not before the proposal expires (ttl 10m0s): no reminder would be sent`)},
		{"remind_every negative", rule(countersign.Rule{Match: "a", Effect: ask, RemindEvery: -time.Second}),
			one("RemindEvery", -1, `policy: rule 0 ("a"): field RemindEvery: -1s: must not be negative`)},
		{"mode", rule(countersign.Rule{Match: "a", Effect: ask, Mode: "later"}),
			one("Mode", -1, `policy: rule 0 ("a"): field Mode: "later": want wait, two_phase or independent`)},
		{"channel", rule(countersign.Rule{Match: "a", Effect: ask, Channels: []string{"api", "pigeon"}}),
			one("Channels", 1, `policy: rule 0 ("a"): field Channels[1]: "pigeon": want one of api, web, cli, text, agui, mcp, slack, email`)},
		{"channel twice", rule(countersign.Rule{Match: "a", Effect: ask, Channels: []string{"api", "api"}}),
			one("Channels", 1, `policy: rule 0 ("a"): field Channels[1]: "api" is listed twice`)},
		{"notify", rule(countersign.Rule{Match: "a", Effect: ask, Notify: []string{"slack", "pager"}}),
			one("Notify", 1, `policy: rule 0 ("a"): field Notify[1]: "pager": want one of slack, email`)},
		{"notify twice", rule(countersign.Rule{Match: "a", Effect: ask, Notify: []string{"email", "email"}}),
			one("Notify", 1, `policy: rule 0 ("a"): field Notify[1]: "email" is listed twice`)},
		{"notify a channel the rule excludes", rule(countersign.Rule{Match: "a", Effect: ask, Channels: []string{"web", "slack"}, Notify: []string{"slack", "email"}}),
			one("Notify", 1, `policy: rule 0 ("a"): field Notify[1]: "email" is a channel the rule's channels exclude: its approvers could not decide there`)},
		{"step_up", rule(countersign.Rule{Match: "a", Effect: ask, StepUp: "sms"}),
			one("StepUp", -1, `policy: rule 0 ("a"): field StepUp: "sms": want passkey`)},
		{"step_up with remember", rule(countersign.Rule{Match: "a", Effect: ask, StepUp: countersign.StepUpPasskey, Remember: []countersign.Scope{"thread"}}),
			one("Remember", -1, `policy: rule 0 ("a"): field Remember: a step_up rule makes and honours no grants: every approval needs its own assertion`)},
		{"remember", rule(countersign.Rule{Match: "a", Effect: ask, Remember: []countersign.Scope{"forever"}}),
			one("Remember", 0, `policy: rule 0 ("a"): field Remember[0]: "forever": want run or thread`)},
		{"remember twice", rule(countersign.Rule{Match: "a", Effect: ask, Remember: []countersign.Scope{"run", "run"}}),
			one("Remember", 1, `policy: rule 0 ("a"): field Remember[1]: "run" is listed twice`)},
		// Every problem, in the order of the rules and their fields.
		{"several", &countersign.Policy{DefaultTTL: -1, Rules: []countersign.Rule{
			{Match: "a", Effect: "maybe", Quorum: -2},
			{Match: "b", Effect: ask, Approvers: []string{"actor:x"}, Quorum: 2, Channels: []string{"fax"}},
		}}, []problem{
			{-1, "DefaultTTL", -1, -1, "policy: field DefaultTTL: -1ns: must not be negative"},
			{0, "Effect", -1, -1, `policy: rule 0 ("a"): field Effect: "maybe": want allow, ask or deny`},
			{0, "Quorum", -1, -1, `policy: rule 0 ("a"): field Quorum: -2: must not be negative (0 means 1)`},
			{1, "Channels", 0, -1, `policy: rule 1 ("b"): field Channels[0]: "fax": want one of api, web, cli, text, agui, mcp, slack, email`},
			{1, "Quorum", -1, -1, `policy: rule 1 ("b"): field Quorum: 2 can never be met by the 1 people the approvers name`},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.policy.Validate()
			var got []*countersign.InvalidPolicyError
			if err != nil {
				list := []error{err}
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					list = j.Unwrap()
				}
				for _, e := range list {
					pe, ok := e.(*countersign.InvalidPolicyError)
					if !ok {
						t.Fatalf("%T %v: want *InvalidPolicyError", e, e)
					}
					got = append(got, pe)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Validate: %d problems, want %d:\n%v", len(got), len(tt.want), err)
			}
			for i, w := range tt.want {
				g := got[i]
				msgOK := g.Error() == w.msg
				if prefix, ok := strings.CutSuffix(w.msg, "…"); ok {
					msgOK = strings.HasPrefix(g.Error(), prefix)
				}
				if g.Rule != w.rule || g.Field != w.field || g.Item != w.item || g.Earlier != w.earlier || !msgOK {
					t.Errorf("problem %d = {rule %d, field %q, item %d, earlier %d} %q\nwant {rule %d, field %q, item %d, earlier %d} %q",
						i, g.Rule, g.Field, g.Item, g.Earlier, g.Error(), w.rule, w.field, w.item, w.earlier, w.msg)
				}
			}
		})
	}
}

// TestPolicyValidateWhenCause: a When that does not compile carries the
// compiler's error as its cause.
func TestPolicyValidateWhenCause(t *testing.T) {
	t.Parallel()
	err := (&countersign.Policy{Rules: []countersign.Rule{{Match: "a", When: "user == 'x'", Effect: countersign.EffectAsk}}}).Validate()
	var pe *countersign.InvalidPolicyError
	if !errors.As(err, &pe) || pe.Err == nil || errors.Unwrap(pe) != pe.Err || !strings.Contains(pe.Err.Error(), "undeclared reference to 'user'") {
		t.Fatalf("Validate: %v (cause %v)", err, pe)
	}
}

// TestNewRefusesWhatValidateRefuses: New makes Validate's check, the one
// package config makes on a file. Before, New accepted a quorum its
// approvers could never meet (a proposal that could only expire) while a
// configuration file with the same rule was refused.
func TestNewRefusesWhatValidateRefuses(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		rule  countersign.Rule
		field string
	}{
		"unreachable quorum": {countersign.Rule{Match: "payments.refund", Effect: countersign.EffectAsk,
			Approvers: []string{"actor:alice", "actor:bob"}, Quorum: 3}, "Quorum"},
		"no one may approve": {countersign.Rule{Match: "payments.refund", Effect: countersign.EffectAsk,
			ForbidSelfApproval: true}, ""},
		"escalation after expiry": {countersign.Rule{Match: "payments.refund", Effect: countersign.EffectAsk,
			TTL: time.Minute, EscalateAfter: time.Hour, EscalateTo: []string{"role:manager"}}, "EscalateAfter"},
		"approver twice": {countersign.Rule{Match: "payments.refund", Effect: countersign.EffectAsk,
			Approvers: []string{"role:finance", "role:finance"}}, "Approvers"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := &countersign.Policy{Rules: []countersign.Rule{{Match: "crm.*", Effect: countersign.EffectAllow}, tt.rule}}
			_, err := countersign.New(countersign.Options{Store: openMemory(t, time.Now), Policy: p})
			var pe *countersign.InvalidPolicyError
			if !errors.As(err, &pe) || pe.Rule != 1 || pe.Field != tt.field || !strings.HasPrefix(err.Error(), "countersign: policy: rule 1 ") {
				t.Fatalf("New: %v, want an *InvalidPolicyError at rule 1, field %q", err, tt.field)
			}
			if verr := p.Validate(); verr == nil || "countersign: "+verr.Error() != err.Error() {
				t.Errorf("New's error %q is not Validate's %v", err, verr)
			}
		})
	}
	// A rule that repeats an earlier one's match without a condition.
	_, err := countersign.New(countersign.Options{Store: openMemory(t, time.Now), Policy: &countersign.Policy{Rules: []countersign.Rule{
		{Match: "payments.*", Effect: countersign.EffectAsk}, {Match: "payments.*", Effect: countersign.EffectDeny}}}})
	var pe *countersign.InvalidPolicyError
	if !errors.As(err, &pe) || pe.Rule != 1 || pe.Earlier != 0 {
		t.Fatalf("New with a repeated match: %v", err)
	}
}
