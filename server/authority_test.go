package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
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
// and the ones below it, tests aside) calls a Store method — Engine.Store()
// or anything else named so — or imports a store driver. The store package's
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
