package agent_test

import (
	"context"
	"slices"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/store/memstore"
)

// TestCallerExecutedActionsAreNotOffered: an agent the server hosts runs its
// tools through the engine, in the server, where nobody runs an action its
// caller executes (execute: {by: caller}): its model is never offered one.
func TestCallerExecutedActionsAreNotOffered(t *testing.T) {
	t.Parallel()
	refund := countersign.RawActionSpec{Name: "payments.refund", Hooks: countersign.Hooks{Execute: func(context.Context, *countersign.ExecuteRequest) (*countersign.Receipt, error) {
		return &countersign.Receipt{}, nil
	}}}
	mail := countersign.RawActionSpec{Name: "mail.send", CallerExecuted: true}
	var actions []*countersign.Action
	for _, spec := range []countersign.RawActionSpec{refund, mail} {
		a, err := countersign.NewRawAction(spec)
		if err != nil {
			t.Fatal(err)
		}
		actions = append(actions, a)
	}
	e, err := countersign.New(countersign.Options{Store: memstore.New(nil), Actions: actions})
	if err != nil {
		t.Fatal(err)
	}
	model := &clientModel{}
	rt, err := agent.NewRuntime(agent.RuntimeOptions{Engine: e, Agents: []*agent.Agent{{Name: "demo", Model: model}}})
	if err != nil {
		t.Fatal(err)
	}
	ans, err := e.PostMessage(context.Background(), &countersign.Message{Identity: alice, ThreadID: "th1", Text: "hello", Agent: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Drive(context.Background(), ans.Run); err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, tool := range model.last().Tools {
		offered = append(offered, tool.Name)
	}
	if !slices.Equal(offered, []string{"payments.refund"}) {
		t.Errorf("offered %q, want only payments.refund (mail.send is executed by its caller)", offered)
	}
}
