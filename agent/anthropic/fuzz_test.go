package anthropic

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/agent"
)

// FuzzGenerate feeds arbitrary response bodies, under a few statuses, to
// Generate: it returns a reply or an error, never panics, and a reply
// calls only the tools it was offered with object inputs.
func FuzzGenerate(f *testing.F) {
	for _, body := range []string{
		message("end_turn", `[{"type":"text","text":"hi"}]`),
		message("tool_use", `[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"payments_refund","input":{"amount":5}}]`),
		message("tool_use", `[{"type":"tool_use","id":"t1","name":"nope","input":{}}]`),
		message("tool_use", `[{"type":"tool_use","id":"t1","name":"payments_refund","input":"x"}]`),
		message("refusal", `[]`),
		message("end_turn", `[{"type":"thinking","thinking":"hmm"},{"type":"server_tool_use"}]`),
		`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`,
		`{"content":[1,null,{"type":"tool_use","input":{"a":[{}]}}]}`,
		`{"content":"x"}`, `null`, `[]`, `{`, ``,
	} {
		f.Add([]byte(body), uint8(0))
	}
	f.Add([]byte(`{"type":"error","error":{"message":"`+testKey+`"}}`), uint8(1))

	var mu sync.Mutex
	var body []byte
	var status int
	api := newFakeAPI(f, func(_ int, w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		b, s := body, status
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s)
		_, _ = w.Write(b)
	})
	m := api.model(f, Options{MaxRetries: -1})
	statuses := []int{http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound, http.StatusCreated}

	f.Fuzz(func(t *testing.T, b []byte, s uint8) {
		mu.Lock()
		body, status = b, statuses[int(s)%len(statuses)]
		mu.Unlock()
		got, err := m.Generate(context.Background(), &agent.Request{
			Messages: []agent.Message{{Role: agent.RoleUser, Text: "refund 5 to bob"}},
			Tools:    []agent.Tool{refundTool},
		})
		if err != nil {
			if got != nil {
				t.Errorf("a reply beside the error %v", err)
			}
			if !strings.HasPrefix(err.Error(), "anthropic:") {
				t.Errorf("error %q without the anthropic: prefix", err)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q holds the API key", err)
			}
			return
		}
		if got.Text == "" && len(got.ToolCalls) == 0 {
			t.Error("an empty reply without an error")
		}
		for _, c := range got.ToolCalls {
			if c.Action != refundTool.Name || c.ID == "" || !isObject(c.Input) {
				t.Errorf("call %+v (input %s)", c, c.Input)
			}
		}
	})
}
