package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/cstype"
)

// tasksMeta is the _meta of a 2026-07-28 request whose client declares
// MCP Tasks.
const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// postMCP sends one 2026-07-28 JSON-RPC request to a served gateway as
// k_alice, with the headers the revision asks for (name: the tool or the
// task), and returns its result (failing on an error).
func postMCP(t *testing.T, url, method, name, params string) map[string]json.RawMessage {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{`+params+`,`+tasksMeta+`}}`))
	req.Header.Set("Authorization", "Bearer k_alice")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if i := strings.Index(string(raw), "data: "); i >= 0 {
		raw = raw[i+len("data: "):]
	}
	var out struct {
		Result map[string]json.RawMessage
		Error  json.RawMessage
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Result == nil {
		t.Fatalf("%s: %d %s (%v)", method, resp.StatusCode, raw, err)
	}
	return out.Result
}

func field(m map[string]json.RawMessage, key string) string {
	var s string
	_ = json.Unmarshal(m[key], &s)
	return s
}

// TestMCPTasksAcrossProcesses: two serve processes on one PostgreSQL store.
// A task made through one is read through the other, and once approved,
// run by one of their workers and completed on both.
func TestMCPTasksAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := mcpConfig(t, "")
	store := pgStoreURL(t)
	first, ctx := composeRunningWith(t, &setupFlags{config: path, store: store})
	second, _ := composeRunningWith(t, &setupFlags{config: path, store: store})
	var urls []string
	for _, a := range []*app{first, second} {
		if err := a.gateway.WaitConnected(ctx); err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(a.handler)
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL+"/tools/mcp")
	}
	made := postMCP(t, urls[0], "tools/call", "good__note", `"name":"good__note","arguments":{"text":"task"}`)
	id := field(made, "taskId")
	if field(made, "resultType") != "task" || !strings.HasPrefix(id, "prp_") {
		t.Fatalf("a gated call through the first process: %v, want a task", made)
	}
	if got := postMCP(t, urls[1], "tasks/get", id, `"taskId":"`+id+`"`); field(got, "status") != "working" {
		t.Fatalf("the task through the second process: %v, want working", got)
	}
	alice := countersign.Identity{Tenant: "acme", Actor: "alice"}
	if _, err := second.rt.engine.Decide(ctx, &countersign.Decision{Identity: alice, ProposalID: id, Verdict: countersign.Approve, Via: "api"}); err != nil {
		t.Fatal(err)
	}
	for {
		got := postMCP(t, urls[1], "tasks/get", id, `"taskId":"`+id+`"`)
		if field(got, "status") == "completed" {
			if !strings.Contains(string(got["result"]), `noted {\"text\":\"task\"}`) {
				t.Fatalf("the completed task's result: %s", got["result"])
			}
			break
		}
		if s := field(got, "status"); s != "working" {
			t.Fatalf("task %s: %v", id, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := postMCP(t, urls[0], "tasks/get", id, `"taskId":"`+id+`"`); field(got, "status") != "completed" {
		t.Fatalf("the task through the first process: %v, want completed", got)
	}
	p, err := first.rt.engine.Proposal(ctx, alice, id)
	if err != nil || p.Status != cstype.StatusSucceeded || p.Outcome == nil || p.Outcome.Executed == nil || !*p.Outcome.Executed {
		t.Fatalf("the task's proposal: %+v %v, want succeeded, executed", p, err)
	}
}
