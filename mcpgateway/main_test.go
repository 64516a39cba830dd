package mcpgateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamEnv makes the test binary a stdio MCP server instead of running
// the tests: the command upstream of TestCommandUpstream.
const upstreamEnv = "MCPGATEWAY_TEST_STDIO_UPSTREAM"

func TestMain(m *testing.M) {
	if os.Getenv(upstreamEnv) == "1" {
		os.Exit(stdioUpstream())
	}
	os.Exit(m.Run())
}

// stdioUpstream serves two tools over stdio: pid, a read answering the
// process id, and die, a write whose call kills the process before it
// answers.
func stdioUpstream() int {
	s := mcp.NewServer(&mcp.Implementation{Name: "stdio-upstream", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "pid", InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(os.Getpid())}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "die", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			os.Exit(3)
			return nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}
