package web

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOneAuthority fails when the inbox's code (not its tests) reads the
// store behind the engine's back or decides who may see what itself: every
// read and every permission is the engine's. It calls no Store() method,
// imports no store driver, and uses none of the store's visibility rules.
func TestOneAuthority(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	drivers := []string{
		"github.com/countersign/countersign/store/memstore",
		"github.com/countersign/countersign/store/sqlitestore",
		"github.com/countersign/countersign/store/pgstore",
	}
	visibility := map[string]bool{"CanSee": true, "Visibility": true}
	fset := token.NewFileSet()
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
		storeName := ""
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, d := range drivers {
				if path == d || strings.HasPrefix(path, d+"/") {
					t.Errorf("%s imports the store driver %s", fset.Position(imp.Pos()), path)
				}
			}
			if path == "github.com/countersign/countersign/store" {
				storeName = "store"
				if imp.Name != nil {
					storeName = imp.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Store" && len(n.Args) == 0 {
					t.Errorf("%s calls .Store(): read through the engine instead", fset.Position(n.Pos()))
				}
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && storeName != "" && id.Name == storeName && visibility[n.Sel.Name] {
					t.Errorf("%s uses store.%s: who may see what is the engine's to decide", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no files checked")
	}
}
