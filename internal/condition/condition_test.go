package condition

import (
	"encoding/json"
	"strings"
	"testing"
)

const refundSchema = `{"type":"object","required":["amount","customer"],"additionalProperties":false,
 "properties":{"amount":{"type":"number"},"count":{"type":"integer"},"customer":{"type":"string"},
 "tags":{"type":"array","items":{"type":"string"}},"ids":{"type":"array","items":{"type":"integer"}},
 "address":{"type":"object","additionalProperties":false,"properties":{"country":{"type":"string"}}},
 "open":{"type":"object","properties":{"n":{"type":"integer"}}},
 "meta":{"type":"object"}}}`

func vars(t *testing.T, input string) *Vars {
	t.Helper()
	if !json.Valid([]byte(input)) {
		t.Fatalf("invalid JSON %s", input)
	}
	return &Vars{InputJSON: []byte(input), ActorID: "alice", Roles: []string{"agent", "vip"}, Tenant: "acme", ThreadID: "t-eu-1",
		ActionName: "payments.refund", ActionVersion: "1", ActionKind: "write"}
}

func TestEval(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr, input string
		want        bool
		err         string // a substring of the evaluation error, "" for none
	}{
		{"input.amount > 1000", `{"amount":1000.5,"customer":"c"}`, true, ""},
		{"input.amount > 1000", `{"amount":1000,"customer":"c"}`, false, ""},
		{"input.amount >= 1000", `{"amount":1000,"customer":"c"}`, true, ""},
		{"input.amount > 1000.0", `{"amount":1001,"customer":"c"}`, true, ""},
		{"input.count + 1 == 3", `{"amount":1,"customer":"c","count":2}`, true, ""},
		{"input.count > 2.5", `{"amount":1,"customer":"c","count":3}`, true, ""},
		{"input.ids.exists(i, i + 1 == 8)", `{"amount":1,"customer":"c","ids":[3,7]}`, true, ""},
		{"'vip' in actor.roles", `{"amount":1,"customer":"c"}`, true, ""},
		{"actor.id == 'alice' && tenant == 'acme'", `{"amount":1,"customer":"c"}`, true, ""},
		{"thread_id.startsWith('t-eu-')", `{"amount":1,"customer":"c"}`, true, ""},
		{"action.name == 'payments.refund' && action.kind == 'write' && action.version == '1'", `{"amount":1,"customer":"c"}`, true, ""},
		{"has(input.count) && input.count > 1", `{"amount":1,"customer":"c"}`, false, ""},
		{"input.address.country == 'DE'", `{"amount":1,"customer":"c","address":{"country":"DE"}}`, true, ""},
		{"input.meta.anything == 1", `{"amount":1,"customer":"c","meta":{"anything":1}}`, true, ""},
		{"input.open.n + 1 == 3 && input.open.other == 'x'", `{"amount":1,"customer":"c","open":{"n":2,"other":"x"}}`, true, ""},
		{"'x' in input.tags", `{"amount":1,"customer":"c","tags":["x"]}`, true, ""},
		// Fails closed: a missing field, a division by zero.
		{"input.count > 1", `{"amount":1,"customer":"c"}`, false, "no such key"},
		{"1 / (input.count - 2) > 0", `{"amount":1,"customer":"c","count":2}`, false, "division by zero"},
		{"input.meta.x", `{"amount":1,"customer":"c","meta":{"x":3}}`, false, "not a boolean"},
		// Over the cost budget.
		{"[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, a+b+c+d > 0))))", `{"amount":1,"customer":"c"}`, false, "cost limit"},
	}
	for _, tc := range cases {
		prg, err := Compile(tc.expr, json.RawMessage(refundSchema))
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.expr, err)
			continue
		}
		got, err := prg.Eval(vars(t, tc.input))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("Eval(%q) over %s: %v", tc.expr, tc.input, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Eval(%q) over %s: error %v, want one with %q", tc.expr, tc.input, err, tc.err)
		case got != tc.want:
			t.Errorf("Eval(%q) over %s = %v, want %v", tc.expr, tc.input, got, tc.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ expr, err string }{
		{"", "empty"},
		{"input.amount >", "Syntax error"},
		{"input.amout > 1000", "undefined field 'amout'"},
		{"input.address.countri == 'DE'", "undefined field 'countri'"},
		{"input.customer > 1000", "no matching overload"},
		{"input.amount", "not a boolean"},
		{"input.amount + 1.0", "not a boolean"},
		{"actor.rol == 'x'", "undefined field 'rol'"},
		{"input.open.n == 'x'", "no matching overload"},
		{"user == 'x'", "undeclared reference"},
		{strings.Repeat("a", MaxLength+1), "size"},
	}
	for _, tc := range cases {
		_, err := Compile(tc.expr, json.RawMessage(refundSchema))
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Compile(%.40q): %v, want an error with %q", tc.expr, err, tc.err)
		}
	}
	// Without a schema, input is dyn: its fields are not checked.
	if _, err := Compile("input.amout > 1000", nil); err != nil {
		t.Errorf("Compile without a schema: %v", err)
	}
}
