package config

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/defaults"
	"github.com/countersign/countersign/internal/mcpname"
	"go.yaml.in/yaml/v3"
)

// Defaults of the mcp section.
const (
	DefaultMCPPath = "/mcp"           // mcp.path
	DefaultMCPHold = defaults.MCPHold // mcp.hold: mcpgateway.DefaultHold
)

// MaxMCPHold is the longest mcp.hold: MCP clients give up on a request long
// before, and a hold is a goroutine and a watched proposal while it lasts.
const MaxMCPHold = 10 * time.Minute

// MCP configures the MCP gateway: the upstream MCP servers whose tools are
// re-exported, each call gated by the policy, and where serve mounts it.
type MCP struct {
	// Path is where serve serves the gateway over streamable HTTP, on its
	// listener, with bearer auth. Default DefaultMCPPath.
	Path string
	// Hold bounds how long a tools/call waits for a decision from another
	// channel before it answers pending. Default DefaultMCPHold.
	Hold time.Duration
	// Servers are the upstream servers, in file order. Without any, serve
	// mounts no gateway.
	Servers []MCPServer
	// StateSecretEnv names the environment variable holding the secret
	// that signs the request states of 2026-07-28 in-band approvals
	// (HMAC-SHA256), so that every process serving the gateway accepts
	// the states any of them made. It must differ from every other
	// secret. Unset: each process signs with a random secret of its own
	// (see mcpgateway.Options.StateSecret).
	StateSecretEnv string
}

// MCPServer is one upstream MCP server: a command speaking MCP over stdio,
// or a streamable HTTP endpoint (exactly one of Command and URL).
type MCPServer struct {
	// Name prefixes the server's tools: they become the actions
	// <name>__<tool>. Letters and digits with single - or _ between them,
	// at most mcpgateway.MaxUpstreamName bytes, unique in the file.
	Name string
	// Command is the program and its arguments.
	Command []string
	// Env adds variables to the command's environment (which otherwise
	// holds only a few basic ones, such as PATH and HOME).
	Env map[string]string
	// URL is a streamable HTTP endpoint, http:// or https://.
	URL string
	// HeadersEnv maps a request header to the environment variable that
	// holds its value (Authorization: CRM_MCP_AUTH). See Headers. They are
	// sent to the URL's origin only (see mcpgateway.HTTPUpstream).
	HeadersEnv map[string]string
	// ReadOnly are the server's tools that are reads, by their exact names
	// upstream; every other tool is a write, whatever it says of itself
	// (see mcpgateway.Upstream).
	ReadOnly []MCPReadOnly
	// Idempotent are the server's tools retried after a connection that
	// broke during a call, by their exact names upstream.
	Idempotent []string
	// TrustAnnotations honours the server's readOnlyHint and
	// idempotentHint annotations. Default false.
	TrustAnnotations bool
}

// MCPReadOnly is one entry of a server's read_only: a tool's name, or
// {name, schema_sha256}.
type MCPReadOnly struct {
	Name string
	// SchemaSHA256 pins the tool's input schema: it is a read only while
	// mcpgateway.SchemaSHA256 of its inputSchema is this.
	SchemaSHA256 string
}

// Headers returns the headers of an HTTP upstream, each value read from the
// variable HeadersEnv names through getenv. It fails, wrapping
// ErrSecretUnset, when one is empty or unset; its errors never hold a value.
func (s MCPServer) Headers(getenv func(string) string) (http.Header, error) {
	h := http.Header{}
	for _, k := range sortedKeys(s.HeadersEnv) {
		env := s.HeadersEnv[k]
		v := getenv(env)
		if v == "" {
			return nil, fmt.Errorf("config: environment variable %s (mcp.servers %s, headers_env.%s) is empty or unset: %w", env, s.Name, k, ErrSecretUnset)
		}
		h.Set(k, v)
	}
	return h, nil
}

