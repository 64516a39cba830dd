package server

import (
	"testing"
)

// TestReservedThreads: thread ids beginning mcp: or mcp_ are the MCP
// gateway's (docs/api.md Part 3, "MCP 2026-07-28"): naming one in a call,
// a message or an AG-UI input answers 403 FORBIDDEN, whoever asks, and
// stores nothing.
func TestReservedThreads(t *testing.T) {
	t.Parallel()
	forAllStores(t, harnessOptions{}, func(t *testing.T, h *harness) {
		for _, thread := range []string{"mcp:0123456789abcdef", "mcp_session", "mcp:", "mcp_"} {
			body := refund("reserved_1", "c_reserved", 40)
			body["thread_id"] = thread
			notOwner(t, "a call in "+thread, h.do(req{method: "POST", path: "/v1/calls", token: "alice", body: body}))
			notOwner(t, "a message to "+thread, h.do(req{method: "POST", path: "/v1/threads/" + thread + "/messages", token: "alice",
				body: say("hello")}))
			h.must(404, req{method: "GET", path: "/v1/threads/" + thread, token: "alice"})
		}
		// The prefix exactly: a thread merely starting with mcp is anyone's.
		body := refund("reserved_2", "c_reserved", 40)
		body["thread_id"] = "mcpx"
		if res := h.call("alice", body); res["status"] != "pending" {
			t.Fatalf("a call in mcpx: %v, want pending", res)
		}
	})
	h := aguiHarness(t)
	for _, thread := range []string{"mcp:0123456789abcdef", "mcp_session"} {
		notOwner(t, "an AG-UI input in "+thread, h.do(req{method: "POST", path: "/v1/agui", token: "alice",
			body: userInput(thread, "r1", "m1", "hello")}))
	}
}
