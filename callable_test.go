package countersign_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store/memstore"
)

// callableIdentities are the callers of TestCallableActions: a person and
// an agent of acme with various roles, and two callers of another tenant.
var callableIdentities = []countersign.Identity{
	{Tenant: "acme", Actor: "alice", Roles: []string{"agent"}, Kind: countersign.KindAgent},
	{Tenant: "acme", Actor: "bob", Roles: []string{"finance"}},
	{Tenant: "acme", Actor: "carol", Roles: []string{"operator"}},
	{Tenant: "globex", Actor: "eve"},
	{Tenant: "globex", Actor: "frank", Roles: []string{"finance"}},
}

// callableCase is an action of TestCallableActions and what each of
// callableIdentities gets for it, in their order: "allow", "ask" or "-"
// (not listed). dependent marks an action whose effect depends on the
// call, so that one call does not show what the listing says of all.
type callableCase struct {
	name      string
	kind      countersign.Kind
	confirm   bool // wrapped in ConfirmTool
	rules     []countersign.Rule
	want      [5]string
	dependent bool
}

func callableCases(goCondition *countersign.Condition) []callableCase {
	const (
		allow = countersign.EffectAllow
		ask   = countersign.EffectAsk
		deny  = countersign.EffectDeny
	)
	return []callableCase{
		{name: "notes.read", kind: countersign.KindRead, want: [5]string{"allow", "allow", "allow", "allow", "allow"}},
		{name: "notes.confirm", kind: countersign.KindRead, confirm: true, want: [5]string{"ask", "ask", "ask", "ask", "ask"}},
		{name: "email.send", want: [5]string{"ask", "ask", "ask", "ask", "ask"}},
		{name: "danger.delete", rules: []countersign.Rule{{Match: "danger.*", Effect: deny}}, want: [5]string{"-", "-", "-", "-", "-"}},
		// Conditions over the caller decide for the caller.
		{name: "payments.refund", rules: []countersign.Rule{
			{Match: "payments.refund", When: "'finance' in actor.roles", Effect: allow},
			{Match: "payments.refund", When: "tenant == 'globex'", Effect: deny},
			{Match: "payments.*", Effect: ask, Approvers: []string{"role:finance"}},
		}, want: [5]string{"ask", "allow", "ask", "-", "allow"}},
		{name: "admin.purge", rules: []countersign.Rule{
			{Match: "admin.*", When: "actor.roles.exists(r, r == 'operator')", Effect: ask},
			{Match: "admin.*", Effect: deny},
		}, want: [5]string{"-", "-", "ask", "-", "-"}},
		// An allow rule over the caller ahead of a confirm-only tool still asks.
		{name: "notes.peek", kind: countersign.KindRead, confirm: true, rules: []countersign.Rule{
			{Match: "notes.peek", When: "actor.id == 'bob'", Effect: allow},
		}, want: [5]string{"ask", "ask", "ask", "ask", "ask"}},
		// action is known before the call too.
		{name: "reports.read", kind: countersign.KindRead, rules: []countersign.Rule{
			{Match: "reports.*", When: "action.kind == 'write'", Effect: deny},
		}, want: [5]string{"allow", "allow", "allow", "allow", "allow"}},
		{name: "reports.write", rules: []countersign.Rule{
			{Match: "reports.*", When: "action.kind == 'write'", Effect: deny},
		}, want: [5]string{"-", "-", "-", "-", "-"}},
		// A condition over the caller that cannot be evaluated denies every
		// call that reaches it, as at call time.
		{name: "ops.broken", rules: []countersign.Rule{
			{Match: "ops.broken", When: "actor.roles[3] == 'x'", Effect: allow},
			{Match: "ops.broken", Effect: allow},
		}, want: [5]string{"-", "-", "-", "-", "-"}},
		// Conditions over the input, the thread or Go code depend on the
		// call: ask, unless every outcome is a denial.
		{name: "crm.update", rules: []countersign.Rule{
			{Match: "crm.update", When: "input.amount > 100", Effect: deny},
			{Match: "crm.update", Effect: allow},
		}, want: [5]string{"ask", "ask", "ask", "ask", "ask"}, dependent: true},
		{name: "crm.erase", rules: []countersign.Rule{
			{Match: "crm.erase", When: "input.amount > 100", Effect: deny},
			{Match: "crm.erase", Effect: deny},
		}, want: [5]string{"-", "-", "-", "-", "-"}},
		{name: "crm.note", rules: []countersign.Rule{
			{Match: "crm.note", Condition: goCondition, Effect: allow},
			{Match: "crm.note", Effect: allow},
		}, want: [5]string{"ask", "ask", "ask", "ask", "ask"}, dependent: true},
		{name: "ops.sandbox", rules: []countersign.Rule{
			{Match: "ops.sandbox", When: "thread_id.startsWith('sandbox-') && actor.id == 'bob'", Effect: allow},
			{Match: "ops.sandbox", When: "tenant == 'globex'", Effect: ask},
			{Match: "ops.sandbox", Effect: deny},
		}, want: [5]string{"ask", "ask", "ask", "ask", "ask"}, dependent: true},
		// Rules after one that decides for the caller are never reached:
		// acme's calls are all allowed, globex's depend on the input.
		{name: "ops.first", rules: []countersign.Rule{
			{Match: "ops.first", When: "tenant == 'acme'", Effect: allow},
			{Match: "ops.first", When: "input.amount > 100", Effect: ask},
			{Match: "ops.*", Effect: deny},
		}, want: [5]string{"allow", "allow", "allow", "ask", "ask"}, dependent: true},
	}
}

