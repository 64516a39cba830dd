package config

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is this module's path.
const module = "github.com/countersign/countersign"

// allowedImports are the packages beyond the standard library that config
// may import (doc.go lists them, and why): the engine's types and its
// policy check, the agents' and the text decisions' data and checks, and
// the small dependency-free helpers it shares with the packages that
// build. Adding one is a decision: say why in doc.go.
var allowedImports = []string{
	module,                         // Policy, Rule, Options, Policy.Validate, NewRawAction
	module + "/agent",              // DefaultMaxSteps, Agent.Offers
	module + "/agent/scripted",     // a scripted model's rules, checked as scripted.New compiles them
	module + "/internal/condition", // a when against an action's input schema
	module + "/internal/defaults",  // the defaults of the store, the gateway and the deliverer
	module + "/internal/mcpname",   // the gateway's name rules
	module + "/internal/redact",    // URLs in errors
	module + "/internal/schema",    // actions' input schemas
	module + "/textdecision",       // text_decisions
	"go.yaml.in/yaml/v3",           // the file
}

// forbiddenDeps are packages config must not depend on, even through
// another: the store drivers, the model providers and their SDKs, and the
// packages that serve or call over the network. They are the composition
// root's (cmd/countersign) to build.
var forbiddenDeps = []string{
	module + "/store/",
	module + "/agent/openai", module + "/agent/anthropic",
	module + "/mcpgateway", module + "/notifications", module + "/webhook",
	module + "/server", module + "/web", module + "/agui", module + "/cmd/",
	"github.com/jackc/pgx", "modernc.org/sqlite",
	"github.com/openai/", "github.com/anthropics/", "github.com/modelcontextprotocol/",
}

// goList runs go list on config with the template format.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, append(args, ".")...)...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

// TestImports: config parses and validates and builds nothing, so it
// depends on no store driver, provider SDK or network-facing package, and
// imports only the packages allowedImports names (beside the standard
// library).
func TestImports(t *testing.T) {
	t.Parallel()
	for _, dep := range goList(t, "-deps", "-f", "{{.ImportPath}}") {
		for _, f := range forbiddenDeps {
			// A name ending in / forbids what is below it (store/'s
			// drivers, not the store contract the engine's types use).
			if strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f) || dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("config depends on %s (forbidden: %s); build it in cmd/countersign instead", dep, f)
			}
		}
	}
	std := map[string]bool{}
	for _, p := range goList(t, "-deps", "-f", "{{if .Standard}}{{.ImportPath}}{{end}}") {
		std[p] = true
	}
	for _, imp := range goList(t, "-f", `{{join .Imports " "}}`) {
		if !std[imp] && !slices.Contains(allowedImports, imp) {
			t.Errorf("config imports %s, which allowedImports (and doc.go) do not name", imp)
		}
	}
}
