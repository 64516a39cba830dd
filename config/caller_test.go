package config

import (
	"strings"
	"testing"
)

// TestExecuteByCaller: `execute: {by: caller}` declares an action its
// calling agent runs; anything else under by, or a url beside it, fails
// with the line.
func TestExecuteByCaller(t *testing.T) {
	t.Parallel()
	c := parseOK(t, "actions:\n  - name: mail.send\n    idempotent: true\n    execute: {by: caller}\n    reconcile: {url: \"http://127.0.0.1:9100/reconcile\"}\n")
	if a := c.Actions[0]; !a.ExecutedByCaller() || a.Execute.URL != "" || a.Reconcile == nil {
		t.Errorf("action = %+v, want executed by its caller, with reconcile", a)
	}
	if a := parseOK(t, "actions:\n  - name: b\n    execute: {url: \"http://127.0.0.1:9100/execute\"}\n").Actions[0]; a.ExecutedByCaller() {
		t.Error("a webhook action reports ExecutedByCaller")
	}
	for _, tt := range []struct{ yaml, reason string }{
		{"actions:\n  - name: a\n    execute: {by: server}\n", `execute.by: "server": want caller`},
		{"actions:\n  - name: a\n    execute: {by: caller, url: \"http://127.0.0.1:9100/x\"}\n", "execute.url: an action executed by its caller has no execute url"},
		{"actions:\n  - name: a\n    kind: read\n    execute: {by: caller}\n", "a caller-executed action is a write"},
		{"actions:\n  - name: a\n    execute: {by: caller}\n    prepare: {by: caller}\n", `unknown key "by"`},
	} {
		_, err := Parse("bad.yaml", []byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("Parse(%q) = %v, want an error holding %q", tt.yaml, err, tt.reason)
		}
	}
}