func (d *decoder) mcp(m *MCP, path string, n *yaml.Node) {
	d.mapping(path, n, []key{
		{"path", text(d, &m.Path)},
		{"hold", d.duration(&m.Hold)},
		{"state_secret_env", text(d, &m.StateSecretEnv)},
		{"servers", func(p string, v *yaml.Node) {
			m.Servers = []MCPServer{}
			d.sequence(p, v, func(p string, v *yaml.Node) {
				var s MCPServer
				d.mapping(p, v, []key{
					{"name", text(d, &s.Name)},
					{"command", texts(d, &s.Command)},
					{"env", d.stringMap(&s.Env)},
					{"url", text(d, &s.URL)},
					{"headers_env", d.stringMap(&s.HeadersEnv)},
					{"read_only", d.mcpReadOnly(&s.ReadOnly)},
					{"idempotent", texts(d, &s.Idempotent)},
					{"trust_annotations", d.boolean(&s.TrustAnnotations)},
				})
				m.Servers = append(m.Servers, s)
			})
		}},
	})
}

// mcpReadOnly decodes a server's read_only: each entry a tool's name, or
// {name, schema_sha256}.
func (d *decoder) mcpReadOnly(out *[]MCPReadOnly) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		list := []MCPReadOnly{}
		ok := d.sequence(path, n, func(p string, v *yaml.Node) {
			var ro MCPReadOnly
			switch v.Kind {
			case yaml.MappingNode:
				d.mapping(p, v, []key{
					{"name", text(d, &ro.Name)},
					{"schema_sha256", text(d, &ro.SchemaSHA256)},
				})
			case yaml.ScalarNode:
				text(d, &ro.Name)(p, v)
			default:
				d.fail(p, v, "want a tool's name or {name, schema_sha256}, not %s", describe(v))
			}
			list = append(list, ro)
		})
		if ok {
			*out = list
		}
	}
}

// stringMap decodes a mapping of strings to strings. An explicit empty
// mapping yields a non-nil empty map.
func (d *decoder) stringMap(out *map[string]string) func(string, *yaml.Node) {
	return func(path string, n *yaml.Node) {
		if n.Kind != yaml.MappingNode {
			d.fail(path, n, "want a mapping of names to strings, not %s", describe(n))
			return
		}
		m := map[string]string{}
		for _, p := range d.pairs(path, n, 0) {
			sub := child(path, p.k.Value)
			d.lines[sub] = p.v.Line
			var s string
			text(d, &s)(sub, resolve(p.v))
			m[p.k.Value] = s
		}
		*out = m
	}
}

// reservedPaths are the paths the API and the inbox serve, which the
// gateway must not shadow; a path under one of those ending in / is
// reserved too.
var reservedPaths = []string{"/v1/", "/healthz", "/readyz", "/metrics", "/openapi.json",
	"/static/", "/favicon.ico", "/login", "/logout", "/proposals/", "/events"}

var mcpPath = regexp.MustCompile(`^(/[A-Za-z0-9._~-]+)+$`)

// reservedHeaders are set by the streamable HTTP transport itself.
var reservedHeaders = []string{"Accept", "Connection", "Content-Length", "Content-Type", "Host",
	"Last-Event-Id", "Mcp-Protocol-Version", "Mcp-Session-Id", "Transfer-Encoding"}

var headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func (v *validator) mcp(m *MCP) {
	const p = "mcp"
	switch {
	case !mcpPath.MatchString(m.Path) || path.Clean(m.Path) != m.Path:
		v.fail(p+".path", "%q: want an absolute path such as /mcp (segments of letters, digits and . _ ~ -, no trailing /)", m.Path)
	default:
		for _, r := range reservedPaths {
			if m.Path == strings.TrimSuffix(r, "/") || strings.HasSuffix(r, "/") && strings.HasPrefix(m.Path, r) {
				v.fail(p+".path", "%q: the API or the inbox serves %s", m.Path, r)
				break
			}
		}
	}
	if m.StateSecretEnv != "" {
		if err := checkEnvName(m.StateSecretEnv); err != nil {
			v.fail(p+".state_secret_env", "%v", err)
		}
	}
	switch {
	case m.Hold <= 0:
		v.fail(p+".hold", "%v: must be positive", m.Hold)
	case m.Hold > MaxMCPHold:
		v.fail(p+".hold", "%v: at most %v (MCP clients give up on a request long before)", m.Hold, MaxMCPHold)
	}
	first := map[string]string{}
	for i := range m.Servers {
		v.mcpServer(item(p+".servers", i), &m.Servers[i], first)
	}
}

