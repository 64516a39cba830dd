package condition

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestVariables lists the variables each expression reads: a name a
// comprehension binds is not the variable of that name inside it, but is
// outside it; a variable named where it may not be read counts.
func TestVariables(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr string
		want []string
	}{
		{"true", nil},
		{"1 + 1 == 2 && 'a' < 'b'", nil},
		{"input.amount > 1000", []string{"input"}},
		{"has(input.count)", []string{"input"}},
		{"'vip' in actor.roles", []string{"actor"}},
		{"actor.id == 'alice' && tenant == 'acme'", []string{"actor", "tenant"}},
		{"thread_id.startsWith('t-eu-')", []string{"thread_id"}},
		{"action.kind == 'read' && action.name.startsWith('payments.')", []string{"action"}},
		{"size(tenant) > 0", []string{"tenant"}},
		{"{'acme': true}[tenant]", []string{"tenant"}},
		{"[actor.id, 'x'].exists(x, x == 'alice')", []string{"actor"}},
		{"actor.roles.exists(r, r == 'finance')", []string{"actor"}},
		{"actor.roles.all(r, r != tenant)", []string{"actor", "tenant"}},
		{"actor.roles.map(r, r + tenant).size() > 0", []string{"actor", "tenant"}},
		{"input.ids.exists_one(i, i == 1)", []string{"input"}},
		// Bound names shadow the variables, inside the comprehension only.
		{"[1, 2].exists(input, input > 1)", nil},
		{"actor.roles.exists(input, input == 'x')", []string{"actor"}},
		{"[1, 2].exists(input, input > 1) || input.amount > 0", []string{"input"}},
		{"[[1]].exists(tenant, tenant.exists(x, x == 1)) && tenant == 'acme'", []string{"tenant"}},
		// Named, if not read on every evaluation.
		{"false && input.amount > 1", []string{"input"}},
		{"actor.id == 'alice' || thread_id == 't1'", []string{"actor", "thread_id"}},
		{"input.count > 2 ? actor.id == 'a' : action.version == '1'", []string{"action", "actor", "input"}},
	}
	for _, tc := range cases {
		for _, schema := range []json.RawMessage{nil, json.RawMessage(refundSchema)} {
			prg, err := Compile(tc.expr, schema)
			if err != nil {
				t.Errorf("Compile(%q): %v", tc.expr, err)
				continue
			}
			if got := prg.Variables(); !slices.Equal(got, tc.want) {
				t.Errorf("Variables(%q), schema %v = %q, want %q", tc.expr, schema != nil, got, tc.want)
			}
		}
	}
}
