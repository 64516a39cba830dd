package imports

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mod is the module's path; the table below names packages relative to it
// ("" is the root, package countersign).
const mod = "github.com/countersign/countersign"

// The kinds of package, each a list of patterns: a name, or a name ending
// in "/..." for it and everything below it.
var (
	// records is package cstype: what the engine reads and returns.
	records = []string{"cstype"}
	// contract is the driver contract; drivers implement it.
	contract = []string{"store"}
	drivers  = []string{"store/memstore", "store/sqlitestore", "store/pgstore", "store/storetest"}
	// surfaces translate a protocol into engine calls and decide nothing
	// themselves (docs/design.md §14). They see records, never a store.
	surfaces = []string{
		"server/...", "web/...", "mcpgateway/...", "agent/...", "agui/...",
		"textdecision/...", "notifications/...", "config/...", "webhook/...", "channels/...",
	}
	// composition roots build an engine on a store and mount the surfaces
	// on it: they may import anything.
	composition = []string{"cmd/...", "clients/...", "examples/...", "bench/...", "test/...", "internal/workload", "internal/faultstore"}
	// runHost and outboxHost are the keys to the engine's privileged sides
	// (Engine.RunHost, Engine.Outbox), which check nobody.
	runHost    = []string{"internal/runhost"}
	outboxHost = []string{"internal/outboxhost"}
	// storeWork is the engine's own store work behind its loops.
	storeWork = []string{"internal/maintenance"}
	// verifiers are the engine's own checks of what a person presents (a
	// passkey's signature): below the engine, importing nothing of the
	// module, so that they decide nothing and know nobody.
	verifiers = []string{"passkey"}
)

// rule forbids packages matching from to import, in their production code
// (tests aside), a package matching to, unless either matches one of
// except.
type rule struct {
	name     string
	from, to []string
	except   []string
	// deps checks every package from depends on (go list -deps), not only
	// the ones it imports itself.
	deps bool
	why  string
}

var rules = []rule{
	{
		name: "surfaces import no store", from: surfaces, to: append(append([]string{}, contract...), drivers...),
		why: "a surface reads and writes through the engine, which owns every rule of who may see and do what; it names records with cstype",
	},
	{
		name: "surfaces import no store work", from: surfaces, to: append(append([]string{}, storeWork...), "internal/faultstore", "internal/workload"),
		except: []string{"notifications/..."},
		why:    "only the deliverer drives internal/maintenance's loop, on the outbox the engine hands it (Engine.Outbox)",
	},
	{
		name: "only the agent runtime holds the run host", from: surfaces, to: runHost, except: []string{"agent"},
		why: "RunHost's methods read, write and claim any run and check nobody: a surface reads a run as its caller (ThreadRunState, WatchThreadRun)",
	},
	{
		name: "only the deliverer holds the outbox", from: surfaces, to: outboxHost, except: []string{"notifications"},
		why: "Engine.Outbox claims any tenant's notifications and checks nobody",
	},
	{
		name: "the root imports no surface", from: []string{""}, to: surfaces, deps: true,
		except: []string{"textdecision"},
		why:    "the engine is below every surface; textdecision is the chat-text parser the engine's own ParseDecision uses, and imports nothing of the module",
	},
	{
		name: "the records import no store, engine or surface", from: records, deps: true,
		to:  append(append(append([]string{""}, contract...), drivers...), surfaces...),
		why: "cstype is the bottom: every other package may name a record",
	},
	{
		name: "the contract and drivers import no engine or surface", from: append(append([]string{}, contract...), drivers...), deps: true,
		to:  append([]string{""}, surfaces...),
		why: "a store knows records, not who uses them",
	},
	{
		name: "a verifier imports nothing of the module", from: verifiers, deps: true,
		to:  slices.Concat([]string{""}, records, contract, drivers, surfaces, composition, []string{"internal/..."}),
		why: "package passkey checks signatures for the engine, which alone decides who may do what",
	},
	{
		name: "the engine and the surfaces import no test support", from: append([]string{""}, surfaces...),
		to:  []string{"channels/slack/slacktest", "channels/email/emailtest"},
		why: "slacktest and emailtest fake Slack and an SMTP server for tests; a surface that imports them talks to a fake",
	},
	{
		name: "config imports no store", from: []string{"config/..."}, deps: true, to: drivers,
		why: "a configuration is read and checked without opening a store; cmd/countersign opens it",
	},
}