func (v *validator) mcpServer(p string, s *MCPServer, first map[string]string) {
	switch {
	case s.Name == "":
		v.fail(p+".name", "is required: its tools are exported as <name>__<tool>")
	case !mcpname.ValidUpstream(s.Name):
		v.fail(p+".name", "%q: want up to %d letters and digits, with single - or _ between them", s.Name, mcpname.MaxUpstream)
	default:
		if f, dup := first[s.Name]; dup {
			v.fail(p+".name", "%q is already the name of %s (line %d)", s.Name, f, v.line(f))
		} else {
			first[s.Name] = p
		}
	}
	switch {
	case s.Command != nil && s.URL != "":
		v.fail(p, "set command (a stdio server) or url (a streamable HTTP server), not both")
	case s.Command == nil && s.URL == "":
		v.fail(p, "needs command (a stdio server) or url (a streamable HTTP server)")
	case s.Command != nil:
		v.mcpCommand(p, s)
	default:
		v.mcpURL(p, s)
	}
	v.mcpTrust(p, s)
}

// mcpTrust checks what the file vouches for of a server's tools: in
// read_only and idempotent each tool's name upstream once, and each schema
// pin a SHA-256.
func (v *validator) mcpTrust(p string, s *MCPServer) {
	names := make([]string, len(s.ReadOnly))
	for j, ro := range s.ReadOnly {
		names[j] = ro.Name
		if ro.SchemaSHA256 != "" && !sha256Hex.MatchString(ro.SchemaSHA256) {
			v.fail(item(p+".read_only", j)+".schema_sha256", "%q: want the 64 lowercase hex digits of a SHA-256 (see docs/mcp.md)", ro.SchemaSHA256)
		}
	}
	v.mcpToolNames(p+".read_only", names)
	v.mcpToolNames(p+".idempotent", s.Idempotent)
}

// mcpToolNames checks a list of tool names: each a tool's name upstream,
// each once.
func (v *validator) mcpToolNames(p string, names []string) {
	first := map[string]int{}
	for j, name := range names {
		switch k, dup := first[name]; {
		case name == "":
			v.fail(item(p, j), "names no tool: want a tool's exact name upstream")
		case !mcpname.ValidTool(name):
			v.fail(item(p, j), "%q: want a tool's name upstream (1 to 128 of letters, digits, _, - and dots)", name)
		case dup:
			v.fail(item(p, j), "%q is already listed at %s", name, item(p, k))
		default:
			first[name] = j
		}
	}
}

func (v *validator) mcpCommand(p string, s *MCPServer) {
	if len(s.Command) == 0 || s.Command[0] == "" {
		v.fail(p+".command", "names no program: want [program, arguments…]")
	}
	for j, a := range s.Command {
		if strings.ContainsRune(a, 0) {
			v.fail(item(p+".command", j), "holds a NUL byte")
		}
	}
	for _, k := range sortedKeys(s.Env) {
		val := s.Env[k]
		if err := checkEnvName(k); err != nil {
			v.fail(p+".env", "%v", err)
		}
		if strings.ContainsRune(val, 0) {
			v.fail(child(p+".env", k), "holds a NUL byte")
		}
	}
	if s.HeadersEnv != nil {
		v.fail(p+".headers_env", "is for url servers; a command gets env")
	}
}

func (v *validator) mcpURL(p string, s *MCPServer) {
	u, err := url.Parse(s.URL)
	switch {
	case err != nil || !u.IsAbs() || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "":
		v.fail(p+".url", "want an absolute http:// or https:// URL without a #fragment")
	case u.User != nil:
		v.fail(p+".url", "must not hold credentials: give them as headers_env")
	}
	seen := map[string]string{}
	for _, k := range sortedKeys(s.HeadersEnv) {
		env := s.HeadersEnv[k]
		canon := http.CanonicalHeaderKey(k)
		switch {
		case !headerName.MatchString(k):
			v.fail(p+".headers_env", "%q: not a header name", k)
		case slices.Contains(reservedHeaders, canon):
			v.fail(child(p+".headers_env", k), "%s is set by the transport itself", canon)
		case seen[canon] != "":
			v.fail(child(p+".headers_env", k), "repeats %s: header names are case-insensitive", seen[canon])
		}
		seen[canon] = k
		if err := checkEnvName(env); err != nil {
			v.fail(child(p+".headers_env", k), "%v", err)
		}
	}
	if s.Env != nil {
		v.fail(p+".env", "is for command servers; a url server gets headers_env")
	}
}

// sortedKeys lists m's keys in order, so that problems are reported in the
// same order on every run.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
