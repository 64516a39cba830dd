package mcpgateway

import (
	"encoding/json"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/store/memstore"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FuzzExport: whatever an upstream lists (any tool name, any input schema,
// any annotations), exporting it never panics, and what is exported is a
// registered action the gateway's MCP servers serve under the same name.
func FuzzExport(f *testing.F) {
	for _, seed := range []struct{ name, schema, ann string }{
		{"send_email", sendEmailSchema, `{"readOnlyHint":true}`},
		{"x", `{"type":"object","properties":{"a":{"$ref":"#/nope"}}}`, `{}`},
		{"x", `{"type":"string"}`, `null`},
		{"a/b", `{"type":"object"}`, `{"idempotentHint":true}`},
		{"", `{}`, `{}`},
		{"x", `{"type":"object","x-mcp-header":{"a":1}}`, `{}`},
		{"x", `[]`, `{}`},
		{"x", `{"type":"object","properties":{"a":{"pattern":"("}}}`, `{}`},
	} {
		f.Add(seed.name, seed.schema, seed.ann)
	}
	f.Fuzz(func(t *testing.T, name, schema, ann string) {
		engine, err := countersign.New(countersign.Options{Store: memstore.New(nil), Policy: testPolicy(), Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		g, err := New(Options{Engine: engine, Logger: quiet(), Upstreams: []Upstream{{Name: "up", Transport: newUpstreamServer().transport}}})
		if err != nil {
			t.Fatal(err)
		}
		fr := g.newFront(nil)
		tl := &mcp.Tool{Name: name, InputSchema: json.RawMessage(schema)}
		var a mcp.ToolAnnotations
		if json.Unmarshal([]byte(ann), &a) == nil {
			tl.Annotations = &a
		}
		if !json.Valid([]byte(schema)) {
			tl.InputSchema = map[string]any{"type": schema}
		}
		g.export(g.upstreams[0], []*mcp.Tool{tl})
		for action, et := range g.tools {
			if _, ok := engine.Action(action); !ok {
				t.Fatalf("exported %s is not registered", action)
			}
			if et.listed.Name != action {
				t.Fatalf("listed as %s, registered as %s", et.listed.Name, action)
			}
		}
		g.dropFront(fr)
	})
}
