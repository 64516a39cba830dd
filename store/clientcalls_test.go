package store_test

import (
	"reflect"
	"testing"

	"github.com/countersign/countersign/store"
)

func TestPendingClientCalls(t *testing.T) {
	user := &store.Message{Role: store.RoleUser, Text: "hi"}
	calls := func(run string, cs ...store.ToolCall) *store.Message {
		return &store.Message{Role: store.RoleAssistant, RunID: run, ToolCalls: cs}
	}
	client := func(id string) store.ToolCall { return store.ToolCall{ID: id, Action: "get_weather", Client: true} }
	action := store.ToolCall{ID: "call_s", Action: "payments.refund"}
	answer := func(id string) *store.Message { return &store.Message{Role: store.RoleTool, ToolCallID: id} }
	for _, tc := range []struct {
		name string
		msgs []*store.Message
		want []string
	}{
		{"none", []*store.Message{user}, nil},
		{"the run's calls, not the actions'", []*store.Message{user, calls("r1", client("c1"), action, client("c2")), answer("call_s")}, []string{"c1", "c2"}},
		{"answered", []*store.Message{user, calls("r1", client("c1"), client("c2")), answer("c2")}, []string{"c1"}},
		{"over two steps of one run", []*store.Message{user, calls("r1", client("c1")), calls("r1", client("c2"))}, []string{"c1", "c2"}},
		{"a user message moves on", []*store.Message{user, calls("r1", client("c1")), user}, nil},
		{"a text decision does not", []*store.Message{user, calls("r1", client("c1")), {Role: store.RoleUser, Text: "yes", Decision: true}}, []string{"c1"}},
		{"an admitted outcome does not", []*store.Message{user, calls("r1", client("c1")), {Role: store.RoleAssistant, Text: "refunded"}}, []string{"c1"}},
		{"a later run moves on", []*store.Message{user, calls("r1", client("c1")), calls("r2", client("c3"))}, []string{"c3"}},
		{"an answer to another call", []*store.Message{user, calls("r1", client("c1")), answer("c9")}, []string{"c1"}},
	} {
		var got []string
		for _, c := range store.PendingClientCalls(tc.msgs) {
			got = append(got, c.ID)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: pending %q, want %q", tc.name, got, tc.want)
		}
	}
}
