package mcpgateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/canonjson"
	"github.com/countersign/countersign/internal/mcpname"
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
	// schemaSHA256 is SchemaSHA256 of the input schema: what a read_only
	// entry pins.
	schemaSHA256 string
}

// ToolSeparator joins an upstream's name and its tool's: fs__read_file.
const ToolSeparator = "__"

// maxActionName is the longest action name the engine accepts.
const maxActionName = 128

// ValidToolName reports whether name can be an upstream tool's name: 1 to
// 128 of letters, digits, _, - and dots, which an action name allows too.
// The gateway exports no tool of another name.
func ValidToolName(name string) bool { return mcpname.ValidTool(name) }

// SchemaSHA256 is what a ReadOnlyTool's SchemaSHA256 pins: the SHA-256, in
// lowercase hex, of the RFC 8785 canonical JSON of a tool's inputSchema
// (keys sorted, no insignificant space, numbers and strings in their
// shortest form), so that a schema hashes alike however it is spaced or
// ordered.
func SchemaSHA256(inputSchema json.RawMessage) (string, error) {
	canon, err := canonjson.Canonicalize(inputSchema)
	if err != nil {
		return "", fmt.Errorf("input schema: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// ToolVersion is the action version of an upstream tool: its name and a
// hash of its input schema and annotations, <tool>:<16 hex digits>, the
// first 8 bytes of the SHA-256 of the RFC 8785 canonical JSON of
// {"annotations": annotations, "inputSchema": inputSchema} (annotations
// null when the tool has none). A changed schema or annotation is a new
// version, and a proposal made for the old one is not executed.
func ToolVersion(tool string, inputSchema, annotations json.RawMessage) (string, error) {
	if len(annotations) == 0 {
		annotations = json.RawMessage("null")
	}
	both, err := json.Marshal(map[string]json.RawMessage{"annotations": annotations, "inputSchema": inputSchema})
	if err != nil {
		return "", fmt.Errorf("input schema or annotations: %w", err)
	}
	canon, err := canonjson.Canonicalize(both)
	if err != nil {
		return "", fmt.Errorf("input schema or annotations: %w", err)
	}
	sum := sha256.Sum256(canon)
	return tool + ":" + hex.EncodeToString(sum[:8]), nil
}

// versionOf is the action version of t as an upstream lists it, with its
// input schema's JSON.
func versionOf(t *mcp.Tool) (version string, schema json.RawMessage, err error) {
	schema, err = json.Marshal(t.InputSchema)
	if err != nil {
		return "", nil, fmt.Errorf("input schema: %w", err)
	}
	ann := json.RawMessage("null")
	if a := t.Annotations; a != nil {
		if ann, err = json.Marshal(versionAnnotations{DestructiveHint: a.DestructiveHint, IdempotentHint: a.IdempotentHint,
			OpenWorldHint: a.OpenWorldHint, ReadOnlyHint: a.ReadOnlyHint, Title: a.Title}); err != nil {
			return "", nil, fmt.Errorf("annotations: %w", err)
		}
	}
	version, err = ToolVersion(t.Name, schema, ann)
	return version, schema, err
}

// versionAnnotations are a tool's annotations as its version hashes them,
// in a form of the gateway's own (the SDK's encoding may change with its
// settings): readOnlyHint and idempotentHint always (false when the
// upstream leaves them out), destructiveHint and openWorldHint when the
// upstream sets them, title when not empty.
type versionAnnotations struct {
	DestructiveHint *bool  `json:"destructiveHint,omitempty"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   *bool  `json:"openWorldHint,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	Title           string `json:"title,omitempty"`
}

// export replaces the tools of u by list: new and changed tools are
// registered with the engine and served, vanished ones withdrawn. A tool
// the policy denies is neither registered nor listed; one that cannot be
// exported (a bad name or schema) is logged and left out.
func (g *Gateway) export(u *upstream, list []*mcp.Tool) {
	u.exporting.Lock()
	defer u.exporting.Unlock()
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
		// What an operator pins a read to is in the debug log.
		g.log.Debug("mcp upstream tool exported", "upstream", u.name, "tool", nt.upstreamName,
			"kind", nt.action.Kind(), "idempotent", nt.action.Idempotent(), "version", nt.action.Version(), "schema_sha256", nt.schemaSHA256)
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
// policy denies it. Its kind and idempotence are what the upstream's
// configuration says of it (see Upstream), never the annotations alone.
func (g *Gateway) exportable(u *upstream, t *mcp.Tool) (*tool, error) {
	if !mcpname.ValidTool(t.Name) {
		return nil, errors.New("the name is not 1 to 128 of letters, digits, _, - and dots")
	}
	name := u.name + ToolSeparator + t.Name
	if len(name) > maxActionName {
		return nil, fmt.Errorf("%s is longer than %d bytes", name, maxActionName)
	}
	if !g.engine.Offered(name) {
		return nil, nil
	}
	version, schema, err := versionOf(t)
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if json.Unmarshal(schema, &obj) != nil || obj == nil || obj["type"] != "object" {
		return nil, errors.New(`the input schema is not an object schema ({"type": "object", …})`)
	}
	var ann *mcp.ToolAnnotations
	if t.Annotations != nil {
		c := *t.Annotations
		ann = &c
	}
	sum, err := SchemaSHA256(schema)
	if err != nil {
		return nil, err
	}
	kind := countersign.KindWrite
	if g.readOnly(u, t.Name, sum, ann) {
		kind = countersign.KindRead
	}
	idempotent := u.idempotent[t.Name] || u.trust && ann != nil && ann.IdempotentHint
	a, err := countersign.NewRawAction(countersign.RawActionSpec{
		Name: name, Version: version, Description: t.Description, Kind: kind,
		InputSchema: schema, Idempotent: idempotent,
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
	return &tool{up: u, upstreamName: t.Name, action: a, listed: listed, fingerprint: string(fp), schemaSHA256: sum}, nil
}

// readOnly reports whether u's tool, whose input schema hashes to sum, is a
// read: listed in the upstream's read_only (with its schema pin, if any,
// matching), or annotated readOnlyHint on an upstream whose annotations are
// trusted. A listed tool whose schema no longer matches its pin is a write,
// and said so in the log with the hash it has now.
func (g *Gateway) readOnly(u *upstream, tool, sum string, ann *mcp.ToolAnnotations) bool {
	if pin, listed := u.readOnly[tool]; listed {
		if pin == "" || pin == sum {
			return true
		}
		g.log.Warn("mcp upstream tool exported as a write: its input schema does not match the read_only pin",
			"upstream", u.name, "tool", tool, "schema_sha256", sum, "pinned", pin)
	}
	return u.trust && ann != nil && ann.ReadOnlyHint
}

// execute is every exported action's Execute hook: the one call of the
// upstream tool. The upstream's result is the receipt's result, passed back
// to the MCP client unchanged; an isError result is a failure the tool
// reported, not an uncertain outcome.
//
// Before the call it lists the upstream's tools afresh, on the connection
// it then calls on: an upstream may change a tool without announcing it,
// and a tool whose version (name, schema, annotations) is no longer the one
// the call was checked against (the proposal's) is not called. The call
// fails ACTION_VERSION_CHANGED, not executed, and the fresh listing is
// exported, so that the next call proposes the tool as it is now.
func (g *Gateway) execute(ctx context.Context, req *countersign.ExecuteRequest) (*countersign.Receipt, error) {
	g.mu.Lock()
	t := g.tools[req.Action]
	g.mu.Unlock()
	if t == nil {
		// Withdrawn upstream since the call was checked: no version of it
		// is the one approved.
		return nil, countersign.NotExecuted(countersign.CodeActionVersionChanged, fmt.Errorf("the upstream no longer offers %s", req.Action))
	}
	cs, err := t.up.connected(ctx)
	if err != nil {
		return nil, countersign.NotApplied(err)
	}
	fresh, err := t.up.tools(ctx, cs)
	if err != nil {
		return nil, countersign.NotApplied(fmt.Errorf("upstream %s: list its tools before the call: %w", t.up.name, err))
	}
	if err := g.sameVersion(t, fresh, req.ActionVersion); err != nil {
		g.export(t.up, fresh)
		return nil, countersign.NotExecuted(countersign.CodeActionVersionChanged, err)
	}
	res, err := t.up.call(ctx, cs, t.upstreamName, req.Input, req.OperationID)
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

// sameVersion checks that the upstream's fresh listing holds t at version.
func (g *Gateway) sameVersion(t *tool, fresh []*mcp.Tool, version string) error {
	for _, ft := range fresh {
		if ft.Name != t.upstreamName {
			continue
		}
		now, _, err := versionOf(ft)
		switch {
		case err != nil:
			return fmt.Errorf("the upstream's %s can no longer be read (%v); call again to propose it anew", ft.Name, err)
		case now != version:
			return fmt.Errorf("the upstream's %s changed since the call was checked (version %s, now %s); call again to propose the new version", ft.Name, version, now)
		}
		return nil
	}
	return fmt.Errorf("the upstream %s no longer lists %s", t.up.name, t.upstreamName)
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
// (mcpname.ValidTool), so the title has no placeholders.
func confirmation(server, tool string) countersign.Confirmation {
	return countersign.Confirmation{Title: fmt.Sprintf("Call %s on the MCP server %s", tool, server), Verb: "Call"}
}