// pkg is one package of the module as go list sees it.
type pkg struct {
	path    string // relative to mod; "" for the root
	imports []string
	deps    []string
}

// match reports whether rel (a path relative to mod) matches a pattern.
func match(patterns []string, rel string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if rel == base || strings.HasPrefix(rel, base+"/") {
				return true
			}
		} else if rel == p {
			return true
		}
	}
	return false
}

// check returns every edge of graph that a rule forbids, one line each.
func check(graph []pkg, rules []rule) []string {
	var out []string
	for _, r := range rules {
		for _, p := range graph {
			if !match(r.from, p.path) || match(r.except, p.path) {
				continue
			}
			edges := p.imports
			if r.deps {
				edges = p.deps
			}
			for _, to := range edges {
				if match(r.to, to) && !match(r.except, to) {
					out = append(out, fmt.Sprintf("%s: %q imports %q: %s", r.name, p.path, to, r.why))
				}
			}
		}
	}
	return out
}

// rel is path relative to mod, and whether it is in the module.
func rel(path string) (string, bool) {
	if path == mod {
		return "", true
	}
	r, ok := strings.CutPrefix(path, mod+"/")
	return r, ok
}

// listModule is the module's import graph, from go list -deps: for each of
// its packages, what its production code imports and all it depends on,
// both restricted to the module.
func listModule(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var graph []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			t.Fatalf("go list: line %q", sc.Text())
		}
		path, ok := rel(f[0])
		if !ok {
			continue // the standard library and other modules
		}
		p := pkg{path: path}
		for _, imp := range strings.Fields(f[1]) {
			if r, ok := rel(imp); ok {
				p.imports = append(p.imports, r)
			}
		}
		for _, d := range strings.Fields(f[2]) {
			if r, ok := rel(d); ok {
				p.deps = append(p.deps, r)
			}
		}
		graph = append(graph, p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return graph
}

// TestImports checks the module's import graph against the rules.
func TestImports(t *testing.T) {
	graph := listModule(t)
	// The rules must be about packages that exist: a renamed package would
	// otherwise leave a rule checking nothing.
	for _, r := range rules {
		n := 0
		for _, p := range graph {
			if match(r.from, p.path) {
				n++
			}
		}
		if n == 0 {
			t.Errorf("rule %q: no package matches %q", r.name, r.from)
		}
	}
	for _, kind := range [][]string{records, contract, drivers, surfaces, runHost, outboxHost, storeWork} {
		for _, pat := range kind {
			if !slices.ContainsFunc(graph, func(p pkg) bool { return match([]string{pat}, p.path) }) {
				t.Errorf("pattern %q matches no package of the module", pat)
			}
		}
	}
	for _, v := range check(graph, rules) {
		t.Error(v)
	}
	// Every package is of a kind the rules know, so that a new one is
	// placed in the table rather than left out of it.
	kinds := slices.Concat([]string{""}, records, contract, drivers, surfaces, composition, runHost, outboxHost, storeWork, verifiers, []string{"internal/..."})
	for _, p := range graph {
		if !match(kinds, p.path) {
			t.Errorf("package %q is of no kind in TestImports's table: place it", p.path)
		}
	}
}

// TestImportsFindsEachForbiddenEdge breaks each rule on purpose, in a
// made-up graph, and shows that check reports it (and nothing else), so
// that no rule passes because it cannot fail.
func TestImportsFindsEachForbiddenEdge(t *testing.T) {
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			from := firstOf(r.from, r.except)
			to := firstOf(r.to, r.except)
			edge := pkg{path: from}
			if r.deps {
				edge.deps = []string{to}
			} else {
				edge.imports = []string{to}
			}
			got := check([]pkg{edge}, []rule{r})
			if len(got) != 1 || !strings.Contains(got[0], fmt.Sprintf("%q imports %q", from, to)) {
				t.Fatalf("%q → %q: check reported %q, want the one edge", from, to, got)
			}
			// The same edge in a package the rule does not cover, or to a
			// package it allows, is not reported.
			if got := check([]pkg{{path: "cmd/countersign", imports: []string{to}, deps: []string{to}}}, []rule{r}); len(got) != 0 {
				t.Fatalf("cmd/countersign → %q: check reported %q", to, got)
			}
			if got := check([]pkg{{path: from, imports: []string{"cstype"}, deps: []string{"cstype"}}}, []rule{r}); len(got) != 0 && !match(r.to, "cstype") {
				t.Fatalf("%q → cstype: check reported %q", from, got)
			}
			for _, ex := range r.except {
				if strings.HasSuffix(ex, "/...") {
					continue
				}
				if got := check([]pkg{{path: ex, imports: []string{to}, deps: []string{to}}}, []rule{r}); len(got) != 0 {
					t.Fatalf("excepted %q → %q: check reported %q", ex, to, got)
				}
			}
		})
	}
	// A deps rule reads what a package depends on through others too; an
	// imports rule only what it imports itself.
	root := rules[slices.IndexFunc(rules, func(r rule) bool { return r.name == "the root imports no surface" })]
	if got := check([]pkg{{path: "", imports: []string{"cstype"}, deps: []string{"cstype", "server"}}}, []rule{root}); len(got) != 1 {
		t.Fatalf("root depending on server through another package: check reported %q", got)
	}
}

