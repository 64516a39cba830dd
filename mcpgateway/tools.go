package mcpgateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/canonjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tool is one upstream tool as the gateway exports it.
type tool struct {
	up *upstream
	// upstreamName is the tool's name upstream; listed.Name is the
	// action's, <server>__<tool>.
	upstreamName string
	action       *countersign.Action
	listed       *mcp.Tool
	// fingerprint tells a listing that changed anything the gateway
	// exports (schema, description, annotations) from one that did not.
	fingerprint string
}

// ToolSeparator joins an upstream's name and its tool's: fs__read_file.
const ToolSeparator = "__"

// mcpToolName is what an MCP tool name may be (1 to 128 of letters,
// digits, _ - and .), which is also what an action name allows.
var mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// maxActionName is the longest action name the engine accepts.
const maxActionName = 128

// ToolVersion is the action version of an upstream tool: its name and a
// hash of its input schema's canonical JSON, so that a changed schema is a
// new version and a proposal approved for the old one is not executed.
func ToolVersion(tool string, inputSchema json.RawMessage) (string, error) {
	canon, err := canonjson.Canonicalize(inputSchema)
	if err != nil {
		return "", fmt.Errorf("input schema: %w", err)
	}
	sum := sha256.Sum256(canon)
	return tool + ":" + hex.EncodeToString(sum[:8]), nil
}

// export replaces the tools of u by list: new and changed tools are
// registered with the engine and served, vanished ones withdrawn. A tool
// the policy denies is neither registered nor listed; one that cannot be
// exported (a bad name or schema) is logged and left out.
func (g *Gateway) export(u *upstream, list []*mcp.Tool) {
	next := map[string]*tool{}
	for _, t := range list {
		et, err := g.exportable(u, t)
		switch {
		case err != nil:
			g.log.Warn("mcp upstream tool not exported", "upstream", u.name, "tool", t.Name, "err", err)
			continue
		case et == nil:
			continue
		case next[et.listed.Name] != nil:
			g.log.Warn("mcp upstream tool not exported", "upstream", u.name, "tool", t.Name, "err", "listed twice")
			continue
		}
		next[et.listed.Name] = et
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var removed []string
	for name, old := range g.tools {
		if old.up == u && next[name] == nil {
			removed = append(removed, name)
			delete(g.tools, name)
		}
	}
	var added []*tool
	for name, nt := range next {
		if old := g.tools[name]; old != nil && old.fingerprint == nt.fingerprint {
			continue
		}
		// Another action of the same name (a webhook action, say) is not
		// the gateway's to replace.
		if a, ok := g.engine.Action(name); ok && g.registered[name] != a {
			g.log.Warn("mcp upstream tool not exported", "upstream", u.name, "tool", nt.upstreamName, "err", "an action of the name "+name+" exists")
			continue
		}
		if err := g.engine.Register(nt.action); err != nil {
			g.log.Warn("mcp upstream tool not exported", "upstream", u.name, "tool", nt.upstreamName, "err", err)
			continue
		}
		g.registered[name] = nt.action
		g.tools[name] = nt
		added = append(added, nt)
	}
	for _, f := range g.fronts {
		if len(removed) > 0 {
			f.server.RemoveTools(removed...)
		}
		for _, t := range added {
			f.add(t)
		}
	}
}

// exportable turns an upstream tool into the gateway's: nil when the
// policy denies it.
func (g *Gateway) exportable(u *upstream, t *mcp.Tool) (*tool, error) {
	if !mcpToolName.MatchString(t.Name) {
		return nil, errors.New("the name is not 1 to 128 of letters, digits, _, - and dots")
	}
	name := u.name + ToolSeparator + t.Name
	if len(name) > maxActionName {
		return nil, fmt.Errorf("%s is longer than %d bytes", name, maxActionName)
	}
	if !g.engine.Offered(name) {
		return nil, nil
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var obj map[string]any
	if json.Unmarshal(schema, &obj) != nil || obj == nil || obj["type"] != "object" {
		return nil, errors.New(`the input schema is not an object schema ({"type": "object", …})`)
	}
	version, err := ToolVersion(t.Name, schema)
	if err != nil {
		return nil, err
	}
	var ann *mcp.ToolAnnotations
	if t.Annotations != nil {
		c := *t.Annotations
		ann = &c
	}
	kind := countersign.KindWrite
	if ann != nil && ann.ReadOnlyHint {
		kind = countersign.KindRead
	}
	a, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: name, Version: version, Description: t.Description, Kind: kind,
		InputSchema: schema, Idempotent: ann != nil && ann.IdempotentHint,
		Confirmation: confirmation(u.name, t.Name),
		Hooks:        countersign.Hooks{Execute: g.execute},
	})
	if err != nil {
		return nil, err
	}
	listed := &mcp.Tool{Name: name, Title: t.Title, Description: t.Description,
		InputSchema: json.RawMessage(schema), Annotations: ann, Icons: t.Icons}
	fp, err := json.Marshal(listed)
	if err != nil {
		return nil, err
	}
	return &tool{up: u, upstreamName: t.Name, action: a, listed: listed, fingerprint: string(fp)}, nil
}

// execute is every exported action's Execute hook: the one call of the
// upstream tool. The upstream's result is the receipt's result, passed back
// to the MCP client unchanged; an isError result is a failure the tool
// reported, not an uncertain outcome.
func (g *Gateway) execute(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
	g.mu.Lock()
	t := g.tools[req.Action]
	g.mu.Unlock()
	if t == nil {
		return nil, countersign.NotApplied(fmt.Errorf("the upstream no longer offers %s", req.Action))
	}
	res, err := t.up.call(ctx, t.upstreamName, req.Input, req.OperationID)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(res)
	if err != nil {
		// The upstream ran the tool: its answer is lost, not its effect.
		return nil, fmt.Errorf("encode the result of %s: %w", req.Action, err)
	}
	if res.IsError {
		return nil, countersign.NotApplied(errors.New(textOf(res)))
	}
	return &countersign.Receipt{Result: raw}, nil
}

// textOf joins the text contents of a result: an error's message.
func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok && t.Text != "" {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "the tool reported an error"
	}
	return strings.Join(parts, "\n")
}

// confirmation is what an approver reads of a call wherever it is shown
// (the inbox's heading and preview, the CLI's preview, the elicitation's
// message): which server's tool it calls. The arguments are the proposal's
// input, which every surface shows beside it. Tool names hold no braces
// (mcpToolName), so the title has no placeholders.
func confirmation(server, tool string) countersign.Confirmation {
	return countersign.Confirmation{Title: fmt.Sprintf("Call %s on the MCP server %s", tool, server), Verb: "Call"}
}
