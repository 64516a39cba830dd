package docs

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// channelDirs are the approver channels' packages, whose routes the
// OpenAPI document describes beside the server's.
var channelDirs = []string{"channels/email", "channels/slack"}

// notYetServed are the routes docs/api.md promises that the server does not
// serve yet (Part 3 features still to build), each with the section that
// defines it. The contract is the target, so docs/api.md keeps them; the
// OpenAPI document describes only what is served. When one is built, add
// it to server/openapi.json and delete its line here: the test fails while
// a route is both here and in openapi.json, or registered by any Go code
// while still here.
var notYetServed = map[string]string{}

// codesNotInOpenAPI are error codes docs/api.md's table lists that the
// OpenAPI document's ErrorObject.code enum does not, and why. Delete a
// line when its code joins the enum.
var codesNotInOpenAPI = map[string]string{
	// It answers a method a path does not take, which is no operation of
	// the document; info.description says so (server's TestOpenAPIErrorCodes).
	"METHOD_NOT_ALLOWED": "answers no operation",
}

const (
	contractFile = "docs/api.md"
	openAPIFile  = "server/openapi.json"
	serverDir    = "server"
)

var (
	// docRoute is a route as docs/api.md writes one, in a code span:
	// `GET /v1/proposals?status=…`, `GET|POST /d/{token}`.
	docRoute = regexp.MustCompile("`((?:GET|POST|PUT|PATCH|DELETE)(?:\\|(?:GET|POST|PUT|PATCH|DELETE))*) (/[^`\\s?]*)")
	// tableRoute is a row of docs/api.md's Routes table.
	tableRoute = regexp.MustCompile("(?m)^\\| `((?:GET|POST|PUT|PATCH|DELETE) /[^`\\s]*)` \\|")
	// tableCode is a row of docs/api.md's error-code table.
	tableCode = regexp.MustCompile("(?m)^\\| `([A-Z][A-Z_]+)` \\| [0-9]{3} \\|")
	// param is a path parameter, whose name does not matter to a route.
	param = regexp.MustCompile(`\{[^}]*\}`)
)

// route is "METHOD /path" with its parameters' names dropped, so that
// docs/api.md's /v1/threads/{id}/messages is /v1/threads/{thread_id}/messages.
func route(method, p string) string {
	return method + " " + param.ReplaceAllString(p, "{}")
}

// routes maps normalised routes to a spelling of each.
type routes map[string]string

func (r routes) add(method, p string) { r[route(method, p)] = method + " " + p }

func (r routes) sorted() []string { return slices.Sorted(maps.Keys(r)) }

// contractRoutes returns every route docs/api.md names anywhere, and those
// of its Routes table.
func contractRoutes(t *testing.T) (named, table routes) {
	t.Helper()
	b, _ := read(t, contractFile)
	named, table = routes{}, routes{}
	for _, m := range docRoute.FindAllStringSubmatch(string(b), -1) {
		for method := range strings.SplitSeq(m[1], "|") {
			named.add(method, m[2])
		}
	}
	for _, m := range tableRoute.FindAllStringSubmatch(string(b), -1) {
		method, p, _ := strings.Cut(m[1], " ")
		table.add(method, p)
	}
	if len(table) < 20 || len(named) < len(table) {
		t.Fatalf("%s: %d routes named, %d in the Routes table: the scan is broken", contractFile, len(named), len(table))
	}
	return named, table
}

