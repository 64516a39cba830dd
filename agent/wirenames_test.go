package agent

import (
	"regexp"
	"strings"
	"testing"
)

func TestWireNames(t *testing.T) {
	long := strings.Repeat("a", 70)
	tools := []Tool{{Name: "payments.refund"}, {Name: "payments_refund"}, {Name: "crm.lookup"},
		{Name: ""}, {Name: "é"}, {Name: long}, {Name: long + "b"}, {Name: "payments.refund.v2"}}
	names, action := WireNames(tools)
	want := []string{"payments_refund", "payments_refund_2", "crm_lookup", "tool", "__", strings.Repeat("a", 64),
		strings.Repeat("a", 62) + "_2", "payments_refund_v2"}
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	for i, n := range names {
		if n != want[i] {
			t.Errorf("tool %q: wire name %q, want %q", tools[i].Name, n, want[i])
		}
		if !valid.MatchString(n) {
			t.Errorf("wire name %q is not valid", n)
		}
		if action[n] != tools[i].Name {
			t.Errorf("wire name %q maps back to %q, want %q", n, action[n], tools[i].Name)
		}
	}
	if len(action) != len(tools) {
		t.Errorf("%d wire names for %d tools", len(action), len(tools))
	}
}

func FuzzWireNames(f *testing.F) {
	f.Add("payments.refund", "payments_refund", "x")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		tools := []Tool{{Name: a}, {Name: b}, {Name: c}, {Name: a}}
		names, action := WireNames(tools)
		valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
		seen := map[string]bool{}
		for i, n := range names {
			if !valid.MatchString(n) || seen[n] || action[n] != tools[i].Name {
				t.Fatalf("tools %q: names %q", []string{a, b, c, a}, names)
			}
			seen[n] = true
		}
	})
}
