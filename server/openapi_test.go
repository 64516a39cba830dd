package server

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPIDocument checks that the embedded document is valid OpenAPI
// 3.1 and that /openapi.json serves openapi.json byte for byte, so the
// document the linters and client generators read (test/clients) is the
// one clients get.
func TestOpenAPIDocument(t *testing.T) {
	doc, _, err := spec()
	if err != nil {
		t.Fatalf("the OpenAPI document is invalid: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "mem", harnessOptions{})
	resp := h.must(200, req{method: "GET", path: "/openapi.json"})
	if !bytes.Equal(resp.body, file) {
		t.Error("/openapi.json differs from server/openapi.json")
	}
	if ct := resp.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}

// TestOpenAPIErrorCodes checks that every error code the server declares is
// in the document's ErrorObject.code enum, so a client's exhaustive switch
// over the generated type meets no code it does not know. The one exception
// is METHOD_NOT_ALLOWED: it answers a method a path does not take, which no
// operation of the document is, and the document's description says so.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc, _, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, v := range doc.Components.Schemas["ErrorObject"].Value.Properties["code"].Value.Enum {
		documented = append(documented, v.(string))
	}
	declared := declaredErrorCodes(t)
	if len(declared) < 10 {
		t.Fatalf("found %d Code constants in server/*.go (%v): the scan is broken", len(declared), declared)
	}
	for _, code := range declared {
		if code == CodeMethodNotAllowed {
			if slices.Contains(documented, code) {
				t.Errorf("%s is in the ErrorObject.code enum, but no operation answers it", code)
			}
			if !strings.Contains(doc.Info.Description, "405 "+code) {
				t.Errorf("info.description does not say that a method a path does not take answers 405 %s", code)
			}
			continue
		}
		if !slices.Contains(documented, code) {
			t.Errorf("the server declares error code %s, which ErrorObject.code does not list", code)
		}
	}
}

// declaredErrorCodes returns the values of the Code* string constants of
// the package's non-test files.
func declaredErrorCodes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					codes = append(codes, v)
				}
			}
			return true
		})
	}
	return codes
}

// TestOpenAPIErrorAnswers checks that every operation documents the
// answers the conventions give it wherever they can occur: 415 on every
// operation that takes a body, 401 and 503 on every /v1 operation, so a
// generated client has a type for each.
func TestOpenAPIErrorAnswers(t *testing.T) {
	doc, _, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var want []int
			if strings.HasPrefix(path, "/v1/") {
				want = append(want, 401, 500, 503)
			}
			if op.RequestBody != nil {
				want = append(want, 400, 413, 415)
			}
			for _, status := range want {
				if op.Responses.Status(status) == nil {
					t.Errorf("%s %s does not document %d", method, path, status)
				}
			}
			if len(op.Tags) == 0 || op.Description == "" {
				t.Errorf("%s %s has no tag or no description", method, path)
			}
		}
	}
	if len(doc.Servers) == 0 || doc.Info.License == nil {
		t.Error("the document has no servers entry or no info.license")
	}
}
