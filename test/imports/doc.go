// Package imports holds TestImports: which package of the module may import
// which. It has no code; see imports_test.go.
package imports
