package condition

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// fuzzSchema gives the fuzzed expressions typed fields, a closed nested
// object, an open map and a list to reach.
const fuzzSchema = `{"type":"object","additionalProperties":false,"properties":{
 "amount":{"type":"number"},"count":{"type":"integer"},"customer":{"type":"string"},
 "tags":{"type":"array","items":{"type":"string"}},"ids":{"type":"array","items":{"type":"integer"}},
 "address":{"type":"object","additionalProperties":false,"properties":{"country":{"type":"string"}}},
 "meta":{"type":"object"}}}`

// FuzzCondition compiles and evaluates arbitrary expressions over
// arbitrary inputs: nothing panics, an evaluation ends within a second
// (the cost budget), and where Eval skips counting the cost because the
// estimate allows it, counting gives the same answer at no more than the
// estimated cost.
func FuzzCondition(f *testing.F) {
	seeds := []struct{ expr, input, roles, thread string }{
		{"input.amount > 1000", `{"amount":1000.5,"customer":"c_9"}`, "agent", "t1"},
		{"has(input.count) && input.count + 1 > 2", `{"count":2}`, "", "t1"},
		{"'vip' in actor.roles && thread_id.startsWith('eu-')", `{}`, "vip,finance", "eu-1"},
		{"input.tags.exists(t, t == 'urgent')", `{"tags":["a","urgent"]}`, "", "t"},
		{"input.ids.all(i, i % 2 == 0)", `{"ids":[2,4,6]}`, "", "t"},
		{"input.address.country in ['DE', 'FR']", `{"address":{"country":"DE"}}`, "", "t"},
		{"input.meta.x.y == 1", `{"meta":{"x":{"y":1}}}`, "", "t"},
		{"input.customer.matches('^c_[0-9]+$')", `{"customer":"c_123"}`, "", "t"},
		{"input.tags.all(a, input.tags.all(b, a + b != ''))", `{"tags":["x","x","x","x","x","x","x","x"]}`, "", "t"},
		{"action.kind == 'write' && tenant != '' && actor.id.size() < 10", `{}`, "", "t"},
		{"1 / 0 == 1", `{}`, "", "t"},
		{"input", `{}`, "", "t"},
	}
	for _, s := range seeds {
		f.Add(s.expr, []byte(s.input), s.roles, s.thread)
	}
	f.Fuzz(func(t *testing.T, expr string, input []byte, roles, thread string) {
		prg, err := Compile(expr, json.RawMessage(fuzzSchema))
		if err != nil {
			return
		}
		if !json.Valid(input) {
			return // a condition sees only validated input
		}
		var rs []string
		if roles != "" {
			rs = strings.Split(roles, ",")
		}
		vars := func() *Vars {
			return &Vars{InputJSON: input, ActorID: "alice", Roles: rs, Tenant: "acme", ThreadID: thread,
				ActionName: "payments.refund", ActionVersion: "1", ActionKind: "write"}
		}
		start := time.Now()
		got, err := prg.Eval(vars())
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Eval(%q) took %v", expr, d)
		}
		v := vars()
		if prg.fast == nil || !v.bounded() {
			return
		}
		want, spent, werr := prg.evalTracked(v)
		if (err == nil) != (werr == nil) || got != want {
			t.Fatalf("Eval(%q) over %s = %v, %v; counting the cost: %v, %v", expr, input, got, err, want, werr)
		}
		if spent > prg.Cost {
			t.Fatalf("Eval(%q) over %s cost %d, over its estimate %d", expr, input, spent, prg.Cost)
		}
	})
}
