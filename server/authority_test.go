package server

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// storeDrivers are the packages a surface must not import: it reads and
// writes through the engine, which owns every rule of who may see and do
// what.
var storeDrivers = []string{
	"github.com/countersign/countersign/store/memstore",
	"github.com/countersign/countersign/store/sqlitestore",
	"github.com/countersign/countersign/store/pgstore",
}

// TestServerGoesThroughTheEngine fails when the server's code (this package
// and the ones below it, tests aside) calls a method named Store (the
// engine hands out no store; anything else so named would) or imports a
// store driver. The store package's
// types may still be used: they are what the engine returns.
func TestServerGoesThroughTheEngine(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, driver := range storeDrivers {
				if p == driver || strings.HasPrefix(p, driver+"/") {
					t.Errorf("%s imports the store driver %s", fset.Position(imp.Pos()), p)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Store" && len(call.Args) == 0 {
					t.Errorf("%s calls %s.Store(): read and write through the engine's methods", fset.Position(call.Pos()), exprString(sel.X))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("checked %d files: the walk missed the package", files)
	}
}

func exprString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprString(x.X) + "." + x.Sel.Name
	case *ast.CallExpr:
		return exprString(x.Fun) + "()"
	}
	return "…"
}

// runtimeMethods are the engine's methods for the agent runtime (package
// agent): they take a tenant and check nobody (runhost.go). A surface reads
// and watches a run for its caller with Engine.ThreadRunState and
// Engine.WatchThreadRun instead.
var runtimeMethods = []string{"RunState", "UpdateRun", "WatchRun", "ClaimRuns", "SweepRuns"}

// runtimeCalls lists, as "file:line: X.Method", the calls of a runtime
// method in f.
func runtimeCalls(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && slices.Contains(runtimeMethods, sel.Sel.Name) {
			out = append(out, fmt.Sprintf("%s: %s.%s", fset.Position(call.Pos()), exprString(sel.X), sel.Sel.Name))
		}
		return true
	})
	return out
}

// TestSurfacesUseNoRuntimeMethods fails when the code (tests aside) of a
// surface — this package and those below it, web/, mcpgateway/ — calls
// one of the runtime's run methods, which check nobody: a stream of a run
// must read it as its caller, so that the engine decides who may follow it.
func TestSurfacesUseNoRuntimeMethods(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	for _, root := range []string{".", "../web", "../mcpgateway"} {
		files := 0
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			for _, c := range runtimeCalls(fset, f) {
				t.Errorf("%s: a surface reads runs as their caller (Engine.ThreadRunState, WatchThreadRun), not with the runtime's methods", c)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files < 3 {
			t.Fatalf("%s: checked %d files: the walk missed the package", root, files)
		}
	}
}

// TestRuntimeCallsAreFound: the check above finds each runtime method
// however it is reached, and nothing else.
func TestRuntimeCallsAreFound(t *testing.T) {
	t.Parallel()
	const src = `package p

func f(s *S, e *countersign.Engine) {
	s.engine.RunState(ctx, id.Tenant, runID)
	changed, stop := s.engine.WatchRun(id.Tenant, runID)
	e.UpdateRun(ctx, params)
	e.ClaimRuns(ctx, 4)
	e.SweepRuns(ctx, 4)
	s.engine.ThreadRunState(ctx, id, threadID, runID)
	s.engine.WatchThreadRun(ctx, id, threadID, runID)
	var st *countersign.RunState
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := runtimeCalls(fset, f)
	want := []string{
		"p.go:4:2: s.engine.RunState", "p.go:5:19: s.engine.WatchRun", "p.go:6:2: e.UpdateRun",
		"p.go:7:2: e.ClaimRuns", "p.go:8:2: e.SweepRuns",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("found %q, want %q", got, want)
	}
}
