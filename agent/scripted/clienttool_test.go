package scripted_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/agent"
	"github.com/countersign/countersign/agent/scripted"
)

func TestClientToolCall(t *testing.T) {
	m, err := scripted.New(scripted.Config{Rules: []scripted.Rule{
		{Match: `weather in (?P<city>\w+)`, Call: &scripted.Call{ClientTool: "get_weather", Input: `{"city": "{city}"}`}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []agent.Message{{Role: agent.RoleUser, Text: "weather in Lisbon"}}
	reply, err := m.Generate(context.Background(), &agent.Request{Messages: msgs, Tools: []agent.Tool{{Name: "get_weather"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.ToolCalls) != 1 || reply.ToolCalls[0].Action != "get_weather" || string(reply.ToolCalls[0].Input) != `{"city":"Lisbon"}` {
		t.Fatalf("reply %+v", reply)
	}
	// Not offered by this run's caller: the run fails, saying so.
	_, err = m.Generate(context.Background(), &agent.Request{Messages: msgs})
	if err == nil || !strings.Contains(err.Error(), `client tool "get_weather" is not among the tools the run's caller offers`) {
		t.Fatalf("without the tool: %v", err)
	}
}

func TestClientToolCallConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		call  scripted.Call
		field string
	}{
		"neither":       {scripted.Call{}, "rules[0].call.action"},
		"both":          {scripted.Call{Action: "payments.refund", ClientTool: "get_weather"}, "rules[0].call"},
		"a dotted name": {scripted.Call{ClientTool: "get.weather"}, "rules[0].call.client_tool"},
		"a long name":   {scripted.Call{ClientTool: strings.Repeat("x", 65)}, "rules[0].call.client_tool"},
	} {
		_, err := scripted.New(scripted.Config{Rules: []scripted.Rule{{Match: ".*", Call: &tc.call}}})
		var ce *scripted.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: %v, want an error at %s", name, err, tc.field)
		}
	}
}