// TestCallableActions lists, for each caller, the actions it may call and
// their effects, and checks the listing against calls: an action listed
// allow runs at once, one listed ask (whose effect does not depend on the
// call) asks, and one not listed is denied.
func TestCallableActions(t *testing.T) {
	t.Parallel()
	var held atomic.Int64
	goCondition := &countersign.Condition{Name: "the customer is known", Holds: func(context.Context, *countersign.ConditionInput) (bool, error) {
		held.Add(1)
		return true, nil
	}}
	cases := callableCases(goCondition)
	var policy countersign.Policy
	var actions []*countersign.Action
	for _, c := range cases {
		policy.Rules = append(policy.Rules, c.rules...)
		a, err := countersign.NewRawAction(countersign.RawActionSpec{
			Name: c.name, Kind: c.kind, Description: "the " + c.name + " action",
			InputSchema:  json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`),
			Confirmation: countersign.Confirmation{Title: "Do {amount}", Verb: "Do"},
			Hooks: countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
				return &countersign.Receipt{ID: "r"}, nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if c.confirm {
			a = countersign.ConfirmTool(a)
		}
		actions = append(actions, a)
	}
	e, err := countersign.New(countersign.Options{Store: memstore.New(nil), Policy: &policy, Actions: actions, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, id := range callableIdentities {
		list, err := e.CallableActions(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id.Actor, err)
		}
		got := map[string]string{}
		var names []string
		for _, ca := range list {
			got[ca.Action.Name()] = string(ca.Effect)
			names = append(names, ca.Action.Name())
		}
		if !sortedStrings(names) {
			t.Errorf("%s: listed in the order %v, want by name", id.Actor, names)
		}
		for _, c := range cases {
			want := c.want[i]
			if g := got[c.name]; g != strings.TrimPrefix(want, "-") {
				t.Errorf("%s/%s: %s listed %q, want %q", id.Actor, id.Tenant, c.name, g, want)
			}
			checkCallAgrees(t, e, id, c, want)
		}
	}
	// Listing runs no Go condition (no call above reached it).
	if n := held.Load(); n != 0 {
		t.Errorf("listing ran a Go Condition %d times", n)
	}
	if _, err := e.CallableActions(ctx, countersign.Identity{Tenant: "acme"}); !errors.Is(err, countersign.ErrInvalidCall) {
		t.Errorf("an identity without an actor: %v, want ErrInvalidCall", err)
	}
}

// checkCallAgrees makes one call of c by id and checks that its answer is
// the one the listing's want says every call gets. The effect of a
// dependent action is no promise about one call: only its listing is
// checked.
func checkCallAgrees(t *testing.T, e *countersign.Engine, id countersign.Identity, c callableCase, want string) {
	t.Helper()
	if c.dependent {
		return
	}
	res, err := e.Call(context.Background(), &countersign.Call{Identity: id, ThreadID: "t-" + id.Actor + "-" + c.name,
		ToolCallID: "k1", Action: c.name, Input: json.RawMessage(`{"amount":1}`), WaitTimeout: time.Millisecond})
	got := fmt.Sprint(err)
	if res != nil {
		got = string(res.Status)
	}
	switch want {
	case "-":
		if _, ok := errors.AsType[*countersign.DeniedError](err); !ok {
			t.Errorf("%s calls %s, not listed: %s, want denied", id.Actor, c.name, got)
		}
	case "allow":
		if err != nil || res.Status != countersign.ResultSucceeded {
			t.Errorf("%s calls %s, listed allow: %s, want succeeded", id.Actor, c.name, got)
		}
	default:
		if err != nil || res.Status != countersign.ResultPending {
			t.Errorf("%s calls %s, listed ask: %s, want pending", id.Actor, c.name, got)
		}
	}
}

func sortedStrings(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}
