package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// apiMCP is docs/api.md's mcp section.
const apiMCP = `mcp:
  path: /mcp                       # streamable HTTP on the server's listener (bearer auth)
  hold: 50s                        # how long a tools/call waits for an out-of-band decision
  servers:
    - name: fs                     # its tools are exported as fs__<tool>
      command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv/data]   # stdio
      env: {}
    - name: crm
      url: http://127.0.0.1:9200/mcp            # streamable HTTP
      headers_env: {Authorization: CRM_MCP_AUTH}
policy:
  rules:
    - {match: "fs__read_*", effect: allow}
    - {match: "fs__*", channels: [mcp, web]}
`

func TestMCP(t *testing.T) {
	t.Parallel()
	c := parseOK(t, apiMCP)
	want := MCP{Path: "/mcp", Hold: 50 * time.Second, Servers: []MCPServer{
		{Name: "fs", Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/data"}, Env: map[string]string{}},
		{Name: "crm", URL: "http://127.0.0.1:9200/mcp", HeadersEnv: map[string]string{"Authorization": "CRM_MCP_AUTH"}},
	}}
	if !reflect.DeepEqual(c.MCP, want) {
		t.Fatalf("mcp parsed to %+v, want %+v", c.MCP, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate after Parse: %v", err)
	}
	// Without the section, or with only some fields, the defaults hold.
	c = parseOK(t, "mcp:\n  servers:\n    - {name: a, command: [a]}\n")
	if c.MCP.Path != DefaultMCPPath || c.MCP.Hold != DefaultMCPHold {
		t.Fatalf("defaults %q %v", c.MCP.Path, c.MCP.Hold)
	}
}

func TestMCPHeaders(t *testing.T) {
	t.Parallel()
	s := parseOK(t, apiMCP).MCP.Servers[1]
	env := map[string]string{"CRM_MCP_AUTH": "Bearer s3cret"}
	h, err := s.Headers(func(k string) string { return env[k] })
	if err != nil || h.Get("Authorization") != "Bearer s3cret" || len(h) != 1 {
		t.Fatalf("Headers = %v, %v", h, err)
	}
	_, err = s.Headers(func(string) string { return "" })
	if !errors.Is(err, ErrSecretUnset) || !strings.Contains(err.Error(), "CRM_MCP_AUTH") || !strings.Contains(err.Error(), "crm") {
		t.Fatalf("an unset variable: %v, want ErrSecretUnset naming the variable and the server", err)
	}
	if h, err := (MCPServer{Name: "x"}).Headers(func(string) string { return "" }); err != nil || len(h) != 0 {
		t.Fatalf("no headers_env: %v %v", h, err)
	}
}

// apiMCPTrust is docs/api.md Part 3's server: what its operator vouches for.
const apiMCPTrust = `mcp:
  servers:
    - name: fs
      command: [npx, -y, "@modelcontextprotocol/server-filesystem", /srv/data]
      read_only: [read_file, list_directory, {name: search_files, schema_sha256: "%s"}]   # exact names
      idempotent: []                                # tools retried after a broken connection
      trust_annotations: false                      # default false
    - name: crm
      url: http://127.0.0.1:9200/mcp
      headers_env: {Authorization: CRM_MCP_AUTH}
      idempotent: [upsert_contact]
      trust_annotations: true
`

func TestMCPTrust(t *testing.T) {
	t.Parallel()
	pin := strings.Repeat("0123456789abcdef", 4)
	c := parseOK(t, fmt.Sprintf(apiMCPTrust, pin))
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate after Parse: %v", err)
	}
	fs, crm := c.MCP.Servers[0], c.MCP.Servers[1]
	wantRO := []MCPReadOnly{{Name: "read_file"}, {Name: "list_directory"}, {Name: "search_files", SchemaSHA256: pin}}
	if !reflect.DeepEqual(fs.ReadOnly, wantRO) || len(fs.Idempotent) != 0 || fs.Idempotent == nil || fs.TrustAnnotations {
		t.Fatalf("fs: read_only %+v, idempotent %#v, trust %v", fs.ReadOnly, fs.Idempotent, fs.TrustAnnotations)
	}
	if crm.ReadOnly != nil || !reflect.DeepEqual(crm.Idempotent, []string{"upsert_contact"}) || !crm.TrustAnnotations {
		t.Fatalf("crm: read_only %+v, idempotent %v, trust %v", crm.ReadOnly, crm.Idempotent, crm.TrustAnnotations)
	}
	// cmd/countersign builds the gateway's upstreams from them
	// (TestMCPUpstream there).
	// Without the keys nothing is vouched for.
	c = parseOK(t, "mcp:\n  servers:\n    - {name: a, command: [a]}\n")
	if s := c.MCP.Servers[0]; s.ReadOnly != nil || s.Idempotent != nil || s.TrustAnnotations {
		t.Fatalf("defaults: %+v", s)
	}
}

func TestMCPInvalid(t *testing.T) {
	t.Parallel()
	server := func(body string) string { return "mcp:\n  servers:\n    - " + body + "\n" }
	tests := []struct {
		name   string
		yaml   string
		line   int
		reason string
	}{
		{"not a mapping", "mcp: [a]\n", 1, "mcp: want a mapping, not a list"},
		{"unknown key", "mcp:\n  upstreams: []\n", 2, `unknown key "upstreams" in mcp (want path, hold, state_secret_env, servers)`},
		{"state secret env not a name", "mcp: {state_secret_env: \"A-B\"}\n", 1, `mcp.state_secret_env: "A-B": want an environment variable name`},
		{"state secret env type", "mcp: {state_secret_env: [A]}\n", 1, "mcp.state_secret_env: want a string"},
		{"path relative", "mcp: {path: mcp}\n", 1, `mcp.path: "mcp": want an absolute path`},
		{"path root", "mcp: {path: /}\n", 1, `mcp.path: "/": want an absolute path`},
		{"path trailing slash", "mcp: {path: /mcp/}\n", 1, `mcp.path: "/mcp/": want an absolute path`},
		{"path dot segments", "mcp: {path: /a/../mcp}\n", 1, `mcp.path: "/a/../mcp": want an absolute path`},
		{"path double slash", "mcp: {path: //mcp}\n", 1, `mcp.path: "//mcp"`},
		{"path query", "mcp: {path: \"/mcp?x=1\"}\n", 1, `mcp.path: "/mcp?x=1"`},
		{"path space", "mcp: {path: \"/m cp\"}\n", 1, `mcp.path: "/m cp"`},
		{"path control", "mcp: {path: \"/m\\x01\"}\n", 1, "mcp.path:"},
		{"path api", "mcp: {path: /v1/mcp}\n", 1, `mcp.path: "/v1/mcp": the API or the inbox serves /v1/`},
		{"path v1", "mcp: {path: /v1}\n", 1, "the API or the inbox serves /v1/"},
		{"path readyz", "mcp: {path: /readyz}\n", 1, "the API or the inbox serves /readyz"},
		{"path inbox", "mcp: {path: /proposals/mcp}\n", 1, "the API or the inbox serves /proposals/"},
		{"path login", "mcp: {path: /login}\n", 1, "the API or the inbox serves /login"},
		{"path type", "mcp: {path: 1}\n", 1, "mcp.path: want a string, not the integer 1"},
		{"hold zero", "mcp: {hold: 0s}\n", 1, "mcp.hold: 0s: must be positive"},
		{"hold negative", "mcp: {hold: -5s}\n", 1, "mcp.hold: -5s: must be positive"},
		{"hold huge", "mcp: {hold: 1h}\n", 1, "mcp.hold: 1h0m0s: at most 10m0s"},
		{"hold number", "mcp: {hold: 50}\n", 1, "mcp.hold: want a duration"},
		{"servers not list", "mcp: {servers: {name: a}}\n", 1, "mcp.servers: want a list, not a mapping"},
		{"server not mapping", server("fs"), 3, `mcp.servers[0]: want a mapping, not the string "fs"`},
		{"server unknown key", server("{name: a, command: [a], args: [b]}"), 3, `unknown key "args" in mcp.servers[0] (want name, command, env, url, headers_env, read_only, idempotent, trust_annotations)`},
		{"name missing", server("{command: [a]}"), 3, "mcp.servers[0].name: is required"},
		{"name double underscore", server("{name: a__b, command: [a]}"), 3, `mcp.servers[0].name: "a__b": want up to 64 letters and digits, with single - or _ between them`},
		{"name trailing underscore", server("{name: a_, command: [a]}"), 3, `"a_": want up to 64`},
		{"name dot", server("{name: a.b, command: [a]}"), 3, `"a.b": want up to 64`},
		{"name long", server("{name: " + strings.Repeat("a", 65) + ", command: [a]}"), 3, "want up to 64"},
		{"name unicode", server("{name: \"é\", command: [a]}"), 3, `"é": want up to 64`},
		{"name twice", "mcp:\n  servers:\n    - {name: a, command: [a]}\n    - {name: a, command: [b]}\n", 4, `mcp.servers[1].name: "a" is already the name of mcp.servers[0] (line 3)`},
		{"neither", server("{name: a}"), 3, "mcp.servers[0]: needs command (a stdio server) or url"},
		{"both", server("{name: a, command: [a], url: \"http://h/mcp\"}"), 3, "mcp.servers[0]: set command (a stdio server) or url (a streamable HTTP server), not both"},
		{"command empty", server("{name: a, command: []}"), 3, "mcp.servers[0].command: names no program"},
		{"command empty program", server("{name: a, command: [\"\", x]}"), 3, "mcp.servers[0].command: names no program"},
		{"command not list", server("{name: a, command: \"npx -y x\"}"), 3, "mcp.servers[0].command: want a list"},
		{"command number", server("{name: a, command: [npx, 1]}"), 3, "mcp.servers[0].command[1]: want a string, not the integer 1"},
		{"command NUL", server("{name: a, command: [\"a\\0b\"]}"), 3, "mcp.servers[0].command[0]: holds a NUL byte"},
		{"env not mapping", server("{name: a, command: [a], env: [X=1]}"), 3, "mcp.servers[0].env: want a mapping of names to strings, not a list"},
		{"env name", server("{name: a, command: [a], env: {\"1X\": v}}"), 3, `mcp.servers[0].env: "1X": want an environment variable name`},
		{"env value number", server("{name: a, command: [a], env: {X: 1}}"), 3, "mcp.servers[0].env.X: want a string, not the integer 1"},
		{"env value NUL", server("{name: a, command: [a], env: {X: \"a\\0\"}}"), 3, "mcp.servers[0].env.X: holds a NUL byte"},
		{"env repeated", "mcp:\n  servers:\n    - name: a\n      command: [a]\n      env:\n        X: a\n        X: b\n", 7, `key "X" repeats the one on line 6`},
		{"env on url", server("{name: a, url: \"http://h/mcp\", env: {X: y}}"), 3, "mcp.servers[0].env: is for command servers"},
		{"headers on command", server("{name: a, command: [a], headers_env: {Authorization: X}}"), 3, "mcp.servers[0].headers_env: is for url servers"},
		{"url relative", server("{name: a, url: /mcp}"), 3, "mcp.servers[0].url: want an absolute http:// or https:// URL"},
		{"url scheme", server("{name: a, url: \"ftp://h/mcp\"}"), 3, "mcp.servers[0].url: want an absolute http:// or https:// URL"},
		{"url no host", server("{name: a, url: \"http:///mcp\"}"), 3, "mcp.servers[0].url: want an absolute"},
		{"url fragment", server("{name: a, url: \"http://h/mcp#x\"}"), 3, "without a #fragment"},
		{"url credentials", server("{name: a, url: \"https://u:p@h/mcp\"}"), 3, "mcp.servers[0].url: must not hold credentials: give them as headers_env"},
		{"url junk", server("{name: a, url: \"http://[::1\"}"), 3, "mcp.servers[0].url: want an absolute"},
		{"header name", server("{name: a, url: \"http://h/mcp\", headers_env: {\"X Auth\": T}}"), 3, `mcp.servers[0].headers_env: "X Auth": not a header name`},
		{"header reserved", server("{name: a, url: \"http://h/mcp\", headers_env: {mcp-session-id: T}}"), 3, "mcp.servers[0].headers_env.mcp-session-id: Mcp-Session-Id is set by the transport itself"},
		{"header twice", server("{name: a, url: \"http://h/mcp\", headers_env: {Authorization: T, authorization: U}}"), 3, "mcp.servers[0].headers_env.authorization: repeats Authorization"},
		{"header env name", server("{name: a, url: \"http://h/mcp\", headers_env: {Authorization: \"Bearer abc\"}}"), 3, `mcp.servers[0].headers_env.Authorization: "Bearer abc": want an environment variable name`},
		{"read_only not list", server("{name: a, command: [a], read_only: read_file}"), 3, `mcp.servers[0].read_only: want a list, not the string "read_file"`},
		{"read_only empty name", server("{name: a, command: [a], read_only: [\"\"]}"), 3, "mcp.servers[0].read_only[0]: names no tool"},
		{"read_only empty name in mapping", server("{name: a, command: [a], read_only: [{schema_sha256: " + strings.Repeat("a", 64) + "}]}"), 3, "mcp.servers[0].read_only[0]: names no tool"},
		{"read_only twice", server("{name: a, command: [a], read_only: [read_file, list, {name: read_file}]}"), 3, `mcp.servers[0].read_only[2]: "read_file" is already listed at mcp.servers[0].read_only[0]`},
		{"read_only not a tool name", server("{name: a, command: [a], read_only: [\"read file\"]}"), 3, `mcp.servers[0].read_only[0]: "read file": want a tool's name upstream`},
		{"read_only number", server("{name: a, command: [a], read_only: [1]}"), 3, "mcp.servers[0].read_only[0]: want a string, not the integer 1"},
		{"read_only list item", server("{name: a, command: [a], read_only: [[x]]}"), 3, "mcp.servers[0].read_only[0]: want a tool's name or {name, schema_sha256}, not a list"},
		{"read_only unknown key", server("{name: a, command: [a], read_only: [{name: x, sha256: y}]}"), 3, `unknown key "sha256" in mcp.servers[0].read_only[0] (want name, schema_sha256)`},
		{"schema_sha256 short", server("{name: a, command: [a], read_only: [{name: x, schema_sha256: abc}]}"), 3, `mcp.servers[0].read_only[0].schema_sha256: "abc": want the 64 lowercase hex digits`},
		{"schema_sha256 not hex", server("{name: a, command: [a], read_only: [{name: x, schema_sha256: " + strings.Repeat("g", 64) + "}]}"), 3, "mcp.servers[0].read_only[0].schema_sha256:"},
		{"schema_sha256 upper case", server("{name: a, command: [a], read_only: [{name: x, schema_sha256: " + strings.Repeat("A", 64) + "}]}"), 3, "mcp.servers[0].read_only[0].schema_sha256:"},
		{"schema_sha256 number", server("{name: a, command: [a], read_only: [{name: x, schema_sha256: 12}]}"), 3, "mcp.servers[0].read_only[0].schema_sha256: want a string, not the integer 12"},
		{"idempotent twice", server("{name: a, url: \"http://h/mcp\", idempotent: [put, put]}"), 3, `mcp.servers[0].idempotent[1]: "put" is already listed at mcp.servers[0].idempotent[0]`},
		{"idempotent empty", server("{name: a, command: [a], idempotent: [\"\"]}"), 3, "mcp.servers[0].idempotent[0]: names no tool"},
		{"idempotent not list", server("{name: a, command: [a], idempotent: {put: true}}"), 3, "mcp.servers[0].idempotent: want a list, not a mapping"},
		{"trust_annotations string", server("{name: a, command: [a], trust_annotations: \"yes\"}"), 3, `mcp.servers[0].trust_annotations: want true or false, not the string "yes"`},
		{"header env type", server("{name: a, url: \"http://h/mcp\", headers_env: {Authorization: [T]}}"), 3, "mcp.servers[0].headers_env.Authorization: want a string, not a list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("bad.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\n%+v", tt.yaml, c.MCP)
			}
			errs := Errors(err)
			if len(errs) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(errs), err)
			}
			if e := errs[0]; e.File != "bad.yaml" || e.Line != tt.line || !strings.Contains(e.Reason, tt.reason) {
				t.Errorf("got %q (line %d)\nwant line %d and a reason holding %q", e.Error(), e.Line, tt.line, tt.reason)
			}
		})
	}
}
