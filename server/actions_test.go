package server

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/countersign/countersign"
)

// actionsPolicy is testPolicy with rules over the caller ahead of it:
// eve may not refund, finance refunds at once, and flaky.write is denied
// for some inputs.
func actionsPolicy(o *countersign.Options) {
	o.Policy = &countersign.Policy{Rules: append([]countersign.Rule{
		{Match: "payments.refund", When: "actor.id == 'eve'", Effect: countersign.EffectDeny},
		{Match: "payments.refund", When: "'finance' in actor.roles", Effect: countersign.EffectAllow},
		{Match: "flaky.write", When: "has(input.force)", Effect: countersign.EffectDeny},
	}, testPolicy.Rules...)}
}

// TestListActions lists, over HTTP on every store, the actions each
// caller may call: denied ones are missing, a when over the caller is
// decided for the caller, one over the input makes the action ask, and an
// agent credential lists what its actor's person does. Calls agree.
func TestListActions(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{engine: actionsPolicy}, func(t *testing.T, h *harness) {
		base := map[string]string{
			"flaky.reconciled": "ask", "flaky.write": "ask", "memo.write": "allow",
			"notes.read": "allow", "payments.refund": "ask", "probe.read": "allow",
		}
		with := func(name, effect string) map[string]string {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			if effect == "" {
				delete(m, name)
			} else {
				m[name] = effect
			}
			return m
		}
		cases := map[string]map[string]string{
			"alice":       base,
			"agent_alice": base,
			"dave":        base,
			"bob":         with("payments.refund", "allow"),
			"agent_bob":   with("payments.refund", "allow"),
			"x_alice":     with("payments.refund", "allow"),
			"x_eve":       with("payments.refund", ""),
		}
		for token, want := range cases {
			list := listActions(t, h, token)
			got := map[string]string{}
			var names []string
			for _, a := range list {
				got[a.Name] = a.Effect
				names = append(names, a.Name)
			}
			if !slices.IsSorted(names) || len(got) != len(want) {
				t.Errorf("%s: listed %v, want %v by name", token, names, want)
			}
			for name, effect := range want {
				if got[name] != effect {
					t.Errorf("%s: %s listed %q, want %q", token, name, got[name], effect)
				}
			}
		}

		// An action's fields.
		for _, a := range listActions(t, h, "alice") {
			switch a.Name {
			case "payments.refund":
				var schema struct {
					Type       string         `json:"type"`
					Properties map[string]any `json:"properties"`
				}
				if err := json.Unmarshal(a.InputSchema, &schema); err != nil || schema.Type != "object" ||
					schema.Properties["amount"] == nil || schema.Properties["customer"] == nil {
					t.Errorf("payments.refund's input_schema: %s (%v)", a.InputSchema, err)
				}
				if a.Version != "1" || a.Kind != "write" || a.Confirmation != (Confirmation{Title: "Refund {amount} EUR to {customer}", Verb: "Refund"}) {
					t.Errorf("payments.refund: %+v", a)
				}
			case "notes.read":
				if a.Kind != "read" || string(a.InputSchema) != `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}` {
					t.Errorf("notes.read: %+v, input_schema %s", a, a.InputSchema)
				}
			}
		}

		// Calls agree: bob's refund runs at once, eve's is denied, alice's asks.
		refundBy := func(token, toolCall string) map[string]any {
			body := refund(toolCall, "c_list", 12)
			body["thread_id"] = "t_list_" + token
			return h.call(token, body)
		}
		want(t, "bob's refund", refundBy("bob", "l1")["status"], "succeeded")
		want(t, "eve's refund", refundBy("x_eve", "l2")["status"], "denied")
		want(t, "alice's refund", refundBy("alice", "l3")["status"], "pending")

		h.must(401, req{method: "GET", path: "/v1/actions"})
		h.must(401, req{method: "GET", path: "/v1/actions", token: "nope"})
	})
}

func listActions(t *testing.T, h *harness, token string) []ActionInfo {
	t.Helper()
	var page ActionList
	resp := h.must(200, req{method: "GET", path: "/v1/actions", token: token})
	if err := json.Unmarshal(resp.body, &page); err != nil {
		t.Fatalf("%s: GET /v1/actions: %v: %s", token, err, resp.body)
	}
	if page.Actions == nil {
		t.Fatalf("%s: GET /v1/actions: no actions array: %s", token, resp.body)
	}
	return page.Actions
}
