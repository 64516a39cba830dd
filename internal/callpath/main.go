// Command callpath prints the path a reader follows through a package from
// one function: every function and method of the package that function
// reaches (called, or passed as a value), depth first in source order, each
// once, with the file it is in. It ends with the three figures
// docs/architecture.md reports for Engine.Call: the functions on the path,
// the files they are in, and how often the path goes back to a file it had
// left.
//
//	go run ./internal/callpath [-from Engine.Call] [-dir .]
//
// It type-checks the package's non-test files from source, so a call
// resolves to the method of the type it is made on, not to every method of
// that name.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	from := flag.String("from", "Engine.Call", "the function to start from: Name, or Type.Method")
	dir := flag.String("dir", ".", "the package's directory")
	flag.Parse()
	p, err := walk(*dir, *from)
	if err != nil {
		fmt.Fprintln(os.Stderr, "callpath:", err)
		os.Exit(1)
	}
	for _, s := range p.Steps {
		fmt.Printf("%-28s %s\n", s.File, s.Func)
	}
	fmt.Printf("\n%d functions, %d files, %d returns to a file left before\n", len(p.Steps), p.Files, p.Returns)
}

// Step is one function on the path.
type Step struct {
	Func string // "(*Engine).Call", "newID"
	File string // the file's base name
}

// Path is what walk found.
type Path struct {
	Steps []Step
	// Files is the number of distinct files on the path.
	Files int
	// Returns counts the steps whose file the path had been in and left:
	// a reader going back to a file they had already read part of.
	Returns int
}

// walk type-checks the package in dir and follows it from from.
func walk(dir, from string) (*Path, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check(files[0].Name.Name, fset, files, info); err != nil {
		return nil, err
	}
	decls := map[types.Object]*ast.FuncDecl{}
	var start types.Object
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			obj := info.Defs[fd.Name]
			decls[obj] = fd
			if funcName(fd) == from {
				start = obj
			}
		}
	}
	if start == nil {
		return nil, fmt.Errorf("no function %s in %s", from, dir)
	}
	p := &Path{}
	seen := map[types.Object]bool{}
	var visit func(obj types.Object)
	visit = func(obj types.Object) {
		seen[obj] = true
		fd := decls[obj]
		p.Steps = append(p.Steps, Step{Func: label(fd), File: filepath.Base(fset.Position(fd.Pos()).Filename)})
		// The identifiers of the body in source order: calls, and functions
		// handed on as values (callbacks), alike.
		var refs []*ast.Ident
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				refs = append(refs, id)
			}
			return true
		})
		sort.SliceStable(refs, func(i, j int) bool { return refs[i].Pos() < refs[j].Pos() })
		for _, id := range refs {
			if o := info.Uses[id]; o != nil && decls[o] != nil && !seen[o] {
				visit(o)
			}
		}
	}
	visit(start)
	left := map[string]bool{}
	files2 := map[string]bool{}
	for i, s := range p.Steps {
		files2[s.File] = true
		if i > 0 && s.File != p.Steps[i-1].File {
			if left[s.File] {
				p.Returns++
			}
			left[p.Steps[i-1].File] = true
		}
	}
	p.Files = len(files2)
	return p, nil
}

// funcName is how -from names fd: Name, or Type.Method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return recvType(fd.Recv.List[0].Type) + "." + fd.Name.Name
}

// label is how the path shows fd: "(*Engine).Call", "newID".
func label(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if _, ok := t.(*ast.StarExpr); ok {
		return "(*" + recvType(t) + ")." + fd.Name.Name
	}
	return recvType(t) + "." + fd.Name.Name
}

func recvType(t ast.Expr) string {
	switch x := t.(type) {
	case *ast.StarExpr:
		return recvType(x.X)
	case *ast.IndexExpr: // a generic receiver
		return recvType(x.X)
	case *ast.IndexListExpr:
		return recvType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
