package condition

import (
	"encoding/json"
	"testing"
)

func BenchmarkEval(b *testing.B) {
	v := &Vars{InputJSON: []byte(`{"amount":1500,"customer":"c_9","note":"order 7731"}`), ActorID: "alice", Roles: []string{"agent"}, Tenant: "acme", ThreadID: "t-1", ActionName: "svc3.refund", ActionVersion: "1", ActionKind: "write"}
	for _, expr := range []string{"input.amount > 10000", "input.amount > 1000 && !('finance' in actor.roles)", "thread_id.startsWith('sandbox-')", "input.customer == 'c_blocked'"} {
		prg, err := Compile(expr, json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"amount":{"type":"number"},"customer":{"type":"string"},"note":{"type":"string"}}}`))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := prg.Eval(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
