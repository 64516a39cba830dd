package main

import (
	"slices"
	"testing"
)

// TestWalk: the path goes depth first in source order, takes a function
// handed on as a value (c, given to run), visits each function once, leaves
// out what Start never reaches, and counts the returns to a file left.
func TestWalk(t *testing.T) {
	p, err := walk("testdata/fixture", "T.Start")
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{"(*T).Start", "a.go"}, {"(*T).b", "b.go"}, {"helper", "a.go"}, {"(*T).b2", "b.go"},
		{"run", "a.go"}, {"c", "b.go"},
	}
	if !slices.Equal(p.Steps, want) {
		t.Fatalf("steps %v, want %v", p.Steps, want)
	}
	// a → b → a (return) → b (return) → a (return) → b (return).
	if p.Files != 2 || p.Returns != 4 {
		t.Fatalf("files %d, returns %d; want 2, 4", p.Files, p.Returns)
	}
	if _, err := walk("testdata/fixture", "T.nothing"); err == nil {
		t.Fatal("a missing start function was not reported")
	}
}