// firstOf is a concrete package path that matches patterns and not except.
func firstOf(patterns, except []string) string {
	for _, p := range patterns {
		c := strings.TrimSuffix(p, "/...")
		if !match(except, c) {
			return c
		}
		if c2 := c + "/sub"; strings.HasSuffix(p, "/...") && !match(except, c2) {
			return c2
		}
	}
	panic(fmt.Sprintf("no package matches %q outside %q", patterns, except))
}

// TestRootAPIIsNotTypedInStore: the root's exported API names records
// (cstype) and its own types, never the driver contract's, so that a
// surface that uses it need not import store. The one exception is where
// the driver comes in: Options.Store, as River's NewClient takes a driver.
func TestRootAPIIsNotTypedInStore(t *testing.T) {
	bad := storeInAPI(t, filepath.Join("..", ".."))
	if !slices.Equal(bad, []string{"Options.Store"}) {
		t.Errorf("the root's exported API names package store in %q; want only Options.Store (records are in cstype)", bad)
	}
}

// TestStoreInAPIIsFound: the check above finds store in every place an
// exported name can carry a type.
func TestStoreInAPIIsFound(t *testing.T) {
	dir := t.TempDir()
	const src = `package countersign

import "github.com/countersign/countersign/store"

type Options struct{ Store store.Store; hidden store.Store }
type A = store.Proposal
type B struct{ P *store.Proposal }
type C interface{ M(store.GetRunParams) }
func F(p store.ListProposalsParams) {}
func G() []*store.Run { return nil }
func (e *Engine) H(x map[string]store.Status) {}
func (e *Engine) h(x store.Status) {}
func i(x store.Status) {}
type Engine struct{ s store.Store }
var V store.Status
const K = store.StatusPending
`
	if err := writeFile(filepath.Join(dir, "a.go"), src); err != nil {
		t.Fatal(err)
	}
	want := []string{"A", "B.P", "C", "F", "G", "H", "K", "Options.Store", "V"}
	if got := storeInAPI(t, dir); !slices.Equal(got, want) {
		t.Fatalf("found %q, want %q", got, want)
	}
}

// storeInAPI lists the exported declarations of the package in dir (tests
// aside) whose type names package store.
func storeInAPI(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	usesStore := func(n ast.Node) bool {
		hit := false
		ast.Inspect(n, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "store" {
					hit = true
				}
			}
			return !hit
		})
		return hit
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil && !recvExported(d.Recv) {
					continue
				}
				if usesStore(d.Type) {
					found = append(found, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						st, isStruct := s.Type.(*ast.StructType)
						if !isStruct || s.Assign != 0 {
							if usesStore(s.Type) {
								found = append(found, s.Name.Name)
							}
							continue
						}
						for _, fld := range st.Fields.List {
							for _, n := range fld.Names {
								if n.IsExported() && usesStore(fld.Type) {
									found = append(found, s.Name.Name+"."+n.Name)
								}
							}
							if len(fld.Names) == 0 && usesStore(fld.Type) { // embedded
								found = append(found, s.Name.Name+".(embedded)")
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && ((s.Type != nil && usesStore(s.Type)) || slices.ContainsFunc(s.Values, func(v ast.Expr) bool { return usesStore(v) })) {
								found = append(found, n.Name)
							}
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatalf("%s: no files checked", dir)
	}
	slices.Sort(found)
	return found
}

func recvExported(l *ast.FieldList) bool {
	t := l.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

func writeFile(name, s string) error { return os.WriteFile(name, []byte(s), 0o644) }