// openAPI is the part of the OpenAPI document these tests read.
type openAPI struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]struct {
				Enum []string `json:"enum"`
			} `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func readOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	b, _ := read(t, openAPIFile)
	var doc openAPI
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIFile, err)
	}
	return &doc
}

// operations returns the document's operations.
func (doc *openAPI) operations() routes {
	ops := routes{}
	for p, item := range doc.Paths {
		for method := range item {
			switch m := strings.ToUpper(method); m {
			case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE":
				ops.add(m, p)
			}
		}
	}
	return ops
}

// TestContractAndOpenAPIRoutesAgree checks that docs/api.md and
// server/openapi.json describe the same routes: every operation of the
// OpenAPI document is in the contract's Routes table, every route the
// contract names anywhere is in that table, and every route of the table is
// in the OpenAPI document unless notYetServed lists it (which it may only do
// while the document lacks it).
func TestContractAndOpenAPIRoutesAgree(t *testing.T) {
	tracked(t)
	named, table := contractRoutes(t)
	ops := readOpenAPI(t).operations()
	if len(ops) < 20 {
		t.Fatalf("%s has %d operations: the scan is broken", openAPIFile, len(ops))
	}
	pending := routes{}
	for r := range notYetServed {
		method, p, _ := strings.Cut(r, " ")
		pending.add(method, p)
	}
	for _, r := range ops.sorted() {
		if _, ok := table[r]; !ok {
			t.Errorf("%s has %s, which %s's Routes table does not list: document it (a row in Routes, and the section that defines it)", openAPIFile, ops[r], contractFile)
		}
		if _, ok := pending[r]; ok {
			t.Errorf("%s is in %s now: delete it from notYetServed", ops[r], openAPIFile)
		}
	}
	for _, r := range named.sorted() {
		if _, ok := table[r]; !ok {
			t.Errorf("%s names %s, which its Routes table does not list", contractFile, named[r])
		}
	}
	for _, r := range table.sorted() {
		_, inDoc := ops[r]
		_, isPending := pending[r]
		if !inDoc && !isPending {
			t.Errorf("%s lists %s, which %s does not describe: describe it there if the server serves it, else add it to notYetServed", contractFile, table[r], openAPIFile)
		}
	}
	for _, r := range pending.sorted() {
		if _, ok := table[r]; !ok {
			t.Errorf("notYetServed lists %s, which %s's Routes table does not: delete it", pending[r], contractFile)
		}
	}
}

// registered is a route pattern some Go code registers on a ServeMux.
type registered struct {
	method, path string // method "" matches every method
	at           string // file:line
}

// registeredRoutes returns the literal patterns passed to a Handle or
// HandleFunc call in the tracked, non-test Go files under dir ("" for all),
// and the places where a pattern is not a literal.
func registeredRoutes(t *testing.T, dir string) (found []registered, opaque []string) {
	t.Helper()
	r := tracked(t)
	fset := token.NewFileSet()
	for _, f := range r.files {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") || (dir != "" && path.Dir(f) != dir) {
			continue
		}
		src, _ := read(t, f)
		file, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			at := fset.Position(call.Pos())
			where := f + ":" + strconv.Itoa(at.Line)
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				opaque = append(opaque, where)
				return true
			}
			pattern, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			method, p, ok := strings.Cut(pattern, " ")
			if !ok {
				method, p = "", pattern
			}
			found = append(found, registered{method: method, path: strings.TrimSpace(p), at: where})
			return true
		})
	}
	return found, opaque
}

// TestServedRoutesAreTheOpenAPIOperations checks that the HTTP server
// (server/*.go) registers exactly the operations of server/openapi.json,
// so the document a client generator reads never lags what is served.
func TestServedRoutesAreTheOpenAPIOperations(t *testing.T) {
	found, opaque := registeredRoutes(t, serverDir)
	// The approver channels' pages are operations of the document too,
	// served by their own packages (serve mounts them beside the API).
	for _, dir := range channelDirs {
		f, o := registeredRoutes(t, dir)
		found, opaque = append(found, f...), append(opaque, o...)
	}
	for _, where := range opaque {
		t.Errorf("%s: a route pattern that is not a string literal: this test cannot read it", where)
	}
	served := routes{}
	for _, reg := range found {
		if reg.method == "" && reg.path == "/" {
			continue // the answer to every unmatched request: 404 or 405
		}
		if reg.method == "" {
			t.Errorf("%s: %q takes every method; give it one, as every operation has", reg.at, reg.path)
			continue
		}
		served.add(reg.method, reg.path)
	}
	if len(served) < 20 {
		t.Fatalf("found %d routes in %s/*.go: the scan is broken", len(served), serverDir)
	}
	ops := readOpenAPI(t).operations()
	for _, r := range served.sorted() {
		if _, ok := ops[r]; !ok {
			t.Errorf("the server serves %s, which %s does not describe", served[r], openAPIFile)
		}
	}
	for _, r := range ops.sorted() {
		if _, ok := served[r]; !ok {
			t.Errorf("%s describes %s, which the server does not register", openAPIFile, ops[r])
		}
	}
}

// TestNotYetServedIsNotServed checks that no Go code of the module registers
// a route of notYetServed, by its exact pattern or by the folder it lies
// in ("/d/" serves /d/{token}): a route that is built goes into
// server/openapi.json and out of notYetServed.
func TestNotYetServedIsNotServed(t *testing.T) {
	found, _ := registeredRoutes(t, "")
	for want, section := range notYetServed {
		method, p, _ := strings.Cut(want, " ")
		// The folder a route lies in, up to its first parameter.
		folder := p
		if i := strings.IndexByte(p, '{'); i >= 0 {
			folder = p[:i]
		}
		for _, reg := range found {
			if reg.method != "" && reg.method != method {
				continue
			}
			if route("", reg.path) == route("", p) || (strings.HasSuffix(reg.path, "/") && reg.path == folder) {
				t.Errorf("%s registers %q, which serves %s (%s in %s): describe it in %s and delete it from notYetServed",
					reg.at, strings.TrimSpace(reg.method+" "+reg.path), want, section, contractFile, openAPIFile)
			}
		}
	}
}

// TestErrorCodesAreDocumented checks that every code of the OpenAPI
// document's ErrorObject.code enum has a row in docs/api.md's error-code
// table, and that every row's code is in the enum unless codesNotInOpenAPI
// says why not (and only while it is not).
func TestErrorCodesAreDocumented(t *testing.T) {
	tracked(t)
	enum := readOpenAPI(t).Components.Schemas["ErrorObject"].Properties["code"].Enum
	if len(enum) < 10 {
		t.Fatalf("%s: ErrorObject.code has %d values: the scan is broken", openAPIFile, len(enum))
	}
	b, _ := read(t, contractFile)
	documented := map[string]bool{}
	for _, m := range tableCode.FindAllStringSubmatch(string(b), -1) {
		documented[m[1]] = true
	}
	for _, code := range enum {
		if !documented[code] {
			t.Errorf("%s's ErrorObject.code has %s, which %s's error-code table does not list", openAPIFile, code, contractFile)
		}
		if _, ok := codesNotInOpenAPI[code]; ok {
			t.Errorf("%s is in %s's ErrorObject.code now: delete it from codesNotInOpenAPI", code, openAPIFile)
		}
	}
	for _, code := range slices.Sorted(maps.Keys(documented)) {
		_, excused := codesNotInOpenAPI[code]
		if !slices.Contains(enum, code) && !excused {
			t.Errorf("%s's error-code table lists %s, which %s's ErrorObject.code does not: add it there, or to codesNotInOpenAPI with the reason", contractFile, code, openAPIFile)
		}
	}
	for code := range codesNotInOpenAPI {
		if !documented[code] {
			t.Errorf("codesNotInOpenAPI lists %s, which %s's error-code table does not: delete it", code, contractFile)
		}
	}
}
